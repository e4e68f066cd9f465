import os

import pytest

from vmmtui.system.fdtable import FdTable, kcmp_same_file


def test_fd_table_matches_proc_self():
    r, w = os.pipe()
    try:
        table = FdTable.read(os.getpid())
        assert table.error is None
        assert table.entries[r].target == os.readlink(f"/proc/self/fd/{r}")
        assert table.entries[r].ino == os.fstat(r).st_ino
    finally:
        os.close(r)
        os.close(w)


def test_fd_table_of_a_dead_process_says_so():
    table = FdTable.read(2**22 + 12345)
    assert table.error and table.status == "gone"


def test_kcmp_tells_a_dup_from_another_file():
    r, w = os.pipe()
    d = os.dup(r)
    try:
        pid = os.getpid()
        assert kcmp_same_file(pid, r, pid, d).same is True
        assert kcmp_same_file(pid, r, pid, w).same is False
        bad = kcmp_same_file(pid, r, pid, 10_000)
        assert bad.same is None and "unavailable" in bad.detail
    finally:
        for fd in (r, w, d):
            os.close(fd)


@pytest.mark.parametrize(
    "target,cls",
    [
        ("/dev/nvidiactl", "nvidia"),
        ("/dev/nvidia0", "nvidia"),
        ("/memfd:vmmtui-alloc (deleted)", "memfd"),
        ("/dev/shm/torch_1_2", "shm"),
        ("socket:[123]", "socket"),
        ("pipe:[9]", "pipe"),
        ("anon_inode:[pidfd]", "pidfd"),
        ("anon_inode:dmabuf", "dmabuf"),
        ("anon_inode:[eventfd]", "anon"),
        ("/dev/null", "other"),
    ],
)
def test_target_class_reads_the_proc_target(target, cls):
    from vmmtui.system.fdtable import target_class

    assert target_class(target) == cls
