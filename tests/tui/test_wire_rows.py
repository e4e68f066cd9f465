"""The wire's rows follow the state shown: a transfer's handle type at import is filled in when the
receiver imports it, after the row was first drawn (the panel once kept the first drawing)."""

import html
import re

import pytest

from vmmtui.record import gallery
from vmmtui.tui.replay import ReplayApp

pytestmark = pytest.mark.slow


def wire_rows(app: ReplayApp) -> list[str]:
    text = html.unescape(re.sub(r"<[^>]+>", "", app.export_screenshot())).replace("\xa0", " ")
    return [line for line in text.splitlines() if "pidfd_getfd 760 fd" in line]


@pytest.mark.asyncio
async def test_each_transfer_of_the_torch_trace_says_posix_fd_at_both_ends_at_its_end():
    app = ReplayApp(gallery.resolve("h100-trace-torch-expandable"))
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        for _ in range(1, len(app.timeline)):  # stepped one frame at a time, as a student does
            app.action_step()
            await pilot.pause()
        await pilot.pause(0.3)
        rows = wire_rows(app)
        assert len(rows) == 8, rows
        # the ledger's findings say each went posix-fd → posix-fd: the wire says the same
        assert all("posix-fd → posix-fd" in row for row in rows), rows
