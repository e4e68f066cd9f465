"""vmmtui where it has less than Linux with cuda-python: a Mac (no cuda-python wheel, no memfd,
no /proc), Windows (no SIGHUP, SIGKILL ...), a slim Linux install without cuda-python.

Other platforms are played here as far as they can be: the environment a process sees is cut down
by tests/fixtures/elsewhere/sitecustomize.py (cuda-python not importable; the signal module as on
Windows), for the command and every Python process it starts; ``sys.platform`` is set in-process.
Whether pip finds wheels there is resolved by scripts/resolve-wheels.py in .ci/run (network).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.commands import vmmtui
from vmmtui.cli import main
from vmmtui.system import host

ROOT = Path(__file__).resolve().parents[2]
ELSEWHERE = ROOT / "tests" / "fixtures" / "elsewhere"


def missing(without: str) -> dict[str, str]:
    """The environment of a process where ``without`` is missing (tests/fixtures/elsewhere's
    sitecustomize takes cuda-python, or the POSIX signals, away)."""
    return {"VMMTUI_WITHOUT": without, "PYTHONPATH": str(ELSEWHERE)}


def elsewhere(*argv: str, without: str, cwd=None, timeout=180) -> subprocess.CompletedProcess:
    """``python ARGV`` with ``without`` missing (cuda, posix-signals), no terminal, output read."""
    env = dict(os.environ, VMMTUI_WITHOUT=without)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ELSEWHERE), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
    )


def resolve_wheels():
    spec = importlib.util.spec_from_file_location(
        "resolve_wheels", ROOT / "scripts/resolve-wheels.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# -- what pip installs where ------------------------------------------------------------------------
def test_cuda_python_is_installed_only_where_it_has_wheels():
    names = {
        tag: {r.split(">")[0].split("=")[0].strip() for r in resolve_wheels().requirements(tag)}
        for tag in ("macosx_11_0_arm64", "win_amd64", "manylinux2014_x86_64")
    }
    assert "cuda-python" not in names["macosx_11_0_arm64"]  # pip install . works on a Mac
    assert "cuda-python" in names["win_amd64"] and "cuda-python" in names["manylinux2014_x86_64"]
    assert {"textual", "rich", "numpy"} <= names["macosx_11_0_arm64"]


# -- Windows: no SIGHUP, SIGKILL, SIGQUIT, SIGPIPE, pthread_sigmask ----------------------------------
def test_the_stand_in_has_windows_signals():
    code = "import signal; print(hasattr(signal, 'SIGHUP'), hasattr(signal, 'SIGKILL'))"
    assert elsewhere("-c", code, without="posix-signals").stdout.split() == ["False", "False"]


@pytest.mark.parametrize(
    "argv",
    [
        ["-c", "import vmmtui.cli, vmmtui.system.interrupts, vmmtui.tui.viewer, vmmtui.scenarios"],
        ["-m", "vmmtui", "--help"],
        ["-m", "vmmtui", "run", "--list-scenarios"],
        ["-m", "vmmtui", "replay", "--list"],
    ],
    ids=["import", "help", "list-scenarios", "replay-list"],
)
def test_vmmtui_starts_without_posix_signals(argv):
    res = elsewhere(*argv, without="posix-signals")
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr[-2000:]


def test_every_module_imports_without_cuda_python_or_posix_signals():
    code = (
        "import importlib, pkgutil, vmmtui\n"
        "bad = []\n"
        "for m in pkgutil.walk_packages(vmmtui.__path__, 'vmmtui.'):\n"
        "    if m.name.endswith('__main__'): continue\n"
        "    try: importlib.import_module(m.name)\n"
        "    except Exception as exc: bad.append(f'{m.name}: {exc!r}')\n"
        "print(bad)\n"
    )
    res = elsewhere("-c", code, without="cuda,posix-signals")
    assert res.returncode == 0 and res.stdout.strip() == "[]", res.stdout + res.stderr[-2000:]


# -- without cuda-python: replays, their page, doctor and help work; --backend cuda says why -------
@pytest.mark.parametrize(
    "args, says",
    [
        (["--help"], "replay"),
        (["replay", "--list"], "h100-vmm-1mib"),
        (["replay", "h100-vmm-1mib", "--html", "page.html"], "wrote page.html"),
        (["replay", "h100-vmm-1mib", "--transcript", "t.md"], "wrote t.md"),
        (["doctor"], "cuda-python"),
    ],
    ids=["help", "list", "html", "transcript", "doctor"],
)
@pytest.mark.slow
def test_what_needs_no_gpu_works_without_cuda_python(tmp_path, args, says):
    res = vmmtui(*args, env=missing("cuda"), cwd=tmp_path, timeout=180)
    assert res.returncode == 0, res.stderr[-2000:]
    assert says in res.stdout and "Traceback" not in res.stderr


def test_serve_replay_checks_its_recording_without_cuda_python():
    code = (
        "from vmmtui.cli.serve import command_line\n"
        "print(command_line(['replay', 'h100-vmm-1mib'])[1:])\n"
        "import sys; print([m for m, v in sys.modules.items() if m.split('.')[0] == 'cuda' and v])"
    )
    res = elsewhere("-c", code, without="cuda")
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == ["['-m', 'vmmtui', 'replay', 'h100-vmm-1mib']", "[]"]


def test_backend_cuda_without_cuda_python_is_one_line(monkeypatch, capsys):
    """A GPU machine (the driver loads) whose vmmtui was installed without cuda-python."""
    from vmmtui.backends import probe

    for name in ["cuda", "cuda.bindings", *(m for m in sys.modules if m.startswith("cuda."))]:
        monkeypatch.setitem(sys.modules, name, None)  # import cuda...: ModuleNotFoundError
    monkeypatch.setattr(probe, "driver_library", lambda: None)
    assert main(["run", "--backend", "cuda"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cuda-python is not installed" in err[0], err
    assert host.CUDA_NEEDS in err[0] and "--backend memfd" in err[0]


def test_backend_cuda_without_a_driver_says_what_cuda_needs(capsys):
    if not host.is_linux() or probe_driver() is None:
        pytest.skip("this machine has an NVIDIA driver")
    assert main(["run", "--backend", "cuda"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and host.CUDA_NEEDS in err[0], err


def probe_driver() -> str | None:
    from vmmtui.backends.probe import driver_library

    return driver_library()


# -- macOS: every live run says it needs Linux and names the replay to run instead -----------------
@pytest.mark.parametrize(
    "argv, says",
    [
        (["run"], "the memfd backend needs Linux"),
        ([], "the memfd backend needs Linux"),
        (["serve"], "the memfd backend needs Linux"),
        (["run", "--backend", "memfd"], "the memfd backend needs Linux"),
        (["run", "--backend", "cuda"], host.CUDA_NEEDS),
        (["soak", "--count", "1"], "the memfd backend needs Linux"),
        (["trace", "--", "true"], "vmmtui trace needs Linux"),
        (["attach", "--all", "--once"], "vmmtui attach needs Linux"),
        (["watch", "--", "true"], "vmmtui watch needs Linux"),
    ],
)
def test_live_runs_on_macos_say_linux_is_needed(monkeypatch, capsys, argv, says):
    monkeypatch.setattr(sys, "platform", "darwin")
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0] and "this is macOS" in err[0], err
    assert "vmmtui replay h100-vmm-1mib" in err[0]


def test_doctor_on_macos_says_what_runs_there(monkeypatch, capsys):
    monkeypatch.setattr(sys, "platform", "darwin")
    assert main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert "needs Linux" in out and "vmmtui replay h100-vmm-1mib" in out


@pytest.mark.slow
def test_replay_on_macos_writes_its_page(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(sys, "platform", "darwin")
    assert main(["replay", "h100-vmm-1mib", "--html", str(tmp_path / "p.html")]) == 0
    assert (tmp_path / "p.html").stat().st_size > 10_000


# -- the replay tests themselves, in a Python without cuda-python ----------------------------------
@pytest.mark.slow
def test_the_replay_tests_pass_without_cuda_python():
    res = elsewhere(
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-m",
        "not soak",
        str(ROOT / "tests/tui/test_replay.py"),
        without="cuda",
        cwd=ROOT,
        timeout=900,
    )
    assert res.returncode == 0, res.stdout[-3000:]
    assert " passed" in res.stdout and " failed" not in res.stdout
