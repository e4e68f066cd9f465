"""Who a process is beyond its pid: its container or pod (from ``/proc/PID/cgroup``) and its pid
inside its own PID namespace (``NSpid`` in ``/proc/PID/status``).

The container is read from the cgroup path the runtime put the process in: Docker
(``/docker/<id>``, ``docker-<id>.scope``), containerd (``cri-containerd-<id>.scope``, nerdctl's
``/<namespace>/<id>``), CRI-O (``crio-<id>.scope``), Podman (``libpod-<id>.scope``) and
Kubernetes pods (``kubepods…pod<uid>…``, with the container inside it). A path that matches none
is no container claimed: the cgroup path itself is said, shortened. ``parse_cgroup`` and
``parse_nspid`` are pure (tested on fabricated text); ``identity_of`` reads /proc once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from vmmtui.stream.names import shown

#: a container id as runtimes write it: 64 hex digits (shown as its first 12, as docker ps does)
_ID = r"([0-9a-f]{64})"
#: (runtime, pattern on one path component) for a container's own cgroup
_CONTAINER = (
    ("docker", re.compile(rf"^docker-{_ID}\.scope$")),
    ("containerd", re.compile(rf"^cri-containerd-{_ID}\.scope$")),
    ("cri-o", re.compile(rf"^crio-{_ID}\.scope$")),
    ("podman", re.compile(rf"^libpod-{_ID}\.scope$")),
)
#: a bare id under a parent that names its runtime (cgroupfs driver): /docker/<id>, /kubepods/…/<id>
_BARE = re.compile(rf"^{_ID}$")
_BARE_PARENTS = {"docker": "docker", "libpod_parent": "podman", "machine.slice": "podman"}
#: a pod's cgroup: kubepods-burstable-pod<uid>.slice (systemd, "_" for "-") or pod<uid> (cgroupfs)
_POD = re.compile(
    r"^(?:kubepods(?:-[a-z]+)*-)?pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})(?:\.slice)?$"
)


@dataclass(frozen=True)
class Container:
    """The container a process runs in: ``runtime`` (docker, containerd, cri-o, podman,
    ``kubepods`` where the pod is known and its container's runtime is not, "" where the path names
    no runtime), the container's short
    id (12 hex digits, "" when only the pod is known), and its pod's uid ("" outside Kubernetes)."""

    runtime: str
    id: str
    pod: str = ""

    def label(self) -> str:
        """One short, bounded name: ``docker 3f2a1b4c5d6e``, ``pod 1d2e…/containerd 3f2a1b4c5d6e``."""
        inner = f"{self.runtime} {self.id}".strip() if self.id else self.runtime
        return f"pod {self.pod}/{inner}" if self.pod else inner


def cgroup_paths(text: str) -> list[str]:
    """The process's cgroup paths from the text of /proc/PID/cgroup, the most telling first: cgroup
    v2's line, then v1's controllers (a hybrid host leaves v2's at "/" while a runtime writes v1's)."""
    unified: list[str] = []
    v1: list[str] = []
    for line in text.splitlines():
        _, controllers, p = (line.split(":", 2) + ["", ""])[:3]
        (unified if controllers == "" else v1).append(p)
    return [p for p in unified if p not in ("", "/")] + [p for p in v1 if p not in ("", "/")]


def cgroup_path(text: str) -> str:
    """The one cgroup path that says most ("/" when all are the root)."""
    paths = cgroup_paths(text)
    return paths[0] if paths else ("/" if text.strip() else "")


def parse_cgroup(text: str) -> Container | None:
    """The container (or pod) the cgroup text names; None where it names none."""
    for path in cgroup_paths(text):
        found = _parse_path([x for x in path.split("/") if x])
        if found is not None:
            return found
    return None


def _parse_path(parts: list[str]) -> Container | None:
    pod = ""
    for part in parts:
        m = _POD.match(part)
        if m and ("kubepods" in parts[0] or part.startswith("kubepods")):
            pod = m.group(1).replace("_", "-")
    for i in range(len(parts) - 1, -1, -1):
        part = parts[i]
        for runtime, pattern in _CONTAINER:
            m = pattern.match(part)
            if m:
                return Container(runtime, m.group(1)[:12], pod)
        m = _BARE.match(part)
        if m and i > 0:
            parent = parts[i - 1]
            if pod:  # cgroupfs kubepods/<qos>/pod<uid>/<id>: the runtime is not in the path
                return Container("kubepods", m.group(1)[:12], pod)
            if parent in _BARE_PARENTS:
                return Container(_BARE_PARENTS[parent], m.group(1)[:12])
            return Container("", m.group(1)[:12])  # nerdctl's /<namespace>/<id>: runtime unnamed
    return Container("kubepods", "", pod) if pod else None


def short_cgroup(text: str) -> str:
    """The cgroup path shortened to its last two parts (``system.slice/x.service``), sanitised."""
    parts = [x for x in cgroup_path(text).split("/") if x]
    return shown("/".join(parts[-2:]), limit=80) if parts else "/"


def parse_nspid(status: str) -> tuple[int, ...]:
    """``NSpid`` of /proc/PID/status: the pid in each PID namespace, outermost first (one entry
    where the process is in vmmtui's own namespace or the kernel is older than 4.1: empty)."""
    for line in status.splitlines():
        if line.startswith("NSpid:"):
            try:
                return tuple(int(x) for x in line.split()[1:])
            except ValueError:
                return ()
    return ()


@dataclass(frozen=True)
class Identity:
    """``container``: None where no runtime's cgroup was found (or /proc/PID/cgroup unreadable);
    ``cgroup``: the short cgroup path whatever it is; ``inner_pid``: the pid in its own namespace,
    None where it is the same as the pid seen here or cannot be read."""

    container: Container | None
    cgroup: str
    inner_pid: int | None


def identity_of(pid: int, proc: Path = Path("/proc")) -> Identity:
    """``pid``'s identity, read once from /proc (what cannot be read is None or "")."""
    try:
        text = (proc / str(pid) / "cgroup").read_text()
    except (OSError, UnicodeDecodeError):
        text = ""
    try:
        nspid = parse_nspid((proc / str(pid) / "status").read_text())
    except (OSError, UnicodeDecodeError):
        nspid = ()
    inner = nspid[-1] if len(nspid) > 1 else None
    return Identity(parse_cgroup(text), short_cgroup(text) if text else "", inner)
