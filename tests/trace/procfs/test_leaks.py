"""Polling's leaks as facts: the holder, the fd, its target or a file's path, the peers gone;
their words are made where they are drawn (vmmtui/words/leaks.py)."""

from vmmtui.stream.events import Event


def test_a_leak_travels_as_facts_and_is_worded_where_drawn(sock_dir):
    """A socket file no live socket is bound to, found as a Leak: the event holds the path and no
    sentence; its words are made where it is drawn, and a --json line carries them for a reader.
    A leak an older vmmtui wrote in words is drawn in those."""
    import socket

    from vmmtui.stream.events import Leak, LeakKind
    from vmmtui.trace.procfs.leaks import leftover_files
    from vmmtui.words import narration
    from vmmtui.words.findings import json_line

    path = str(sock_dir / "nccl-socket-0")
    s = socket.socket(socket.AF_UNIX)
    s.bind(path)
    s.close()  # the file stays, bound to nothing
    [leak] = [e for e in leftover_files(bound_paths={path}) if e.target == path]
    assert leak.kind == LeakKind.SOCKET_FILE and not (leak.what or leak.detail or leak.fix)
    assert Event.from_json(leak.to_json()) == leak
    head, fix = (t.plain for t in narration.leak(leak))
    # a path, no memory: a fact (model/policy.py), said dim with its fix, never a LEAK
    assert head == (
        f"· socket-file: {path}: a socket file no live socket is bound to: its owner died or "
        "closed without unlinking it (a fact: stale socket file, no memory)"
    )
    assert (
        fix
        == f"    fix: unlink it (rm {path}); bind after unlinking stale paths, or use abstract names"
    )
    line = Event.from_json(json_line(leak))
    assert isinstance(line, Leak) and line.what == path and line.fix.startswith("unlink it")
    old = Leak(LeakKind.SHM_FILE, "/dev/shm/x", 7, "the words then", "the fix then")
    assert [t.plain for t in narration.leak(old)] == [
        "LEAK (shm-file) /dev/shm/x: the words then", "    fix: the fix then"
    ]  # fmt: skip
