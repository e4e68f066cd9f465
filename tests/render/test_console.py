"""``vmmtui run``'s output from a hand-made event stream: the seed's lines, one summary, JSON lines."""

from __future__ import annotations

import io

from tests.events_fixture import SAME, session_batches, session_events
from vmmtui.render.console import LogPrinter, print_json
from vmmtui.stream.events import Event, SessionFailed
from vmmtui.stream.failures import failure
from vmmtui.words import narration


def printed(events, **kw) -> tuple[str, LogPrinter]:
    out = io.StringIO()
    printer = LogPrinter(out, **kw)
    for e in events:
        printer(e)
    printer.console.print(printer.summary())
    return out.getvalue(), printer


def test_each_role_speaks_and_kcmp_is_told_once_per_consumer():
    out, _ = printed(session_events(consumers=2))
    for k in (1, 2):
        assert f"consumer-{k} │ Data verification PASSED (262144 integers verified)" in out
        assert (
            out.count(f"kernel │ kcmp(KCMP_FILE): producer fd 5 ≡ consumer-{k} fd 5: {SAME}") == 1
        )
    summary = out.strip().splitlines()[-1]
    assert summary.startswith(narration.VERIFIED + " 262144 integers (1 MiB)")
    # said after the cleanup closed both fds: what kcmp found, and when
    assert (
        "kcmp: 2/2 consumers' fds were the producer's open file description (before cleanup)"
        in summary
    )
    assert "match /proc" in summary and narration.CLEAN in summary


def test_one_consumer_summary_carries_the_verdict():
    out, _ = printed(session_events())
    assert (
        f"kcmp: producer fd 5 ≡ consumer fd 5 were the {SAME} (before cleanup)"
        in out.strip().splitlines()[-1]
    )


def test_a_failed_session_is_not_verified_and_says_why():
    batches = session_batches()
    events = [e for b in batches[:4] for e in b]
    events.append(
        SessionFailed(
            "producer", "create", failure("CUDA_ERROR_INVALID_VALUE", "cuMemCreate", "bad size")
        )
    )
    out, _ = printed(events)
    assert "FAILED at producer create: cuMemCreate → CUDA_ERROR_INVALID_VALUE (bad size)" in out
    last = out.strip().splitlines()[-1]
    # one verdict, worded once: where it failed, not a bare NOT VERIFIED after a PASSED
    assert last.startswith("FAILED at producer create (CUDA_ERROR_INVALID_VALUE)"), last
    assert narration.NOT_VERIFIED not in last and "kcmp: not checked" in last


def test_verbose_prints_every_call():
    out, _ = printed(session_events(), verbose=True)
    assert "reserve(fd=3, size=1048576) → 0x7f0000000000" in out


def test_json_lines_are_the_events_to_json():
    out = io.StringIO()
    events = session_events(consumers=2)
    for e in events:
        print_json(e, out)
    lines = out.getvalue().splitlines()
    assert lines == [e.to_json() for e in events]
    assert [Event.from_json(line) for line in lines] == events


def test_the_cuda_drivers_start_up_is_one_counted_line_and_each_step_says_what_it_did():
    """``vmmtui run --backend cuda --json`` as root on an H200 (the kernel's record beside each
    step): the driver's start-up closed 30 of its own files in each worker and it maps and unmaps
    its device files by the dozen. Before, each close was a line (about 100 kernel lines before
    the first step that makes memory); now each worker's first step says what it did (its
    rehearsal of the send) and counts the driver's churn in one line, and every step that shares
    still names its calls."""
    import gzip
    from pathlib import Path

    data = Path(__file__).resolve().parents[1] / "data" / "h200-run-as-root.jsonl.gz"
    with gzip.open(data, "rt") as f:
        out, printer = printed([Event.from_json(line) for line in f], verbose=False)
    lines = out.splitlines()
    first = next(i for i, line in enumerate(lines) if "VMM support: yes" in line)
    before = [line for line in lines[:first] if "kernel" in line]
    assert len(before) <= 10, "\n".join(before)
    assert any(
        "+61 calls of the CUDA driver's start-up on its own files, in --json" in line
        for line in before
    )
    kernel = [line for line in lines if "kernel:" in line]
    for call in ("cuMemCreate", "cuMemExportToShareableHandle", "cuMemImportFromShareableHandle"):
        assert any(call in line for line in kernel), call
    assert any("same struct file" in line and "consumer fd 38" in line for line in kernel)
    # the closes told: the rehearsals' (2 a worker), the fds shared (the export, the received fd)
    assert len([line for line in kernel if "close(" in line]) == 7, kernel
    assert printer.finished is not None and printer.finished.verified
