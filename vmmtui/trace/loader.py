"""The eBPF side of ``vmmtui trace``: the shipped CO-RE object loaded through the system libbpf
(``libbpf.so.1``, Debian's ``libbpf1``) with ctypes. libbpf is the kernel's own, well-kept loader
(CO-RE relocation against /sys/kernel/btf/vmlinux, ring buffers, uprobes by symbol name): no
compiler or kernel headers at run time, unlike bcc. ``VMMTUI_LIBBPF=/path/libbpf.so.1`` picks a
carried copy (the GPU machine has none installed).

``why_not()`` says in one line why eBPF cannot be used here (and how to get it); ``Probe`` raises
``ProbeUnavailable`` with such a line when the kernel refuses what the checks could not foresee.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import mmap
import os
import select
import shlex
import struct
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from vmmtui.stream.names import shown

OBJECT = Path(__file__).with_name("bpf") / "trace.bpf.o"
BTF = Path("/sys/kernel/btf/vmlinux")
CAP_SYS_ADMIN, CAP_PERFMON, CAP_BPF = 21, 38, 39


#: trace.h's ``enum unrec``, in its order: the kinds of call the kernel decides are worth no record
UNRECORDED = ("close", "dup", "mmap", "unmap", "message")


class ProbeUnavailable(RuntimeError):
    """eBPF cannot be used; the message is one line: what is missing and how to get it."""


class _UprobeOpts(ctypes.Structure):
    _fields_ = [
        ("sz", ctypes.c_size_t),
        ("ref_ctr_offset", ctypes.c_size_t),
        ("bpf_cookie", ctypes.c_uint64),
        ("retprobe", ctypes.c_bool),
        ("func_name", ctypes.c_char_p),
    ]


#: ``union bpf_attr`` for BPF_LINK_CREATE of a ``uprobe_multi`` link (include/uapi/linux/bpf.h):
#: prog_fd, target_fd, attach_type, flags, then path, offsets, ref_ctr_offsets, cookies (pointers),
#: cnt, flags, pid; sent as a zeroed 128-byte union (the kernel checks that its unknown tail is 0)
_LINK_CREATE_UPROBE_MULTI = struct.Struct("<IIIIQQQQIII")
_BPF_ATTR_BYTES = 128
#: the bpf(2) system call, its BPF_LINK_CREATE command, and the uprobe_multi attach type and
#: return flag (the uapi's numbers, stable by the kernel's ABI rule: checked against this kernel's
#: BTF in the tests)
SYS_BPF = {"x86_64": 321, "aarch64": 280}
BPF_LINK_CREATE = 28
BPF_TRACE_UPROBE_MULTI = 48
BPF_F_UPROBE_MULTI_RETURN = 1
#: the first kernel with uprobe_multi links (6.6: one link for many uprobes, detached in one step)
UPROBE_MULTI_SINCE = (6, 6)
#: the CUDA programs, each attached to every probed function of libcuda
CUDA_PROGRAMS = (("cuda_enter", False), ("cuda_exit", True))


def uprobe_multi_here(release: str | None = None) -> bool:
    """Whether this kernel has uprobe_multi links (by its release: 6.6 and later) and this
    machine's bpf(2) number is known."""
    release = release or os.uname().release
    try:
        major, minor = (int(x) for x in release.split("-")[0].split(".")[:2])
    except ValueError:
        return False
    return (major, minor) >= UPROBE_MULTI_SINCE and os.uname().machine in SYS_BPF


_SAMPLE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)
_PRINT = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)


def _cap_eff() -> int:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("CapEff:"):
                return int(line.split()[1], 16)
    except (OSError, ValueError):
        pass
    return 0


def libbpf_path() -> str | None:
    """Where libbpf.so.1 is: $VMMTUI_LIBBPF, else the system's."""
    env = os.environ.get("VMMTUI_LIBBPF")
    if env:
        return env
    for p in ("/lib/x86_64-linux-gnu/libbpf.so.1", "/usr/lib/x86_64-linux-gnu/libbpf.so.1"):
        if os.path.exists(p):
            return p
    found = ctypes.util.find_library("bpf")
    return found


UNPRIVILEGED_BPF = Path("/proc/sys/kernel/unprivileged_bpf_disabled")


def sudo_advice() -> str:
    """How to trace with eBPF here without widening anybody's rights: this very vmmtui run as
    root for one command, named by path (sudo's own PATH may find another vmmtui, or none).
    Never an install of a name from a package index (whoever registers the name would get the
    rights), never capabilities on an interpreter that other programs or users run."""
    here = shown(sys.executable)
    this = f"`sudo {shlex.quote(here)} -m vmmtui trace ...`"
    return f'`sudo "$(command -v vmmtui)" trace ...` (this vmmtui: {this})'


def privileges_missing(caps: int, advice: bool = True) -> str:
    """What this process lacks for eBPF, read from the system, and the one way to get it that
    widens nobody else's rights: sudo with the user's own vmmtui, for this one command
    (``advice`` False: the facts alone, for a caller that is not that command: a test run)."""
    has = [
        name
        for bit, name in ((CAP_BPF, "CAP_BPF"), (CAP_PERFMON, "CAP_PERFMON"))
        if caps >> bit & 1
    ]
    lacks = [name for name in ("CAP_BPF", "CAP_PERFMON") if name not in has]
    who = (
        "root without the capabilities (a container or a dropped bounding set)"
        if os.geteuid() == 0
        else f"uid {os.geteuid()}, not root"
    )
    facts = [who, f"missing {' and '.join(lacks)}" + (f" (has {has[0]})" if has else "")]
    facts.append("kernel BTF present" if BTF.exists() else f"no kernel BTF ({BTF})")
    try:
        level = UNPRIVILEGED_BPF.read_text().strip()
        meaning = {
            "0": "bpf() open to every user",
            "1": "bpf() only for the privileged, until reboot",
            "2": "bpf() only for the privileged",
        }
        facts.append(
            f"kernel.unprivileged_bpf_disabled = {level} ({meaning.get(level, 'unknown')})"
        )
    except OSError:
        pass
    lack = f"eBPF needs root, or CAP_BPF and CAP_PERFMON ({'; '.join(facts)})"
    if not advice:
        return lack
    return f"{lack}: run your own vmmtui as root for this command, {sudo_advice()}"


def privileged() -> bool:
    """Whether this process may load and attach the probe: CAP_SYS_ADMIN, or CAP_BPF and
    CAP_PERFMON (Linux 5.8+)."""
    caps = _cap_eff()
    return bool(caps >> CAP_SYS_ADMIN & 1 or (caps >> CAP_BPF & 1 and caps >> CAP_PERFMON & 1))


def why_not(advice: bool = True) -> str | None:
    """One line on what this machine lacks for eBPF tracing (None: nothing we can tell);
    ``advice`` False leaves out how to run ``vmmtui trace`` with the privileges."""
    if os.uname().machine != "x86_64":
        return f"eBPF tracing is built for x86_64 only (this is {os.uname().machine})"
    if not privileged():
        return privileges_missing(_cap_eff(), advice)
    if not BTF.exists():
        return (
            "the kernel has no BTF (/sys/kernel/btf/vmlinux): eBPF CO-RE needs a kernel built "
            "with CONFIG_DEBUG_INFO_BTF=y (most distribution kernels since 5.4)"
        )
    path = libbpf_path()
    if path is None or not os.path.exists(path):
        where = f" ({path} does not exist)" if path else ""
        return (
            f"libbpf.so.1 is not installed{where}: `apt-get install libbpf1` (Debian/Ubuntu), "
            "`dnf install libbpf` (Fedora), or set VMMTUI_LIBBPF=/path/to/libbpf.so.1"
        )
    if not OBJECT.exists():
        return f"the BPF object {OBJECT} is missing: rebuild it with scripts/build-bpf.sh"
    return None


#: bits of a ring buffer record's length word (kernel/bpf/ringbuf.c)
_BUSY, _DISCARD = 1 << 31, 1 << 30
_HEADER = 8
_U64 = struct.Struct("<Q")
_U32 = struct.Struct("<I")


class Ring:
    """One ring buffer map read in place (mmap), as libbpf's ring_buffer__consume reads it but
    without a ctypes call back into Python for each record: the consumer position page (ours to
    write), the producer position page and the data pages, mapped twice by the kernel so that a
    record is always contiguous. x86_64 only (as the programs are): loads are not reordered with
    loads, so the producer position read first covers every record read after it."""

    def __init__(self, map_fd: int, size: int) -> None:
        page = mmap.PAGESIZE
        self.size, self.mask, self.page = size, size - 1, page
        self.consumer = mmap.mmap(map_fd, page, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        try:
            self.data = mmap.mmap(
                map_fd, page + 2 * size, mmap.MAP_SHARED, mmap.PROT_READ, offset=page
            )
        except BaseException:
            self.consumer.close()
            raise
        self.view = memoryview(self.data)

    def pending(self) -> bool:
        return _U64.unpack_from(self.view, 0)[0] > _U64.unpack_from(self.consumer, 0)[0]

    def read(self, most: int = 4096) -> list[bytes]:
        """The committed records (at most ``most``: a reader that never runs dry still yields)."""
        view, mask, base = self.view, self.mask, self.page
        cons = _U64.unpack_from(self.consumer, 0)[0]
        prod = _U64.unpack_from(view, 0)[0]
        out: list[bytes] = []
        while cons < prod and len(out) < most:
            off = base + (cons & mask)
            word = _U32.unpack_from(view, off)[0]
            if word & _BUSY:
                break  # reserved, not committed yet: the next read takes it
            length = word & ~(_BUSY | _DISCARD)
            if not word & _DISCARD:
                out.append(bytes(view[off + _HEADER : off + _HEADER + length]))
            cons += (length + _HEADER + 7) & ~7
        _U64.pack_into(self.consumer, 0, cons)
        return out

    def close(self) -> None:
        self.view.release()
        self.data.close()
        self.consumer.close()


class Rings:
    """The per-CPU ring buffers, read together: one wait for all (epoll), each read in turn. A
    message's records come from one program run on one CPU, so they stay together in one ring;
    records of different CPUs are put in the kernel's order downstream (by their time)."""

    def __init__(self, map_fds: list[int], size: int) -> None:
        self.rings: list[Ring] = []
        self.epoll = select.epoll()
        try:
            for fd in map_fds:
                self.rings.append(Ring(fd, size))
                self.epoll.register(fd, select.EPOLLIN)
        except BaseException:
            self.close()
            raise

    def wait(self, timeout_ms: int) -> None:
        if timeout_ms > 0 and not self.pending():
            self.epoll.poll(timeout_ms / 1000)

    def pending(self) -> bool:
        return any(r.pending() for r in self.rings)

    def read(self, most: int = 4096) -> list[bytes]:
        """The committed records of every ring (at most ``most`` from each)."""
        out: list[bytes] = []
        for r in self.rings:
            out += r.read(most)
        return out

    def close(self) -> None:
        self.epoll.close()
        for r in self.rings:
            r.close()
        self.rings = []


#: the programs of each flavour of the syscall hooks (tp_btf preferred: arguments read directly
#: from the BTF-typed registers; raw_tp, with probe reads, where the kernel refuses tp_btf)
FLAVOURS = {
    "tp_btf": ("sys_enter", "sys_exit", "proc_fork", "proc_exec", "proc_exit"),
    "raw_tp": ("raw_sys_enter", "raw_sys_exit", "raw_proc_fork", "raw_proc_exec", "raw_proc_exit"),
}
#: the programs of each flavour that see SCM_RIGHTS fds the kernel closed unreceived: a Unix
#: socket's message freed with them still attached (its socket released or collected with it
#: queued), and a receive without room for them (``read()``: the kernel closes them)
RELEASE_PROGRAMS = {
    "tp_btf": ("skb_freed", "fds_dropped"),
    "raw_tp": ("raw_skb_freed", "raw_fds_dropped"),
}
#: the ring buffers' default size, all CPUs together: about 4 s of records at 5,000 shares a
#: second (the reader may stall that long on a loaded machine without a record lost)
RING_BYTES = 32 << 20
#: each CPU's ring holds at least this much (or the whole size asked, if smaller): one busy CPU
#: on a machine of many still has seconds of room
RING_MIN_PER_CPU = 8 << 20


def ring_per_cpu(ring_bytes: int, ncpu: int) -> int:
    """Each CPU's ring buffer: an equal share of ``ring_bytes``, a power of two, at least a page
    and at least RING_MIN_PER_CPU where ``ring_bytes`` allows it."""
    share = max(ring_bytes // max(ncpu, 1), mmap.PAGESIZE)
    share = 1 << (share.bit_length() - 1)  # a power of two, rounded down
    return max(share, min(ring_bytes, RING_MIN_PER_CPU))


#: struct drops of trace.bpf.c, one per CPU (count, seen, first, last, unread)
_DROPS = struct.Struct("<QQQQQ")
MAXCPUS = 1024
BPF_MAP_TYPE_RINGBUF = 27


@dataclass(frozen=True)
class LossWindow:
    """Records one CPU could not hand over, and the kernel times of its first and last drop."""

    cpu: int
    count: int
    t_first_ns: int
    t_last_ns: int
    #: bytes the reader had not taken at the last drop (near the ring's size: it was full)
    unread: int = 0


class Probe:
    """The loaded BPF object: attach, add pids, poll records (bytes), close.

    ``flavours`` are tried in order (``tp_btf``, then ``raw_tp``); ``self.flavour`` says which
    loaded. ``ring_bytes`` sizes the ring buffers, all CPUs together (a power of two, at least
    a page; see ``ring_per_cpu``)."""

    def __init__(
        self,
        path: Path = OBJECT,
        lib: str | None = None,
        ring_bytes: int = RING_BYTES,
        flavours: tuple[str, ...] = ("tp_btf", "raw_tp"),
    ) -> None:
        lib = lib or libbpf_path()
        try:
            self.lib = ctypes.CDLL(lib, use_errno=True)
        except OSError as exc:
            raise ProbeUnavailable(f"cannot load libbpf ({lib}): {exc}") from None
        if ring_bytes < mmap.PAGESIZE or ring_bytes & (ring_bytes - 1):
            raise ValueError(f"the ring buffer size must be a power of two (got {ring_bytes})")
        self._declare()
        self.messages: list[str] = []
        self._libc = ctypes.CDLL(None)
        self._print = _PRINT(self._on_print)
        self.lib.libbpf_set_print(self._print)
        self.links: list[int] = []
        #: the uprobe_multi links' fds (two at most: every CUDA function's entry, and its return)
        self.link_fds: list[int] = []
        #: the CUDA programs are loaded for uprobe_multi links (one link for every function,
        #: detached in one step) rather than one perf-event uprobe per function
        self.multi = uprobe_multi_here()
        self.records: list[bytes] = []
        self._sample = _SAMPLE(self._on_sample)
        self.rb = None
        self.ring: Rings | None = None
        #: the per-CPU ring buffer maps (made here, after the load)
        self.ring_fds: list[int] = []
        self.obj = None
        self._drops: mmap.mmap | None = None
        self.flavour = ""
        #: why the release hook is not there ("" when it is)
        self.release_missing = ""
        #: why each flavour tried before the one that loaded was refused
        self.refused: dict[str, str] = {}
        self.ring_bytes = ring_bytes
        self.ncpu = self.lib.libbpf_num_possible_cpus()
        if self.ncpu <= 0 or self.ncpu > MAXCPUS:
            raise ProbeUnavailable(
                f"libbpf counts {self.ncpu} possible CPUs here; the trace handles 1 to {MAXCPUS}"
            )
        self.ring_cpu_bytes = ring_per_cpu(ring_bytes, self.ncpu)
        rc = 0
        for flavour in flavours:
            for release in (True, False):
                rc = self._open_and_load(path, flavour, release, ring_bytes)
                if rc == 0:
                    self.flavour = flavour
                    if not release:
                        self.release_missing = (
                            "the kernel refused the kfree_skb and skb_copy_datagram_iovec programs"
                        )
                    break
                label = flavour if release else f"{flavour} without the unreceived-fds hooks"
                self.refused[label] = f"{os.strerror(-rc)}{self._last()}"
            if self.flavour:
                break
        if not self.flavour:
            self.close()
            raise ProbeUnavailable(
                f"the kernel refused the BPF programs ({os.strerror(-rc)}){self._last()}; "
                "a kernel without tp_btf/ring buffers (< 5.8), a lockdown mode, or a seccomp "
                "profile denying bpf(2) does this: run on the host as root"
            )
        self.maps = {
            name: self.lib.bpf_map__fd(
                self.lib.bpf_object__find_map_by_name(self.obj, name.encode())
            )
            for name in ("rings", "traced", "config", "lost", "counts", "unrecorded")
        }
        self._make_rings()

    def _make_rings(self) -> None:
        """One ring buffer map per possible CPU, put in ``rings`` at its CPU's index."""
        for cpu in range(self.ncpu):
            fd = self.lib.bpf_map_create(
                BPF_MAP_TYPE_RINGBUF, f"vmmtui_ring{cpu}".encode(), 0, 0, self.ring_cpu_bytes, None
            )
            if fd < 0:
                self.close()
                raise ProbeUnavailable(
                    f"cannot make a ring buffer of {self.ring_cpu_bytes >> 10} KiB for CPU {cpu} "
                    f"({os.strerror(-fd)}): try a smaller --ring-mb"
                )
            self.ring_fds.append(fd)
            key, value = ctypes.c_uint32(cpu), ctypes.c_uint32(fd)
            rc = self.lib.bpf_map_update_elem(
                self.maps["rings"], ctypes.byref(key), ctypes.byref(value), 0
            )
            if rc != 0:
                self.close()
                raise ProbeUnavailable(
                    f"cannot put CPU {cpu}'s ring buffer in place ({os.strerror(abs(rc))})"
                )

    def _open_and_load(self, path: Path, flavour: str, release: bool, ring_bytes: int) -> int:
        """Open the object with only ``flavour``'s syscall programs (and the release kprobe when
        asked), and load it: 0, or -errno."""
        if self.obj:
            self.lib.bpf_object__close(self.obj)
            self.obj = None
        self.obj = self.lib.bpf_object__open_file(str(path).encode(), None)
        if not self.obj:
            err = ctypes.get_errno()
            raise ProbeUnavailable(f"libbpf cannot open {path}: {os.strerror(err)}{self._last()}")
        for names in FLAVOURS.values():
            for name in names:
                prog = self.lib.bpf_object__find_program_by_name(self.obj, name.encode())
                self.lib.bpf_program__set_autoload(prog, name in FLAVOURS[flavour])
        names = {n for group in RELEASE_PROGRAMS.values() for n in group}
        for name in names:
            prog = self.lib.bpf_object__find_program_by_name(self.obj, name.encode())
            self.lib.bpf_program__set_autoload(prog, release and name in RELEASE_PROGRAMS[flavour])
        rings = self.lib.bpf_object__find_map_by_name(self.obj, b"rings")
        self.lib.bpf_map__set_max_entries(rings, self.ncpu)
        if self.multi:  # attached with BPF_LINK_CREATE later: the load must say so
            for name, _ret in CUDA_PROGRAMS:
                prog = self.lib.bpf_object__find_program_by_name(self.obj, name.encode())
                self.lib.bpf_program__set_expected_attach_type(prog, BPF_TRACE_UPROBE_MULTI)
        rc = self.lib.bpf_object__load(self.obj)
        if rc and self.multi:  # a kernel that refuses the attach type: one uprobe per function
            self.multi = False
            return self._open_and_load(path, flavour, release, ring_bytes)
        return -abs(rc) if rc else 0

    def _declare(self) -> None:
        L, vp, c = self.lib, ctypes.c_void_p, ctypes
        for name, res, args in [
            ("bpf_object__open_file", vp, [c.c_char_p, vp]),
            ("bpf_object__load", c.c_int, [vp]),
            ("bpf_object__close", None, [vp]),
            ("bpf_object__find_program_by_name", vp, [vp, c.c_char_p]),
            ("bpf_object__find_map_by_name", vp, [vp, c.c_char_p]),
            ("bpf_map__fd", c.c_int, [vp]),
            ("bpf_program__fd", c.c_int, [vp]),
            ("bpf_map__max_entries", c.c_uint32, [vp]),
            ("bpf_map__set_max_entries", c.c_int, [vp, c.c_uint32]),
            ("bpf_program__set_autoload", c.c_int, [vp, c.c_bool]),
            ("bpf_map_get_next_key", c.c_int, [c.c_int, vp, vp]),
            ("bpf_program__attach", vp, [vp]),
            ("bpf_program__attach_uprobe_opts", vp, [vp, c.c_int, c.c_char_p, c.c_size_t, vp]),
            ("bpf_link__destroy", c.c_int, [vp]),
            ("bpf_program__set_expected_attach_type", c.c_int, [vp, c.c_int]),
            ("bpf_map_update_elem", c.c_int, [c.c_int, vp, vp, c.c_uint64]),
            ("bpf_map_lookup_elem", c.c_int, [c.c_int, vp, vp]),
            ("ring_buffer__new", vp, [c.c_int, _SAMPLE, vp, vp]),
            ("ring_buffer__poll", c.c_int, [vp, c.c_int]),
            ("ring_buffer__consume", c.c_int, [vp]),
            ("ring_buffer__free", None, [vp]),
            ("libbpf_num_possible_cpus", c.c_int, []),
            (
                "bpf_map_create",
                c.c_int,
                [c.c_int, c.c_char_p, c.c_uint32, c.c_uint32, c.c_uint32, vp],
            ),
            ("ring_buffer__add", c.c_int, [vp, c.c_int, _SAMPLE, vp]),
            ("libbpf_set_print", vp, [_PRINT]),
        ]:
            fn = getattr(L, name)
            fn.restype, fn.argtypes = res, args

    def _on_print(self, level: int, fmt: bytes, args: int) -> int:
        buf = ctypes.create_string_buffer(512)
        self._libc.vsnprintf(buf, ctypes.c_size_t(512), fmt, ctypes.c_void_p(args))
        text = buf.value.decode(errors="replace").strip()
        if text:
            self.messages = [*self.messages[-40:], text]
        return 0

    def _last(self) -> str:
        useful = [m for m in self.messages if m.startswith("libbpf:") and "failed" in m]
        return f" ({useful[-1]})" if useful else ""

    def _on_sample(self, ctx: int, data: int, size: int) -> int:
        self.records.append(ctypes.string_at(data, size))
        return 0

    def attach_syscalls(self) -> None:
        for name in FLAVOURS[self.flavour]:
            prog = self.lib.bpf_object__find_program_by_name(self.obj, name.encode())
            link = self.lib.bpf_program__attach(prog)
            if not link:
                err = ctypes.get_errno()
                raise ProbeUnavailable(
                    f"cannot attach {name} ({os.strerror(err) or errno.errorcode.get(err)})"
                    f"{self._last()}"
                )
            self.links.append(link)
        for name in RELEASE_PROGRAMS[self.flavour] if not self.release_missing else ():
            prog = self.lib.bpf_object__find_program_by_name(self.obj, name.encode())
            link = self.lib.bpf_program__attach(prog)
            if link:
                self.links.append(link)
            else:
                err = ctypes.get_errno()
                self.release_missing = f"cannot attach {name} ({os.strerror(err)})"
        try:
            self.ring = Rings(self.ring_fds, self.ring_cpu_bytes)
            return
        except (OSError, ValueError):
            self.ring = None  # read through libbpf instead
        self.rb = self.lib.ring_buffer__new(self.ring_fds[0], self._sample, None, None)
        if not self.rb or any(
            self.lib.ring_buffer__add(self.rb, fd, self._sample, None) != 0
            for fd in self.ring_fds[1:]
        ):
            raise ProbeUnavailable(f"cannot open the ring buffers{self._last()}")

    def attach_uprobes(self, library: str, funcs: list[tuple[int, str]]) -> dict[str, str]:
        """Entry and return probes on each ``(cookie, function)`` of ``library``: why each one
        left unprobed is (empty: every one is probed).

        Where the kernel has uprobe_multi links, two links carry them all (the entries, the
        returns), each function's cookie in its slot: the kernel unregisters a link's uprobes
        together with one wait for the probes in flight, where one perf-event uprobe per function
        waited once each (40 links: 4.6 s to end a trace, and as long for a process killed with
        SIGKILL to be gone). Elsewhere, one uprobe per function, as libbpf places them."""
        if not self.multi:
            return {
                func: why
                for cookie, func in funcs
                if (why := self.attach_uprobe(library, func, cookie)) is not None
            }
        from vmmtui.trace.elfsyms import ElfError, function_offsets

        try:
            offsets = function_offsets(library, {func for _, func in funcs})
        except (OSError, ElfError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            return {func: why for _, func in funcs}
        missing = {func: "no such function" for _, func in funcs if func not in offsets}
        probed = [(cookie, func) for cookie, func in funcs if func in offsets]
        if not probed:
            return missing
        for prog_name, ret in CUDA_PROGRAMS:
            fd = self._link_uprobe_multi(
                prog_name, library, [offsets[f] for _, f in probed], [c for c, _ in probed], ret
            )
            if fd < 0:
                why = os.strerror(-fd) or "refused"
                return {**missing, **{func: why for _, func in probed}}
            self.link_fds.append(fd)
        return missing

    def _link_uprobe_multi(
        self, prog_name: str, library: str, offsets: list[int], cookies: list[int], ret: bool
    ) -> int:
        """One uprobe_multi link of ``prog_name`` on ``offsets`` of ``library`` (every process:
        the programs check the traced pids themselves): its fd, or -errno."""
        prog = self.lib.bpf_object__find_program_by_name(self.obj, prog_name.encode())
        prog_fd = self.lib.bpf_program__fd(prog)
        n = len(offsets)
        path = ctypes.create_string_buffer(library.encode())
        offs = (ctypes.c_uint64 * n)(*offsets)
        cooks = (ctypes.c_uint64 * n)(*cookies)
        attr = ctypes.create_string_buffer(_BPF_ATTR_BYTES)
        _LINK_CREATE_UPROBE_MULTI.pack_into(
            attr,
            0,
            prog_fd,
            0,
            BPF_TRACE_UPROBE_MULTI,
            0,
            ctypes.addressof(path),
            ctypes.addressof(offs),
            0,
            ctypes.addressof(cooks),
            n,
            BPF_F_UPROBE_MULTI_RETURN if ret else 0,
            0,
        )
        syscall = self._libc.syscall
        syscall.restype = ctypes.c_long
        fd = syscall(
            ctypes.c_long(SYS_BPF[os.uname().machine]),
            ctypes.c_long(BPF_LINK_CREATE),
            attr,
            ctypes.c_uint(_BPF_ATTR_BYTES),
        )
        return fd if fd >= 0 else -ctypes.get_errno()

    def attach_uprobe(self, library: str, func: str, cookie: int) -> str | None:
        """Entry and return probes on ``func`` of ``library`` (perf-event uprobes, one pair per
        function: a kernel without uprobe_multi links); None, or why not."""
        for prog_name, ret in CUDA_PROGRAMS:
            prog = self.lib.bpf_object__find_program_by_name(self.obj, prog_name.encode())
            opts = _UprobeOpts(ctypes.sizeof(_UprobeOpts), 0, cookie, ret, func.encode())
            link = self.lib.bpf_program__attach_uprobe_opts(
                prog, -1, library.encode(), 0, ctypes.byref(opts)
            )
            if not link:
                return os.strerror(ctypes.get_errno()) or "refused"
            self.links.append(link)
        return None

    def configure(self, everything: bool, self_pid: int) -> None:
        key = ctypes.c_uint32(0)
        value = (ctypes.c_uint32 * 2)(int(everything), self_pid)
        self.lib.bpf_map_update_elem(self.maps["config"], ctypes.byref(key), value, 0)

    def follow(self, pid: int) -> None:
        """Trace ``pid`` (its bit in the kernel's tgid bitmap; its children get theirs at fork)."""
        key, word = ctypes.c_uint32(pid >> 6), ctypes.c_uint64(0)
        fd = self.maps["traced"]
        self.lib.bpf_map_lookup_elem(fd, ctypes.byref(key), ctypes.byref(word))
        word.value |= 1 << (pid & 63)
        self.lib.bpf_map_update_elem(fd, ctypes.byref(key), ctypes.byref(word), 0)

    def poll(self, timeout_ms: int) -> list[bytes]:
        """Records after at most ``timeout_ms`` (sooner when the kernel wakes us for a backlog)."""
        if self.ring is not None:
            self.ring.wait(timeout_ms)
            return self.ring.read()
        if self.rb:
            self.lib.ring_buffer__poll(self.rb, timeout_ms)
            self.lib.ring_buffer__consume(self.rb)  # what came without a wake-up
        out, self.records = self.records, []
        return out

    def _drop_map(self) -> mmap.mmap:
        if self._drops is None:
            size = -(-MAXCPUS * _DROPS.size // mmap.PAGESIZE) * mmap.PAGESIZE
            self._drops = mmap.mmap(self.maps["lost"], size, mmap.MAP_SHARED)
        return self._drops

    def lost(self) -> int:
        """Records lost so far, every CPU."""
        m = self._drop_map()
        return sum(_DROPS.unpack_from(m, cpu * _DROPS.size)[0] for cpu in range(self.ncpu))

    def loss_windows(self) -> list[LossWindow]:
        """The losses since the last call, one window per CPU that lost records (the kernel then
        starts a new window at that CPU's next drop)."""
        m, out = self._drop_map(), []
        for cpu in range(min(self.ncpu, MAXCPUS)):
            count, seen, first, last, unread = _DROPS.unpack_from(m, cpu * _DROPS.size)
            if count > seen:
                out.append(LossWindow(cpu, count - seen, first, last, unread))
                _U64.pack_into(m, cpu * _DROPS.size + 8, count)
        return out

    def counts(self) -> dict[tuple[int, int], int]:
        """``--all``: calls per (tgid, record kind), counted in the kernel."""
        fd, out = self.maps["counts"], {}
        key, nxt = (ctypes.c_uint32 * 2)(), (ctypes.c_uint32 * 2)()
        values = (ctypes.c_uint64 * max(self.ncpu, 1))()
        prev = None
        while self.lib.bpf_map_get_next_key(fd, prev, ctypes.byref(nxt)) == 0:
            ctypes.memmove(key, nxt, ctypes.sizeof(key))
            prev = ctypes.byref(key)
            if self.lib.bpf_map_lookup_elem(fd, prev, values) == 0:
                out[(key[0], key[1])] = sum(values)
        return out

    def unrecorded(self) -> dict[str, int]:
        """The calls of traced processes the kernel looked at and recorded nothing of, by kind
        (``UNRECORDED``, trace.h's ``enum unrec``), every CPU summed: what a trace saw beyond
        its records (a close of a file not followed, a malloc arena's munmap…)."""
        fd, out = self.maps["unrecorded"], {}
        values = (ctypes.c_uint64 * max(self.ncpu, 1))()
        for i, name in enumerate(UNRECORDED):
            key = ctypes.c_uint32(i)
            if fd >= 0 and self.lib.bpf_map_lookup_elem(fd, ctypes.byref(key), values) == 0:
                out[name] = sum(values)
        return out

    def detach(self) -> None:
        """Take every program off its hook (the kernel then writes no more records); the maps
        and the ring stay readable for what is already in them.

        All at once: a uprobe_multi link goes with one close; libbpf's links are destroyed side
        by side in threads (each waits for the probes in flight: one after another, the waits
        added up to seconds)."""
        fds, self.link_fds = self.link_fds, []
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        links, self.links = self.links, []
        if len(links) <= 1:
            for link in links:
                self.lib.bpf_link__destroy(link)
            return
        threads = [
            threading.Thread(target=self.lib.bpf_link__destroy, args=(link,), daemon=True)
            for link in links
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def close(self) -> None:
        if self._drops is not None:
            self._drops.close()
            self._drops = None
        if self.ring is not None:
            self.ring.close()
            self.ring = None
        self.detach()
        if self.rb:
            self.lib.ring_buffer__free(self.rb)
            self.rb = None
        if self.obj:
            self.lib.bpf_object__close(self.obj)
            self.obj = None
        for fd in self.ring_fds:
            os.close(fd)
        self.ring_fds = []


def unprivileged_bpf() -> str:
    """kernel.unprivileged_bpf_disabled, in words."""
    try:
        v = Path("/proc/sys/kernel/unprivileged_bpf_disabled").read_text().strip()
    except OSError:
        return "unknown (no /proc/sys/kernel/unprivileged_bpf_disabled)"
    meaning = {
        "0": "users without privileges may load some programs (trace still needs privileges)",
        "1": "only privileged users load programs, until reboot",
        "2": "only privileged users load programs",
    }
    return f"{v}: {meaning.get(v, 'unknown value')}"


def readiness() -> list[tuple[str, str, bool | None]]:
    """What ``vmmtui trace`` needs here, each as (check, finding, ok), the hooks checked with a
    real load of the shipped object (not attached: nothing is traced). For ``vmmtui doctor``."""
    caps = _cap_eff()
    root = bool(caps >> CAP_SYS_ADMIN & 1)
    bpf_perfmon = bool(caps >> CAP_BPF & 1 and caps >> CAP_PERFMON & 1)
    path = libbpf_path()
    found = path is not None and os.path.exists(path)
    version = ""
    if found and path is not None:
        try:
            lib = ctypes.CDLL(path)
            version = f" {lib.libbpf_major_version()}.{lib.libbpf_minor_version()}"
        except (OSError, AttributeError):
            version = ""
    out: list[tuple[str, str, bool | None]] = [
        (
            "libbpf",
            f"{path}{version}"
            if found
            else "not found: `apt-get install libbpf1` (Debian/Ubuntu), `dnf install libbpf` "
            "(Fedora), or VMMTUI_LIBBPF=/path/to/libbpf.so.1",
            found,
        ),
        (
            "BTF",
            str(BTF) if BTF.exists() else "absent: the kernel needs CONFIG_DEBUG_INFO_BTF=y",
            BTF.exists(),
        ),
        (
            "capabilities",
            "root (CAP_SYS_ADMIN)"
            if root
            else "CAP_BPF + CAP_PERFMON"
            if bpf_perfmon
            else f"missing: run your own vmmtui as root, {sudo_advice()}",
            root or bpf_perfmon,
        ),
        ("unprivileged_bpf_disabled", unprivileged_bpf(), None),
    ]
    why = why_not()
    if why is not None:
        out.append(("hooks", f"not tried: {why}", False))
        return out
    try:
        probe = Probe(ring_bytes=mmap.PAGESIZE)
    except (ProbeUnavailable, OSError) as exc:
        out.append(("hooks", f"refused: {exc}", False))
        return out
    try:
        tried = "; ".join(f"{k} refused ({v})" for k, v in probe.refused.items())
        hooks = f"{probe.flavour} on sys_enter/sys_exit and sched fork/exec/exit load"
        if tried:
            hooks += f" ({tried})"
        out.append(("hooks", hooks, True))
        out.append(
            (
                "queued fds hook",
                "kfree_skb and skb_copy_datagram_iovec load: fds freed unreceived are said"
                if not probe.release_missing
                else f"{probe.release_missing}: fds freed unreceived cannot be said",
                None if probe.release_missing else True,
            )
        )
    finally:
        probe.close()
    return out
