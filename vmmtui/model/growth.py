"""Growth: an importer whose pins on one exporter's memory rise round after round with nothing
let go -- the weight-sync leak (a fresh bucket shared per step, the engine keeping every one) --
told from a start-up that hands a process its regions in a few bursts and then stays flat.

A round is a burst of arrivals from one exporter. Arrivals closer than ``MIN_GAP_NS`` are one
burst; once rounds are seen, the gap that starts the next round grows with them (a quarter of
the median spacing of the rounds so far), so a loop of 2 s steps whose buckets come 100 ms apart
is still one round a step, while a loop of 40 ms steps is one round each. A loop is said when,
at the start of a round, the rounds before it are alike (they added about as many pieces: the
largest at most ``ALIKE`` times the smallest, their bytes within ``ALIKE_BYTES`` where seen),
came at a regular pace (their spacings within ``REGULAR`` of each other) and nothing was let go
since the first of them began: where they are the pair's first rounds, three of them (a loop
from its start, said live at its fourth round, as a weight sync is); after rounds that were no
loop, four (said at the fifth). A start-up's bursts are not alike (Chromium hands a renderer 2
regions, then 30, then 1, then nothing; or, while a page loads, 2, 12, 7, 1, 10, 9, 1, 2, 1 of
4 bytes to 256 KiB each, at no steady pace, letting some go); a library's set-up (NCCL's
channels, symmetric memory's rendezvous) is one burst; a loop that lets each bucket go before
(or just after) the next never rises at all.

Once said, the finding is said again whenever the pieces or the bytes grow by a quarter (the
policy keeps one problem per holder and exporter, with the newest figures), and once more with
the peak when the pair ends (the importer's or the exporter's exit). Bytes are each piece's: an
allocation's size, a legacy IPC allocation's, a memory file's from ``ftruncate`` or from the
furthest end of any mapping of it (offset + length), learnt when or after it arrives.

What counts as a pin here is what keeps the exporter's memory alive in the importer: a memory
file that came to it (any fd or mapping of it, ``model/pins.py``), a ``/dev/shm`` file another
process made and this one mapped by its name (torch's ``file_system`` strategy), an imported VMM
handle (referenced or mapped), a legacy IPC open, an imported pool pointer."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from vmmtui.stream.observed import LedgerFinding

if TYPE_CHECKING:
    from vmmtui.model.ledger import Ledger

#: arrivals closer than this are one burst, whatever the rounds' pace (a step of a loop is slower)
MIN_GAP_NS = 20_000_000
#: kept for readers of the old name: the gap below which arrivals were one round
ROUND_GAP_NS = MIN_GAP_NS
#: once rounds are seen, a gap shorter than this share of their median spacing is inside a round
GAP_SHARE = 4
#: rounds looked at, the one starting included, before growth is said (the fourth round's first
#: arrival, three alike before it) where they are the pair's first: a loop from its start, as a
#: weight sync is (Chromium's renderers are handed two alike bursts at its start, now and then)
ROUNDS = 4
#: the same after rounds that were no loop (a start-up's bursts, then a steady pace): more
#: rounds alike, the fifth round's first arrival
SETTLED = 5
#: rounds are alike when the largest added at most this many times the smallest's pieces...
ALIKE = 2
#: ... and, where every piece's size is seen, at most this many times its bytes (else as many
#: pieces each): a loop's buckets are the same buffers, a start-up's regions all sorts
ALIKE_BYTES = 1.5
#: rounds come at a regular pace when one spacing is at most this many times the other
REGULAR = 4
#: said again once the pieces or the bytes grew by this share of what was last said (1/4)
UPDATE = 4
#: memory files' sizes kept, past which only those a pile holds stay
SIZES = 4096
#: rounds kept per pair (the counts at each round's start, as the finding lists them)
KEEP = 16


@dataclass
class Piece:
    """One piece of the exporter's memory the importer pins, its bytes (0 where not seen) and the
    pins that hold it (two imports of one allocation are one piece)."""

    size: int
    pins: set[str]
    #: the round it came in (its start)
    came: int = 0


@dataclass
class Round:
    """A burst of arrivals: when it began and ended, the pieces held at its start (before its
    first arrival), the pieces it added, and how many pieces had gone (ever) at its start."""

    at: int
    last: int
    held: int
    added: int = 0
    gone: int = 0
    #: the bytes of the pieces it added, and how many of them had no size seen
    bytes: int = 0
    unsized: int = 0

    def add(self, size: int) -> None:
        self.added += 1
        self.bytes += size
        self.unsized += 0 if size else 1


@dataclass
class Pair:
    """One importer's pins on one exporter's memory, round by round."""

    pieces: dict[str, Piece] = field(default_factory=dict)
    rounds: list[Round] = field(default_factory=list)
    #: pieces let go, ever (a round that let one go is no round of a loop that keeps them)
    gone: int = 0
    #: rounds seen, ever
    total: int = 0
    #: the first round of the loop once said, and the figures last said (pieces, bytes)
    since: int = 0
    said: tuple[int, int] | None = None
    peak: tuple[int, int] = (0, 0)

    @property
    def size(self) -> int:
        return sum(p.size for p in self.pieces.values())


def _gap(pair: Pair) -> int:
    """The gap that starts a new round: ``MIN_GAP_NS``, or a share of the rounds' pace."""
    starts = [r.at for r in pair.rounds]
    if len(starts) < 3:
        return MIN_GAP_NS
    spacing = statistics.median(b - a for a, b in zip(starts, starts[1:], strict=False))
    return max(MIN_GAP_NS, int(spacing) // GAP_SHARE)


def _a_loop(pair: Pair) -> bool:
    """At the start of a round: the rounds before it alike (three, where they were the pair's
    first; four after rounds that were no loop), at a regular pace, each adding pieces, with
    nothing let go since the first of them began."""
    need = ROUNDS if pair.total == ROUNDS else SETTLED
    if len(pair.rounds) < need:
        return False
    window = pair.rounds[-need:]
    if pair.gone != window[0].gone:
        return False
    done = window[:-1]
    added = [r.added for r in done]
    if not min(added) or max(added) > ALIKE * min(added):
        return False
    if not any(r.unsized for r in done):
        sizes = [r.bytes for r in done]
        if max(sizes) > ALIKE_BYTES * min(sizes):
            return False
    elif len(set(added)) > 1:
        return False
    apart = [b.at - a.at for a, b in zip(window, window[1:], strict=False)]
    return min(apart) > 0 and max(apart) <= REGULAR * min(apart)


class Growth:
    """The pairs, which pair each pin belongs to (``gone`` is asked by the importer's key), and
    the sizes of memory files as ``ftruncate`` and mappings showed them."""

    def __init__(self) -> None:
        self.pairs: dict[tuple[int, int], Pair] = {}
        #: (importer, pin) → (importer, exporter) and the piece it holds
        self._of: dict[tuple[int, str], tuple[tuple[int, int], str]] = {}
        #: piece → the pairs that hold it (a size learnt later reaches each)
        self._held: dict[str, set[tuple[int, int]]] = {}
        #: a memory file's size (``file:KEY``, ``shm:PATH``), the most any call showed
        self.sizes: dict[str, int] = {}
        #: a ``/dev/shm`` file's path → the process that mapped it first (its maker)
        self.named: dict[str, int] = {}

    def arrived(
        self,
        ledger: Ledger,
        pid: int,
        peer: int,
        piece: str,
        pin: str,
        size: int,
        at: int,
        out: list,
    ) -> None:
        """``pid`` pins ``piece`` of ``peer``'s memory (``size`` bytes, 0 where not seen) by
        ``pin`` (an fd's file, an import handle, an IPC or pool pointer, a mapping)."""
        key = (pid, peer)
        pair = self.pairs.setdefault(key, Pair())
        self._of[(pid, pin)] = (key, piece)
        size = max(size, self.sizes.get(piece, 0))
        if piece in pair.pieces:
            pair.pieces[piece].pins.add(pin)
            return
        self._held.setdefault(piece, set()).add(key)
        last = pair.rounds[-1] if pair.rounds else None
        if last is None or at - last.last >= _gap(pair):
            pair.rounds.append(Round(at, at, len(pair.pieces), gone=pair.gone))
            pair.total += 1
            del pair.rounds[:-KEEP]
            if pair.said is None and _a_loop(pair):
                pair.since = pair.rounds[-(ROUNDS if pair.total == ROUNDS else SETTLED)].at
                pair.pieces[piece] = Piece(size, {pin}, at)
                pair.rounds[-1].add(size)
                self._say(ledger, key, pair, at, out)
                return
        now = pair.rounds[-1]
        now.last = at
        now.add(size)
        pair.pieces[piece] = Piece(size, {pin}, now.at)
        self._grew(ledger, key, pair, at, out)

    def sized(self, ledger: Ledger, piece: str, size: int, at: int, out: list) -> None:
        """A memory file's size seen (``ftruncate``, a mapping's end): every pair holding it
        counts its bytes from now."""
        if size <= self.sizes.get(piece, 0):
            return
        self.sizes[piece] = size
        if len(self.sizes) > SIZES:  # a long run's files: only those a pile holds keep theirs
            self.sizes = {k: v for k, v in self.sizes.items() if k in self._held}
        for key in self._held.get(piece, ()):
            pair = self.pairs.get(key)
            held = pair.pieces.get(piece) if pair is not None else None
            if pair is not None and held is not None and held.size < size:
                came = next((r for r in pair.rounds if r.at == held.came), None)
                if came is not None:  # the round it came in counts its bytes from now
                    came.bytes += size - held.size
                    came.unsized -= 0 if held.size else 1
                held.size = size
                self._grew(ledger, key, pair, at, out)

    def moved(self, pid: int, pin: str, to: str) -> None:
        """A pin moved (``mremap`` of a mapping): the same piece, held by its new address."""
        of = self._of.pop((pid, pin), None)
        if of is not None and (pair := self.pairs.get(of[0])) is not None:
            self._of[(pid, to)] = of
            held = pair.pieces.get(of[1])
            if held is not None and pin in held.pins:
                held.pins.discard(pin)
                held.pins.add(to)

    def forget(self, piece: str) -> None:
        """The memory file's key now names another file (``model/identity.py``): its size goes."""
        self.sizes.pop(piece, None)

    def _grew(self, ledger: Ledger, key: tuple[int, int], pair: Pair, at: int, out: list) -> None:
        """Said again once the pieces or the bytes grew by a quarter since last said."""
        n, size = len(pair.pieces), pair.size
        pair.peak = max(pair.peak, (n, size))
        if pair.said is None:
            return
        was_n, was_size = pair.said
        if n * UPDATE >= was_n * (UPDATE + 1) or (
            size and size * UPDATE >= was_size * (UPDATE + 1)
        ):
            self._say(ledger, key, pair, at, out)

    def _say(
        self,
        ledger: Ledger,
        key: tuple[int, int],
        pair: Pair,
        at: int,
        out: list,
        peak: bool = False,
    ) -> None:
        n, size = pair.peak if peak else (len(pair.pieces), pair.size)
        pair.said = (n, size)
        pair.peak = max(pair.peak, (n, size))
        counts = [r.held for r in pair.rounds if r.at >= pair.since]
        out.append(
            ledger.unknown_if_lost(
                LedgerFinding(
                    "growth",
                    key[0],
                    at,
                    peer=key[1],
                    size=size,
                    since=pair.since,
                    opens=[*counts, n],
                    how="peak" if peak else "",
                ),
                pair.since,
            )
        )

    def gone(self, pid: int, pin: str) -> None:
        """A pin of ``pid`` went: the piece it held no longer counts once its last pin went."""
        of = self._of.pop((pid, pin), None)
        if of is None or (pair := self.pairs.get(of[0])) is None:
            return
        held = pair.pieces.get(of[1])
        if held is not None:
            held.pins.discard(pin)
            if not held.pins:
                del pair.pieces[of[1]]
                pair.gone += 1
                holders = self._held.get(of[1])
                if holders is not None:
                    holders.discard(of[0])
                    if not holders:
                        del self._held[of[1]]

    def exited(self, ledger: Ledger, pid: int, at: int, out: list) -> None:
        """The importer (or the exporter) ended: its pairs end with it, a growth said with its
        peak where it grew past what was last said."""
        for key in [k for k in self.pairs if pid in k]:
            pair = self.pairs.pop(key)
            if pair.said is not None and pair.peak > pair.said:
                self._say(ledger, key, pair, at, out, peak=True)
            for piece in pair.pieces:
                holders = self._held.get(piece)
                if holders is not None:
                    holders.discard(key)
                    if not holders:
                        del self._held[piece]
        for mine in [k for k in self._of if k[0] == pid or self._of[k][0] not in self.pairs]:
            del self._of[mine]
        for path in [p for p, maker in self.named.items() if maker == pid]:
            del self.named[path]
