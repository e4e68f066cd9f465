"""Teaching text that says what happened: the bytes that came over the socket apart from the size
of the allocation they name, an ACK text that agrees with the import's and with importer-pins, and
no "seed 00N" (a name only the project's makers know) in --help, a cause or any text shown."""

import json
import re
from pathlib import Path

import pytest

from tests.commands import vmmtui
from vmmtui.pipeline.replay import resolve
from vmmtui.plan.steps import LEGACY_STEPS, POOL_STEPS, STEPS, step_info
from vmmtui.record import gallery
from vmmtui.scenarios import SCENARIOS
from vmmtui.stream.events import StepDone
from vmmtui.words import narration as say
from vmmtui.words.troubleshooting import BY_CALL, TABLE

ROOT = Path(__file__).resolve().parents[2]
#: the help texts at their full width (no wrapping where a test looks for a phrase)
WIDE = {"COLUMNS": "200"}
SEED = re.compile(r"\bseed\s+0\d\d", re.IGNORECASE)
COMMANDS = ["run", "soak", "bench", "doctor", "attach", "watch", "trace", "replay", "serve"]


def test_recvmsg_says_the_bytes_that_came_over_the_socket_and_the_allocations_size_apart():
    """``recvmsg … → fds [38], 2097152 bytes`` read as if 2 MiB came over the socket (209 did)."""
    res = vmmtui("run", "--backend", "memfd", "--json", env=WIDE)
    assert res.returncode == 0, res.stderr
    calls = [
        c
        for line in res.stdout.splitlines()
        if '"recvmsg"' in line
        for c in json.loads(line).get("report", {}).get("calls", [])
        if c["name"] == "recvmsg"
    ]
    assert calls, res.stdout[-2000:]
    got = re.fullmatch(
        r"fds \[\d+\], (\d+) bytes \(metadata naming a 1048576-byte allocation\)",
        calls[0]["result"],
    )
    assert got and 0 < int(got[1]) < 1024, calls[0]["result"]


def test_an_old_recordings_recvmsg_is_not_read_as_megabytes_over_the_socket():
    rec = gallery.resolve("h100-vmm-1mib")
    recv = next(
        c
        for e in rec.events
        if isinstance(e, StepDone)
        for c in e.report.calls
        if c.name == "recvmsg"
    )
    shown = say.call(recv).plain
    assert ", 2097152 bytes" not in shown
    assert "metadata naming a 2097152-byte allocation (message size not recorded)" in shown


def test_the_ack_text_agrees_with_the_import_and_with_importer_pins():
    """The ACK once said it stops the producer releasing memory the consumer still uses; the
    import text (and importer-pins, and the driver) say the importer's handle keeps it alive."""
    ack = step_info("consumer", "ack").teaching
    assert "keeps the memory alive" in step_info("consumer", "import").teaching
    assert "does not release memory it is still" not in ack
    assert "does not keep the memory alive" in ack and "importer-pins" in ack
    assert "freed by the consumer's" in SCENARIOS["importer-pins"].explanation


def test_no_seed_number_in_help_causes_steps_scenarios_or_recordings():
    texts = [vmmtui("--help", env=WIDE).stdout] + [
        vmmtui(c, "--help", env=WIDE).stdout for c in COMMANDS
    ]
    assert all("usage:" in t for t in texts)
    texts += [f"{c} {f}" for c, f in [*TABLE.values(), *BY_CALL.values()]]
    texts += [
        f"{s.title} {s.teaching}" for d in (STEPS, LEGACY_STEPS, POOL_STEPS) for s in d.values()
    ]
    texts += [f"{s.summary} {s.explanation}" for s in SCENARIOS.values()]
    for entry in gallery.entries():  # what a replay shows: the recording in today's words
        texts += [e.to_json() for e in resolve(entry.name).events]
    found = [m.group(0) for t in texts for m in [SEED.search(t)] if m]
    assert not found, found


@pytest.mark.parametrize("name", ["h100-vmm-1mib", "cpu-memfd-1mib"])
def test_a_recording_is_labelled_with_the_machine_it_was_made_on(name):
    h = gallery.resolve(name).header
    assert " on vm" not in h.where
    assert h.where.startswith(h.device) and "host" in h.where
