"""The kernel's own record of the demo's workers: ``vmmtui trace``'s eBPF probe, on their pids.

Where eBPF runs, ``KernelRecord`` loads the probe in a thread (the first frame does not wait for
the verifier), follows each worker's pid as it is spawned (their children get followed in the
kernel, at fork) and, at each of the session's sync points, ``drain()`` hands over every call the
kernel recorded since the last one, in the kernel's order. A call's record is committed to the ring
buffer when the call returns, before the worker answers its step: a drain just after the answer
holds every call of the step, with no reorder window to wait out. The events are the trace's own
(``FdsSent``, ``FdsReceived``, ``CudaCall``…) with the workers' pids, so a recording or ``--json``
of the demo carries them like a trace's.

Where eBPF does not run (not root, no BTF, no libbpf, a refused load, or ``VMMTUI_NO_EBPF`` set),
one ``Notice`` says why, once, and the demo shows what it shows without it. The probe's links are
fds of this process: they go when it closes them, or when it dies, however it dies.
"""

from __future__ import annotations

import os
import threading
import time
from typing import TYPE_CHECKING

from vmmtui.stream.events import Event, Notice

if TYPE_CHECKING:  # loaded in the thread: the demo starts without the trace's modules
    from vmmtui.trace.follower import Follower

#: set (to anything but "" or "0"), the demo does not load eBPF and says so once (tests force the
#: fallback with it; ``--no-kernel`` turns the record off without a word)
OFF_ENV = "VMMTUI_NO_EBPF"
#: how long the first step waits for the probe to load (it usually has: it loads while the
#: workers start); past it, the record starts when the probe is ready and says from when
FIRST_STEP_WAIT_S = 5.0
#: a load still running at the close is given this long, then left to a daemon thread (its fds
#: close with the process)
CLOSE_WAIT_S = 5.0


def why_off() -> str | None:
    """Why this process cannot follow its workers with eBPF, in a few words; None: it can try."""
    value = os.environ.get(OFF_ENV, "")
    if value not in ("", "0"):
        return f"{OFF_ENV} is set"
    from vmmtui.trace.loader import CAP_BPF, CAP_PERFMON, CAP_SYS_ADMIN, _cap_eff, why_not

    caps = _cap_eff()
    if not (caps >> CAP_SYS_ADMIN & 1 or (caps >> CAP_BPF & 1 and caps >> CAP_PERFMON & 1)):
        who = "root without the capabilities" if os.geteuid() == 0 else f"uid {os.geteuid()}"
        return f"eBPF needs root or CAP_BPF and CAP_PERFMON ({who})"
    return why_not()


def unavailable_line(why: str) -> str:
    """The one line said when the kernel's record cannot be shown."""
    return (
        f"the kernel's own record of each step is not shown: {why}; "
        "`sudo vmmtui ...` shows it (eBPF), --no-kernel hides this line"
    )


class KernelRecord:
    """The trace's probe following the session's workers; every method is safe from any thread.

    ``wanted`` False (``--no-kernel``): nothing is loaded, nothing said."""

    def __init__(self, wanted: bool = True) -> None:
        self.wanted = wanted
        #: why the record is not there (None while it may be)
        self.why: str | None = None
        self._lock = threading.Lock()
        self._pids: dict[int, str] = {}
        self._tracer: Follower | None = None
        self._loader: threading.Thread | None = None
        self._loaded = threading.Event()
        self._said = False
        self._closed = False
        self._t0 = 0.0

    @property
    def on(self) -> bool:
        """The probe is loaded and follows the workers."""
        return self._tracer is not None

    def start(self) -> None:
        """Begin loading the probe in a thread; returns at once."""
        if not self.wanted or self._loader is not None or self._loaded.is_set():
            return
        self._t0 = time.monotonic()
        self.why = why_off()
        if self.why is not None:
            self._loaded.set()
            return
        self._loader = threading.Thread(target=self._load, name="vmmtui-kernel", daemon=True)
        self._loader.start()

    def _load(self) -> None:
        from vmmtui.trace.follower import Follower
        from vmmtui.trace.loader import ProbeUnavailable

        tracer = Follower()
        try:
            tracer.start()
        except ProbeUnavailable as exc:
            self.why = str(exc)
        except OSError as exc:
            self.why = f"the probe could not load ({exc.strerror or exc})"
        except Exception as exc:  # in a thread: said in the one line, never a traceback
            self.why = f"the probe could not load ({type(exc).__name__}: {exc})"
        else:
            with self._lock:
                if self._closed:
                    tracer.close()
                else:
                    for pid in self._pids:
                        tracer.take(pid)
                    self._tracer = tracer
        finally:
            self._loaded.set()

    def follow(self, pid: int, role: str) -> None:
        """Follow ``pid`` (a worker just spawned) from now on, or once the probe has loaded."""
        if not self.wanted:
            return
        with self._lock:
            self._pids[pid] = role
            if self._tracer is not None:
                self._tracer.take(pid)

    def drain(self, wait: bool = False) -> list[Event]:
        """What the kernel recorded since the last drain, oldest first; the first drain after the
        load says how the record runs (``TraceStarted``) or why there is none (a ``Notice``).
        ``wait``: give the load up to ``FIRST_STEP_WAIT_S`` (the first step's calls are shown)."""
        if not self.wanted:
            return []
        if wait and not self._said:
            self._loaded.wait(max(0.0, FIRST_STEP_WAIT_S - (time.monotonic() - self._t0)))
        out: list[Event] = []
        with self._lock:
            if self._closed:
                return []
            if not self._said and self._loaded.is_set():
                self._said = True
                if self._tracer is None:
                    out.append(Notice(unavailable_line(self.why or "eBPF did not load")))
                    return out
                out.append(self._tracer.started(sorted(self._pids)))
            if self._tracer is not None and self._said:
                out += self._tracer.drain()
        return out

    def close(self) -> list[Event]:
        """The last records (the workers' exits) and the record's end; the probe detaches."""
        if not self.wanted:
            return []
        if self._loader is not None:
            self._loader.join(CLOSE_WAIT_S)
        out = self.drain()
        with self._lock:
            self._closed = True
            tracer, self._tracer = self._tracer, None
        if tracer is not None:
            out += tracer.finish()
        return out
