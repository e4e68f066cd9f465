"""``vmmtui watch -- python FIXTURE`` on real processes sharing real memfds: it finds each shared
file, how the fd arrived, and the leak, in words and in --json."""

import os
import re
import shutil
import subprocess
import sys

import pytest

from tests.commands import vmmtui
from tests.trace.procfs.helpers import FIXTURES, of, watch_json
from vmmtui.stream.events import (
    Event,
    FdOpened,
    Leak,
    Notice,
    ProcessSeen,
    SharedFile,
    SocketPair,
    WatchFinished,
)

#: the slow tier: left out of the default run (README), run by .ci/run after it
pytestmark = pytest.mark.slow


def shared_memfd(events, name):
    found = [
        e
        for e in of(events, SharedFile)
        if e.kind == "memfd" and name in e.target and e.same_description
    ]
    assert found, [e for e in events if isinstance(e, SharedFile)]
    assert len({h.pid for h in found[0].holders}) == 2
    return found[0]


def arrival(events, name):
    found = [e for e in of(events, FdOpened) if name in e.target and e.how == "arrived"]
    assert found, of(events, FdOpened)
    return found[0]


def test_scm_rights_pair_shared_and_arrived_over_the_socket():
    res, events = watch_json("scm_pair.py")
    assert res.returncode == 0, res.stderr
    share = shared_memfd(events, "fixture-scm")
    got = arrival(events, "fixture-scm")
    sender = next(h.pid for h in share.holders if h.pid != got.pid)
    assert got.source.pid == sender and "SCM_RIGHTS" in got.via
    assert of(events, SocketPair) and not of(events, Leak)
    assert of(events, WatchFinished)[-1].returncode == 0


def test_pidfd_getfd_pair_arrival_names_the_pidfd():
    res, events = watch_json("pidfd_pair.py")
    assert res.returncode == 0, res.stderr
    shared_memfd(events, "fixture-pidfd")
    got = arrival(events, "fixture-pidfd")
    assert "pidfd_getfd" in got.via, got.via
    assert not of(events, Leak)


def test_the_received_fd_kept_to_a_normal_exit_is_a_fact_and_kept_past_the_window_a_problem():
    """The receiver keeps the fd its sender made, about 1.2 s after the sender exited, then
    exits: inside the teardown window, and kept to a normal exit, both facts (model/policy.py).
    Kept three times as long (2.4 s past the sender), the same hold is orphaned: a problem."""
    from vmmtui.model.findings import Weight
    from vmmtui.model.policy import weigh

    res, events = watch_json("leak_received.py")
    assert res.returncode == 0, res.stderr
    shared_memfd(events, "fixture-leak")
    leaks = {e.kind for e in of(events, Leak) if "fixture-leak" in e.target}
    # polling never says it for sure: a close between two polls, or after the last read, is not seen
    assert leaks == {"possible-held-until-exit"}, of(events, Leak)
    assert of(events, WatchFinished)[-1].leaks == 0
    res, events = watch_json("leak_received.py", env={"FIXTURE_HOLD": "1.2"})
    assert res.returncode == 0, res.stderr
    late = [e for e in of(events, Leak) if e.kind == "possible-fd-after-peer"]
    assert len(late) == 1 and weigh(late[0]) is Weight.PROBLEM, of(events, Leak)
    assert late[0].ktime - late[0].since >= 2e9
    assert of(events, WatchFinished)[-1].leaks == 1


def unshare_reason() -> str | None:
    exe = shutil.which("unshare")
    if exe is None:
        return "no unshare command"
    for argv in (["--pid", "--fork"], ["--pid", "--fork", "--user", "--map-root-user"]):
        if subprocess.run([exe, *argv, "true"], capture_output=True).returncode == 0:
            return None
    return "unshare --pid is not allowed here (no privilege, no unprivileged user namespaces)"


@pytest.mark.skipif(unshare_reason() is not None, reason=str(unshare_reason()))
def test_pair_in_different_pid_namespaces():
    res, events = watch_json("pidns_pair.py")
    assert res.returncode == 0, res.stderr
    share = shared_memfd(events, "fixture-pidns")
    ns = {e.pid: e.pid_ns for e in of(events, ProcessSeen)}
    assert len({ns[h.pid] for h in share.holders}) == 2
    assert any("PID namespaces" in n.text for n in of(events, Notice))
    said = " ".join(n.text for n in of(events, Notice))
    assert re.search(
        r"pid \d+ is in another PID namespace than vmmtui \(it is pid \d+ there\)", said
    )


def test_text_report_says_arrived_shared_and_leak():
    res = vmmtui("watch", "--", sys.executable, str(FIXTURES / "leak_received.py"))
    assert res.returncode == 0
    assert "ARRIVED from pid" in res.stdout and "SHARED memfd" in res.stdout
    # an fd kept until its normal exit is a fact (model/policy.py): said, never a leak
    assert "held-until-exit: " in res.stdout and "(a fact: the exit released it)" in res.stdout
    assert "LEAK (" not in res.stdout, res.stdout
    assert "Traceback" not in res.stdout + res.stderr


def test_json_is_the_stream_alone_on_stdout_the_commands_output_goes_to_stderr():
    res = vmmtui("watch", "--json", "--", sys.executable, str(FIXTURES / "scm_pair.py"))
    assert res.returncode == 0, res.stderr
    events = [Event.from_json(line) for line in res.stdout.splitlines()]  # every line: an event
    assert events and "sent fd" in res.stderr  # the fixture's own lines


def test_a_command_that_does_not_exist_is_one_line_and_127():
    res = vmmtui("watch", "--", "no-such-command-here")
    assert res.returncode == 127
    assert res.stderr.strip() == "vmmtui watch: command not found: no-such-command-here"


@pytest.mark.parametrize("script,code", [("exit 3", 3), ("kill -TERM $$", 128 + 15)])
def test_the_exit_code_is_the_commands(script, code):
    assert vmmtui("watch", "-q", "--", "sh", "-c", script).returncode == code


def test_watch_without_a_command_is_bad_input():
    res = vmmtui("watch")
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1


def test_a_missing_command_is_127_though_a_path_folder_is_not_searchable(tmp_path):
    """execvp says EACCES, not ENOENT, when a PATH folder refused the search: still not found."""
    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or setpriv is None:
        pytest.skip("needs root and setpriv to run as another user")
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o700)  # root's: nobody cannot search it
    os.chmod(tmp_path, 0o755)
    res = subprocess.run(
        [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable]
        + ["-m", "vmmtui", "watch", "--", "no-such-command-here"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env={**os.environ, "PATH": f"{locked}:/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    assert res.returncode == 127, res.stderr
    assert res.stderr == "vmmtui watch: command not found: no-such-command-here\n"


def test_a_launcher_that_held_the_socket_is_no_peer_of_the_memory():
    """The watched command holds the socket pair its children share a bucket over, then lets
    it go, and lives on: the exporter killed, the receiver keeps the bucket 3 s. The memory's
    peers are the processes seen holding it (the exporter), not the launcher that held only
    the socket (old code: a live peer for ever, the orphan never said; pytest's own tests
    launching their peers are this)."""
    from vmmtui.model.findings import Weight
    from vmmtui.model.policy import weigh

    res, events = watch_json("launcher_holds_socket.py")
    assert res.returncode == 0, res.stderr
    late = [e for e in of(events, Leak) if e.kind == "possible-fd-after-peer"]
    assert len(late) == 1 and weigh(late[0]) is Weight.PROBLEM, of(events, Leak)
    assert "bucket-exported" in late[0].target
