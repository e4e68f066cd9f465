"""``vmmtui trace`` as a newcomer meets it: bad input gets one line and exit 2; without eBPF one
line says which part is missing and how to get it, and the polling of watch/attach takes over."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.commands import vmmtui

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.mark.parametrize(
    "args,says",
    [
        ([], "give a command after --"),
        (["-p", "1", "--", "true"], "one of them"),
        (["-p", "999999999"], "no process 999999999"),
        (["--duration", "-1", "--all"], "--duration"),
        (["--record", "/nonexistent/dir/x.jsonl", "--", "true"], "cannot write the recording"),
        (["--libcuda", "/nonexistent.so", "--", "true"], "--libcuda /nonexistent.so"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, says):
    res = vmmtui("trace", *args)
    assert res.returncode == 2, res.stderr
    assert says in res.stderr and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_a_missing_command_is_127():
    from vmmtui.trace.loader import why_not

    res = vmmtui("trace", "--", "no-such-command-here")
    assert res.returncode == 127
    assert "command not found: no-such-command-here" in res.stderr
    assert "Traceback" not in res.stderr
    if why_not() is None:
        assert "eBPF unavailable" not in res.stderr


def test_without_libbpf_it_says_so_in_one_line_and_polls(tmp_path):
    res = vmmtui(
        "trace",
        "--text",
        "--",
        sys.executable,
        str(FIXTURES / "scm_pair.py"),
        env={"VMMTUI_LIBBPF": "/nonexistent/libbpf.so.1", "FIXTURE_HOLD": "0.3"},
        timeout=90,
    )
    assert res.returncode == 0, res.stderr
    said = res.stderr.splitlines()
    assert len(said) == 1, said  # the fixture's own lines go to stdout
    assert said[0].startswith("vmmtui trace: eBPF unavailable: libbpf.so.1 is not installed")
    assert "apt-get install libbpf1" in said[0] and "VMMTUI_LIBBPF" in said[0]
    assert "polling /proc instead" in said[0]
    assert "vmmtui trace: polling /proc" in res.stdout  # the stream's first line
    assert "SHARED memfd" in res.stdout  # the polling ran, on the trace's output path


def as_nobody(tmp_path, *args: str) -> subprocess.CompletedProcess:
    """``vmmtui trace ARGS`` as user nobody (no capabilities): the kernel refuses eBPF."""
    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or setpriv is None:
        pytest.skip("needs root and setpriv to run as another user")
    os.chmod(tmp_path, 0o777)
    python = "/usr/bin/python3"  # the fixture's: nobody may not run this venv's (under /root)
    if not os.path.exists(python):
        pytest.skip(f"no {python} for the fixture run as nobody")
    args = tuple(python if a == "PYTHON" else a for a in args)
    return subprocess.run(
        [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all"]
        + [sys.executable, "-m", "vmmtui", "trace", *args],
        capture_output=True,
        text=True,
        timeout=90,
        env={**os.environ, "HOME": str(tmp_path), "FIXTURE_HOLD": "0.3"},
        cwd=tmp_path,
    )


@pytest.mark.slow
def test_without_root_it_falls_back_to_polling_and_says_so_in_the_stream(tmp_path):
    from vmmtui.stream.events import Event, Notice, SharedFile
    from vmmtui.stream.observed import TraceFinished, TraceStarted

    res = as_nobody(tmp_path, "--json", "--", "PYTHON", str(FIXTURES / "scm_pair.py"))
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr
    events = [Event.from_json(x) for x in res.stdout.splitlines()]
    start, notice = events[0], events[1]
    assert isinstance(start, TraceStarted) and start.mode == "polling", start
    assert start.reason.startswith("eBPF needs root, or CAP_BPF and CAP_PERFMON"), start
    assert isinstance(notice, Notice) and notice.text.startswith(
        "eBPF unavailable: eBPF needs root"
    )
    assert "polling /proc instead" in notice.text
    assert any(isinstance(e, SharedFile) and "fixture-scm" in e.target for e in events)
    assert isinstance(events[-1], TraceFinished) and events[-1].mode == "polling"
    assert "eBPF unavailable" not in res.stderr  # --json: said in the stream only
    text = as_nobody(tmp_path, "--text", "--", "PYTHON", str(FIXTURES / "scm_pair.py"))
    said = [x for x in text.stderr.splitlines() if "eBPF" in x]
    assert text.returncode == 0 and len(said) == 1, text.stderr
    assert said[0].startswith("vmmtui trace: eBPF unavailable: eBPF needs root")
    # advice that widens nobody's rights: sudo with the user's own vmmtui, nothing installed
    assert 'sudo "$(command -v vmmtui)" trace ...' in text.stderr
    assert "setcap" not in text.stderr and "pip install" not in text.stderr
    assert "Traceback" not in text.stderr


def test_trace_in_process_gives_the_callers_signal_handlers_back(capsys):
    """The traced command decides when to end (its signals are forwarded), only while it runs."""
    import signal

    from vmmtui.cli import main

    mine = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    assert main(["trace", "--", sys.executable, "-c", "pass"]) == 0
    assert {s: signal.getsignal(s) for s in mine} == mine


def trace_recording(path: Path) -> Path:
    """A trace recording as `trace --record` writes one (made here: no eBPF needed)."""
    from vmmtui.record.recording import Header, Recorder
    from vmmtui.stream.observed import ProcessExec, TraceFinished, TraceStarted

    rec = Recorder(path, Header(backend="trace", title="trace of true"))
    rec.write(TraceStarted("ebpf", [7], ["true"], ktime0=1_000))
    rec.write(ProcessExec(7, 7, 2_000, "/usr/bin/true", "true"))
    rec.write(TraceFinished(["true"], 0, None, events=1, lost=0, seconds=0.1))
    rec.close()
    return path


@pytest.mark.parametrize(
    "extra", [["--transcript", "t.md"], ["--step", "3"], ["--html", "t.html"], ["--autoplay"]]
)
def test_replay_text_of_a_trace_refuses_what_only_the_inspector_does(tmp_path, extra):
    rec = trace_recording(tmp_path / "trace.jsonl")
    res = subprocess.run(
        [sys.executable, "-m", "vmmtui", "replay", str(rec), "--text", *extra],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert f"{extra[0]} apply only to the inspector" in res.stderr
    assert not (tmp_path / "t.md").exists() and not (tmp_path / "t.html").exists()
    plain = subprocess.run(
        [sys.executable, "-m", "vmmtui", "replay", str(rec)], capture_output=True, text=True
    )
    assert plain.returncode == 0 and "true[7] exec /usr/bin/true" in plain.stdout, plain.stderr


@pytest.mark.slow
def test_the_page_of_a_trace_recording_draws_every_call(tmp_path):
    """``replay --html`` of a trace: the inspector draws each call's frame (a real recording)."""
    rec = Path(__file__).parent.parent / "data" / "traces" / "quick_share.jsonl.gz"
    res = subprocess.run(
        [sys.executable, "-m", "vmmtui", "replay", str(rec), "--html", str(tmp_path / "t.html")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stderr
    from vmmtui.pipeline.replay import read, trace_timeline

    calls = trace_timeline(read(rec).events)
    assert f"wrote {tmp_path / 't.html'}: {len(calls.frames)} frames" in res.stdout, res.stdout
    from vmmtui.tui import flipbook

    frames, _log, stopped = flipbook.draw_frames(read(rec), size=(120, 36))
    assert stopped is None and len(frames) == len(calls.frames)
    last = frames[-1].svg.replace("&#160;", " ")
    assert "wire:" in last and "SCM_RIGHTS" in last
