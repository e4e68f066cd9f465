"""Growth: an importer whose pins on one exporter's memory rise round after round with nothing
let go -- the weight-sync leak (a fresh bucket shared per step, the engine keeping every one).

A round is a burst of arrivals from one exporter: an arrival ``ROUND_GAP_NS`` or more after the
previous one starts the next round. At the start of each round the importer's pins on that
exporter's memory are counted (before the new one); when three round starts in a row count
strictly more each time (0, 1, 2: the third step of a loop that keeps every bucket), the growth
is said at once, with the bytes pinned and the rate, while the trace runs. A loop that lets each
bucket go before (or just after) the next counts the same at every round start (0, 0, 0 or 1,
1, 1) and is never said; a library's setup that imports many buffers in one burst (NCCL's
channels, symmetric memory's rendezvous) is one round. Said once per importer and exporter; the
exit names each pin left (``model/exits.py``).

What counts as a pin here is what keeps the exporter's memory alive in the importer: a memory
file that came to it (any fd or mapping of it, ``model/pins.py``), an imported VMM handle
(referenced or mapped), a legacy IPC open, an imported pool pointer."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from vmmtui.stream.observed import LedgerFinding

if TYPE_CHECKING:
    from vmmtui.model.ledger import Ledger

#: arrivals closer than this are one round (a burst); a step of a training loop is slower
ROUND_GAP_NS = 100_000_000
#: round starts, each with more pins than the last, before growth is said (the third step)
ROUNDS = 3


@dataclass
class Pair:
    """One importer's pins on one exporter's memory: the pieces of memory it pins now (each with
    its bytes and the pins that hold it: two imports of one allocation are one piece) and the
    count at the start of each round."""

    pieces: dict[str, tuple[int, set[str]]] = field(default_factory=dict)
    last: int = -1
    #: (when, pins before the round's first arrival) of each round, the newest last
    starts: list[tuple[int, int]] = field(default_factory=list)
    said: bool = False


class Growth:
    """The pairs, and which pair each pin belongs to (``gone`` is asked by the importer's key)."""

    def __init__(self) -> None:
        self.pairs: dict[tuple[int, int], Pair] = {}
        #: (importer, pin) → (importer, exporter) and the piece it holds
        self._of: dict[tuple[int, str], tuple[tuple[int, int], str]] = {}

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
        ``pin`` (an fd's file, an import handle, an IPC or pool pointer)."""
        pair = self.pairs.setdefault((pid, peer), Pair())
        self._of[(pid, pin)] = ((pid, peer), piece)
        if piece in pair.pieces:
            pair.pieces[piece][1].add(pin)
            return
        if pair.last < 0 or at - pair.last >= ROUND_GAP_NS:
            pair.starts.append((at, len(pair.pieces)))
            del pair.starts[:-ROUNDS]
        pair.last = at
        pair.pieces[piece] = (size, {pin})
        if pair.said or len(pair.starts) < ROUNDS:
            return
        counts = [n for _, n in pair.starts]
        if all(a < b for a, b in zip(counts, counts[1:], strict=False)):
            pair.said = True
            out.append(
                ledger.unknown_if_lost(
                    LedgerFinding(
                        "growth",
                        pid,
                        at,
                        peer=peer,
                        size=sum(size for size, _ in pair.pieces.values()),
                        since=pair.starts[0][0],
                        opens=[*counts, len(pair.pieces)],
                    ),
                    pair.starts[0][0],
                )
            )

    def gone(self, pid: int, pin: str) -> None:
        """A pin of ``pid`` went: the piece it held no longer counts once its last pin went."""
        of = self._of.pop((pid, pin), None)
        if of is None or (pair := self.pairs.get(of[0])) is None:
            return
        held = pair.pieces.get(of[1])
        if held is not None:
            held[1].discard(pin)
            if not held[1]:
                del pair.pieces[of[1]]

    def exited(self, pid: int) -> None:
        """The importer (or the exporter) ended: its pairs end with it."""
        for k in [k for k in self.pairs if pid in k]:
            del self.pairs[k]
        for mine in [k for k in self._of if k[0] == pid]:
            del self._of[mine]
