from __future__ import annotations

import os
import socket

import psutil
import pytest

#: the commands follow their workers with eBPF where it runs (as root here): the many runs of the
#: other tests leave that out (a probe load each); tests/session/test_kernel_record.py and
#: tests/tui/test_kernel_line.py take it off again and test the record itself
os.environ.setdefault("VMMTUI_NO_EBPF", "1")


def cuda_reason() -> str | None:
    """None when the cuda backend can run here, else why not."""
    from vmmtui.backends import choose

    choice = choose("cuda")
    return None if choice.usable else choice.reason


def pytest_collection_modifyitems(config, items):
    gpu_items = [i for i in items if "gpu" in i.keywords]
    if not gpu_items:
        return
    reason = cuda_reason()
    if reason:
        skip = pytest.mark.skip(reason=f"no usable GPU: {reason}")
        for item in gpu_items:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def ebpf() -> None:
    """Skips a test where ``vmmtui trace`` cannot use eBPF here, saying why (tests/tracing.py:
    what the machine lacks, else the kernel's refusal of a real load, tried once per process).
    A module whose every test traces names it once: ``pytest.mark.usefixtures("ebpf")``."""
    from tests.tracing import ebpf_refused

    if reason := ebpf_refused():
        pytest.skip(f"eBPF unavailable: {reason}")


def open_fds() -> set[int]:
    return {int(n) for n in os.listdir("/proc/self/fd")}


@pytest.fixture
def clean_state(tmp_path):
    """Asserts that a test leaves no extra fds, child processes or session directories behind."""
    before_fds = open_fds()
    before_children = {p.pid for p in psutil.Process().children(recursive=True)}
    yield tmp_path
    leaked = open_fds() - before_fds
    # the fd listing itself is gone by now; anything new is a leak
    assert not leaked, f"leaked fds: {[(fd, _target(fd)) for fd in leaked]}"
    children = [
        p for p in psutil.Process().children(recursive=True) if p.pid not in before_children
    ]
    assert not children, f"workers left alive: {children}"
    assert not [n for n in os.listdir(tmp_path) if n.startswith("vmmtui-")], (
        "session directory left behind"
    )


def _target(fd: int) -> str:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return "?"


@pytest.fixture
def seqpacket_pair():
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    yield a, b
    a.close()
    b.close()
