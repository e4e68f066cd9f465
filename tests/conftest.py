from __future__ import annotations

import fcntl
import os
import shutil
import socket
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil
import pytest

#: the commands follow their workers with eBPF where it runs (as root here): the many runs of the
#: other tests leave that out (a probe load each); tests/session/test_kernel_record.py and
#: tests/tui/test_kernel_line.py take it off again and test the record itself
os.environ.setdefault("VMMTUI_NO_EBPF", "1")


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    """The suite runs in parallel workers (``-n`` in pyproject's addopts, pytest-xdist of the dev
    extra); where pytest-xdist is missing (a slim install, a GPU image), ``-n`` and ``--dist``
    are still understood and the tests run in this one process."""
    if pluginmanager.has_plugin("xdist"):
        return
    parser.addoption("--numprocesses", dest="numprocesses", default=None, help="(xdist)")
    parser.addoption("--dist", dest="dist", default="no", help="(xdist)")


class Quiet:
    """Under pytest-xdist, a test marked ``serial`` runs while no other test does: it measures
    time, memory or lost records, or traces every process of the machine, and the other workers'
    tests would be its noise. A readers-writer lock over two files of the run (flock, so it goes
    with a worker however it dies): each test holds the room shared; a serial one first closes
    the gate, so that no new test comes in, then waits for the room to empty and holds it alone."""

    def __init__(self, where: str) -> None:
        self.gate = open(os.path.join(where, "gate"), "a+")  # noqa: SIM115 (the worker's life)
        self.room = open(os.path.join(where, "room"), "a+")  # noqa: SIM115

    @contextmanager
    def held(self, alone: bool) -> Iterator[None]:
        if alone:
            fcntl.flock(self.gate, fcntl.LOCK_EX)
            fcntl.flock(self.room, fcntl.LOCK_EX)
            fcntl.flock(self.gate, fcntl.LOCK_UN)
        else:
            fcntl.flock(self.gate, fcntl.LOCK_SH)
            fcntl.flock(self.room, fcntl.LOCK_SH)
            fcntl.flock(self.gate, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(self.room, fcntl.LOCK_UN)


QUIET = pytest.StashKey[Quiet]()
LOCKS = pytest.StashKey[str]()


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    """The controller gives every worker the directory of the run's two lock files."""
    config = node.config
    if LOCKS not in config.stash:
        config.stash[LOCKS] = tempfile.mkdtemp(prefix="vmmtui-tests-")
    node.workerinput["vmmtui_locks"] = config.stash[LOCKS]


SHORT_BASETEMP = pytest.StashKey[str]()


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    where = getattr(config, "workerinput", {}).get("vmmtui_locks")
    if where:
        config.stash[QUIET] = Quiet(where)
    if config.getoption("numprocesses", None) and not config.option.basetemp:
        # a worker's tmp_path has one more level (popen-gw3/): a session's sockets under it
        # (TMPDIR=tmp_path) would pass AF_UNIX's 107 bytes, and the session would put its
        # directory in /tmp instead of where the test looks. The run's base is made short,
        # before pytest's tmp_path and the workers read it, and removed at the run's end.
        config.option.basetemp = tempfile.mkdtemp(prefix="vt-")
        config.stash[SHORT_BASETEMP] = config.option.basetemp


def pytest_unconfigure(config: pytest.Config) -> None:
    if LOCKS in config.stash:  # the controller, once its workers are gone
        shutil.rmtree(config.stash[LOCKS], ignore_errors=True)
    if SHORT_BASETEMP in config.stash:
        shutil.rmtree(config.stash[SHORT_BASETEMP], ignore_errors=True)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    """Each test's setup, call and teardown inside the run's lock (see :class:`Quiet`)."""
    quiet = item.config.stash.get(QUIET, None)
    if quiet is None:
        return (yield)
    with quiet.held(alone=item.get_closest_marker("serial") is not None):
        return (yield)


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
    # where the sessions made their directories: tmp_path, or the short place a session moves to
    # when tmp_path is too long for a socket path (a long TMPDIR); ours are named by our pid
    from vmmtui.session.tmpdir import choose_parent

    parent = choose_parent(str(tmp_path))[0]
    mine = f"vmmtui-{os.getpid()}-" if parent != str(tmp_path) else "vmmtui-"
    assert not [n for n in os.listdir(parent) if n.startswith(mine)], (
        "session directory left behind"
    )


@pytest.fixture
def sock_dir(tmp_path) -> Iterator[Path]:
    """A directory for a test's own socket: tmp_path where a socket's path fits there (AF_UNIX:
    107 bytes), else a short private one beside where the sessions go (a TMPDIR too long for a
    socket path, as a CI runner's may be), removed after the test."""
    from vmmtui.session.tmpdir import choose_parent, fits

    if fits(str(tmp_path)):
        yield tmp_path
        return
    short = Path(tempfile.mkdtemp(prefix="vt-", dir=choose_parent(str(tmp_path))[0]))
    try:
        yield short
    finally:
        shutil.rmtree(short, ignore_errors=True)


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
