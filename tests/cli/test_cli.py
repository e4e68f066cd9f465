import json
import os
import subprocess
import sys

import pytest

from tests.commands import vmmtui
from vmmtui.cli import main


def test_run_memfd_prints_the_seed_log_and_exits_0(tmp_path):
    res = vmmtui("run", "--backend", "memfd", "--size", "64KiB", tmp=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    out = res.stdout
    assert "Exported allocation as FD:" in out
    assert "Data verification PASSED (16384 integers verified)" in out
    assert "same open file description" in out
    assert "VERIFIED" in out and "match /proc" in out
    assert os.listdir(tmp_path) == []


def test_run_json_is_one_event_per_line(tmp_path):
    res = vmmtui("run", "--backend", "memfd", "--size", "4096", "--json", tmp=tmp_path)
    assert res.returncode == 0, res.stderr
    events = [json.loads(line) for line in res.stdout.splitlines()]
    # a Notice may come first (a TMPDIR too long for a socket path: where the session went instead)
    kinds = [e["event"] for e in events if e["event"] != "Notice"]
    assert kinds[0] == "SessionStarted" and kinds[-1] == "SessionClosed"
    assert "SessionFinished" in kinds and events[-1]["clean"]


@pytest.mark.parametrize("size", ["0", "-1", "garbage", "12XB"])
def test_bad_sizes_exit_2_with_one_line(size, capsys):
    with pytest.raises(SystemExit) as ex:
        main(["run", "--size", size])
    assert ex.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "size" in err[-1]


def test_unknown_backend_exits_2(capsys):
    with pytest.raises(SystemExit) as ex:
        main(["run", "--backend", "opencl"])
    assert ex.value.code == 2


def test_cuda_without_driver_names_what_is_missing(capsys):
    from vmmtui.backends import choose

    if choose("cuda").usable:
        pytest.skip("this machine has a usable GPU")
    assert main(["run", "--backend", "cuda"]) == 2
    err = capsys.readouterr().err
    assert "libcuda.so.1" in err and "memfd" in err


def test_doctor_reports_memfd_and_kcmp():
    res = vmmtui("doctor")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "memfd backend" in res.stdout and "kcmp" in res.stdout


def test_size_larger_than_the_backend_can_hold_exits_2(capsys):
    assert main(["run", "--backend", "memfd", "--size", "1000TiB"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert (
        len(err) == 1 and "larger than the RAM available" in err[0] and "smaller --size" in err[0]
    )


def test_unknown_scenario_exits_2(capsys):
    with pytest.raises(SystemExit) as ex:
        main(["run", "--scenario", "meteor-strike"])
    assert ex.value.code == 2
    assert "--list-scenarios" in capsys.readouterr().err


def test_list_scenarios_one_line_each(capsys):
    from vmmtui.scenarios import SCENARIOS

    assert main(["run", "--list-scenarios"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert [line.split()[0] for line in lines] == list(SCENARIOS)
    assert any("[cuda only]" in line for line in lines)


def test_scenario_memfd_cannot_show_exits_2_with_why(tmp_path):
    res = vmmtui("run", "--backend", "memfd", "--scenario", "out-of-memory", tmp=tmp_path)
    assert res.returncode == 2
    assert "cannot be shown on the memfd backend" in res.stderr and "lazily" in res.stderr
    assert os.listdir(tmp_path) == []


def test_scenario_run_exits_0_when_it_failed_as_described(tmp_path):
    res = vmmtui("run", "--backend", "memfd", "--scenario", "leaked-fd", tmp=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "FD_LEAK" in res.stdout and "as expected" in res.stdout
    assert os.listdir(tmp_path) == []


def test_socket_path_too_long_falls_back_to_a_short_dir_and_says_so(tmp_path):
    deep = tmp_path / ("d" * 100)
    deep.mkdir()
    res = vmmtui("run", "--backend", "memfd", "--size", "64KiB", tmp=deep)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "too long for a socket path" in res.stdout and "VERIFIED" in res.stdout
    assert os.listdir(deep) == []


@pytest.mark.parametrize(
    "args",
    [
        ["run", "--consumers", "abc"],
        ["run", "--pace", "-1"],
        ["--pace", "-1"],
        ["run", "--no-such-flag"],
        ["run", "--size", "0"],
    ],
)
def test_argument_errors_are_one_line(args, capsys):
    with pytest.raises(SystemExit) as ex:
        main(args)
    assert ex.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--help" in err[0], err


def test_negative_device_is_refused(capsys):
    with pytest.raises(SystemExit) as ex:
        main(["run", "--backend", "memfd", "--device", "-1"])
    assert ex.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--device: -1 is out of range" in err[0], err


def test_a_worker_killed_during_start_up_exits_1_not_2(tmp_path, monkeypatch, capsys):
    import signal as sig

    from vmmtui.session import loop

    real = loop.read_hello

    def kill_first(w, timeout):
        os.kill(w.pid, sig.SIGKILL)
        return real(w, timeout)

    monkeypatch.setattr(loop, "read_hello", kill_first)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    assert main(["run", "--backend", "memfd", "--size", "64KiB"]) == 1
    err = capsys.readouterr().err
    assert "did not start" in err and "SIGKILL" in err
    assert os.listdir(tmp_path) == []


def test_four_consumers_on_memfd_each_verify_and_kcmp_says_so(tmp_path):
    res = vmmtui("run", "--backend", "memfd", "--size", "1MiB", "--consumers", "4", tmp=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    for k in range(1, 5):
        assert f"consumer-{k} │ Data verification PASSED (262144 integers verified)" in res.stdout
        assert f"producer fd 5 ≡ consumer-{k} fd 5: same open file description" in res.stdout
    # the end line, after every cleanup: what kcmp found, and when
    end = res.stdout.strip().splitlines()[-1]
    assert "4/4 consumers' fds were the producer's open file description (before cleanup)" in end
    assert os.listdir(tmp_path) == []


def test_consumers_write_their_slices_on_memfd(tmp_path):
    res = vmmtui(
        "run",
        "--backend",
        "memfd",
        "--size",
        "1MiB",
        "--consumers",
        "3",
        "--direction",
        "consumer-writes",
        tmp=tmp_path,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert "consumer-3 │ Wrote integers [174760, 262144) of the shared buffer" in res.stdout
    assert "producer │ Data verification PASSED (262144 integers verified)" in res.stdout


@pytest.mark.parametrize(
    "args,says",
    [
        (["--mechanism", "legacy"], "memfd has no legacy mode"),
        (["--consumers", "9"], "--consumers 9: choose 1 to 8"),
        (["--consumers", "0"], "--consumers 0: choose 1 to 8"),
        (["--devices", "0,1"], "--devices needs the cuda backend"),
        (["--verify", "device"], "--verify device needs a GPU"),
        (
            ["--consumers", "2", "--scenario", "leaked-fd"],
            "scenario leaked-fd runs with the vmm mechanism, one consumer",
        ),
    ],
)
def test_shapes_that_cannot_run_exit_2_with_one_line(args, says, capsys):
    assert main(["run", "--backend", "memfd", *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0]


def test_main_in_process_gives_the_callers_signal_handlers_back(tmp_path, monkeypatch, capsys):
    """A test run (or any program) that calls main() keeps its own SIGINT, SIGTERM and SIGHUP:
    once main returned (or exited), a Ctrl-C or a time limit works again."""
    import signal as sig

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    mine = {s: sig.getsignal(s) for s in (sig.SIGINT, sig.SIGTERM, sig.SIGHUP)}
    assert main(["run", "--list-scenarios"]) == 0
    assert {s: sig.getsignal(s) for s in mine} == mine
    with pytest.raises(SystemExit):
        main(["run", "--size", "lots"])
    assert {s: sig.getsignal(s) for s in mine} == mine
    assert main(["run", "--backend", "memfd", "--size", "64KiB"]) == 0
    assert {s: sig.getsignal(s) for s in mine} == mine


def test_no_step_outwaits_the_timeout_the_user_gave():
    """Issue 19.3: a step waited up to 600 s whatever --timeout said; now no longer than the ACK's wait
    (12x --timeout) and a few seconds for the worker to say why."""
    from vmmtui.cli import parser
    from vmmtui.cli.options import config_from

    for argv in (["run", "--timeout", "2"], ["--timeout", "2"]):
        cfg = config_from(parser().parse_args(argv))
        assert cfg.ack_timeout == 24 and cfg.ack_timeout < cfg.step_timeout <= 30


def test_a_command_that_owns_its_signals_gets_no_raising_handler(monkeypatch):
    """A Textual command sets own_signals: main leaves the stop signals to it (delivered_to) instead
    of raising Interrupted inside its event loop."""
    import signal as sig

    from vmmtui.cli import run as run_command
    from vmmtui.system import interrupts

    seen = {}

    def fake(args):
        seen["during"] = sig.getsignal(sig.SIGTERM)
        with interrupts.delivered_to(lambda s: None):
            seen["own"] = sig.getsignal(sig.SIGTERM)
        seen["after"] = sig.getsignal(sig.SIGTERM)
        return 0

    real = run_command.add_arguments

    def add_arguments(p):
        real(p)
        p.set_defaults(func=fake, own_signals=True)

    monkeypatch.setattr(run_command, "add_arguments", add_arguments)
    assert main(["run"]) == 0
    assert seen["during"] is interrupts.exit_now and seen["after"] is interrupts.exit_now
    assert seen["own"] not in (interrupts.exit_now, interrupts.interrupt)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full (a disk always full)")
@pytest.mark.parametrize(
    "args", [["replay", "--list"], ["run", "--backend", "memfd", "--size", "64KiB", "--json"]]
)
def test_output_to_a_full_disk_is_one_line_and_exit_1(args):
    with open("/dev/full", "w") as full:
        res = subprocess.run(
            [sys.executable, "-m", "vmmtui", *args],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    assert res.returncode == 1, res.stderr[-3000:]
    assert res.stderr == "vmmtui: cannot write the output: No space left on device\n"


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version_prints_the_package_s_version_and_exits_0(flag):
    from importlib.metadata import version

    out = vmmtui(flag)
    assert (out.returncode, out.stdout, out.stderr) == (0, f"vmmtui {version('vmmtui')}\n", "")
