"""kcmp(KCMP_FILE) as a comparator, kept from scan to scan: the holders of one inode in the kernel's
order on open file descriptions, so that equal ones (one open file description) sit side by side.

A group never sorted is sorted in full: O(n log n) calls. Later only what can have changed is asked
again (``update_group``). A holder whose process did not run since keeps its place: its open file
cannot have changed. A holder of a process that was re-read (a *suspect*) is checked against its
neighbours: the kernel's order is a total order on open files, so matching neighbours (2 calls, or a
chain of them) prove its run is unchanged, even where its fd was closed and reopened onto the same
inode. One that fails, or is new, is put in its place by binary search (log n calls); one that is
gone is dropped. ``shares`` is anything with a ``kcmp_calls`` count.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cmp_to_key

from vmmtui.system.fdtable import kcmp_order

Holder = tuple[int, int]  # (pid, fd)


@dataclass
class Group:
    """The holders of one (dev, ino) in the kernel's order on open files; ``same[i]``: ``order[i]``
    and ``order[i + 1]`` are one open file description."""

    order: list[Holder]
    same: list[bool]


def _kcmp(shares):
    def cmp(x: Holder, y: Holder) -> int:
        shares.kcmp_calls += 1
        return kcmp_order(x[0], x[1], y[0], y[1])

    return cmp


def sort_group(members: list[Holder], shares) -> Group:
    """``members`` sorted by the kernel's order on open file descriptions: O(n log n) kcmp calls."""
    seen: dict[tuple[Holder, Holder], int] = {}
    ask = _kcmp(shares)

    def cmp(x: Holder, y: Holder) -> int:
        r = seen[(x, y)] = ask(x, y)
        return r

    order = sorted(sorted(members), key=cmp_to_key(cmp))
    same = []
    for a, b in zip(order, order[1:], strict=False):
        r = seen[(a, b)] if (a, b) in seen else (-seen[(b, a)] if (b, a) in seen else ask(a, b))
        same.append(r == 0)
    return Group(order, same)


def _keep(order: list[Holder], same: list[bool], keep) -> Group:
    """The holders of ``order`` for which ``keep(i, h)``, with the relations between them (transitive)."""
    kept: list[Holder] = []
    ksame: list[bool] = []
    link = True
    for i, h in enumerate(order):
        if i:
            link = link and same[i - 1]
        if keep(i, h):
            if kept:
                ksame.append(link)
            kept.append(h)
            link = True
    return Group(kept, ksame)


def _insert(g: Group, x: Holder, cmp) -> None:
    """Put ``x`` in its place in ``g`` by binary search: log n kcmp calls."""
    lo, hi = 0, len(g.order)
    while lo < hi:
        mid = (lo + hi) // 2
        r = cmp(x, g.order[mid])
        if r == 0:
            g.order.insert(mid + 1, x)
            g.same.insert(mid, True)  # mid ≡ x; x relates to mid's old right neighbour as mid did
            return
        if r < 0:
            hi = mid
        else:
            lo = mid + 1
    g.order.insert(lo, x)
    if len(g.order) > 1:
        g.same.insert(min(lo, len(g.same)), False)
        if 0 < lo < len(g.order) - 1:
            g.same[lo - 1] = False


def update_group(cached: Group, members: set[Holder], suspects: set[int], shares) -> Group:
    """``cached`` brought to ``members``: gone dropped, re-read ones proven by neighbours, new inserted."""
    if members.issuperset(cached.order):
        g = Group(list(cached.order), list(cached.same))
    else:
        g = _keep(cached.order, cached.same, lambda _i, h: h in members)
    cmp = _kcmp(shares)
    order, n = g.order, len(g.order)
    bad: set[int] = set()
    at = [i for i, h in enumerate(order) if h[0] in suspects]
    k = 0
    while k < len(at):  # chains of consecutive suspects i..j
        i = j = at[k]
        while k + 1 < len(at) and at[k + 1] == j + 1:
            k += 1
            j += 1
        k += 1
        for a in range(max(i - 1, 0), min(j, n - 2) + 1):  # every pair that touches the chain
            if cmp(order[a], order[a + 1]) != (0 if g.same[a] else -1):
                bad.update(range(i, j + 1))
                break
    again = [order[i] for i in sorted(bad)]
    if bad:
        g = _keep(order, g.same, lambda i, _h: i not in bad)
    placed = set(g.order)
    for x in again + sorted(members - placed - set(again)):
        _insert(g, x, cmp)
    return g


def still_holds(g: Group, suspects: set[int], shares) -> bool:
    """True when every pair of neighbours in ``g`` that touches a holder of a re-read process still
    relates as recorded (one kcmp call a pair): then every run of ``g`` is proven unchanged, the
    check ``update_group`` makes, without copying the group. Raises KcmpUnavailable as kcmp does."""
    order, same = g.order, g.same
    for i in range(len(order) - 1):
        a, b = order[i], order[i + 1]
        if a[0] in suspects or b[0] in suspects:
            shares.kcmp_calls += 1
            if kcmp_order(a[0], a[1], b[0], b[1]) != (0 if same[i] else -1):
                return False
    return True


def runs_of(g: Group) -> list[list[Holder]]:
    """The runs of one open file description each."""
    runs = [[g.order[0]]]
    for h, same in zip(g.order[1:], g.same, strict=True):
        if same:
            runs[-1].append(h)
        else:
            runs.append([h])
    return runs
