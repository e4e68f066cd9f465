"""The pidfd road as the inspector draws it, from the shipped recording of a real memfd run: the wire
says no fd was in the message, the consumer's fd table marks the fd taken with pidfd_getfd, the
teaching text and the step titles follow the transport."""

import pytest
from test_replay import text_of

from vmmtui.plan.steps import build_plan
from vmmtui.record import gallery
from vmmtui.tui.replay import ReplayApp
from vmmtui.tui.widgets.fd_table import FdTableView
from vmmtui.tui.widgets.wire import WirePanel

#: the slow tier: left out of the default run (README), run by .ci/run after it
pytestmark = pytest.mark.slow

PLAN = build_plan()


@pytest.mark.asyncio
async def test_the_wire_and_fd_table_show_the_fd_taken_not_sent():
    app = ReplayApp(gallery.resolve("cpu-memfd-pidfd-1mib"))
    send = PLAN.index(("producer", "send")) + 1
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("g")
        await pilot.press(*str(send), "enter")
        await pilot.pause()
        wire = text_of(app.query_one(WirePanel))
        assert "no fd in the message: pid" in wire and "pidfd_getfd" in wire
        assert '"transport": "pidfd"' in wire and '"pid":' in wire
        teaching = app.query_one("#teaching")
        assert "Take the fd with pidfd_getfd" in str(teaching.border_title)
        assert text_of(teaching).startswith("recvmsg, pidfd_open, pidfd_getfd")
        await pilot.press("right")
        await pilot.pause()
        wire = text_of(app.query_one(WirePanel))
        assert "taken by consumer with pidfd_open + pidfd_getfd" in wire
        assert "same open file description" in wire
        fds = app.query_one("#consumer-fds", FdTableView)
        taken = [r for r in fds.snapshot.rows if r.kind == "received"]
        assert taken and taken[0].note.startswith("taken with pidfd_getfd")
        assert (
            f"received ≡ producer {app.query_one('#producer-fds', FdTableView).panel.kcmp.producer_fd}"
            in text_of(fds)
        )


@pytest.mark.asyncio
async def test_the_live_inspector_steps_the_pidfd_road_to_verified(tmp_path):
    from driving import MEMFD, step_to, wait_for

    from vmmtui.plan.config import SessionConfig
    from vmmtui.tui.app import InspectorApp

    app = InspectorApp(
        SessionConfig(backend="memfd", size=1 << 20, tmpdir=str(tmp_path), transport="pidfd"), MEMFD
    )
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_for(pilot, lambda: app.session is not None and app.session.started)
        await step_to(pilot, app, PLAN.index(("consumer", "receive")) + 1)
        wire = text_of(app.query_one(WirePanel))
        assert "taken by consumer with pidfd_open + pidfd_getfd" in wire
        assert app.session.kcmp["consumer"].same
        await step_to(pilot, app, len(PLAN))
        assert app.session.verified
        await pilot.press("q")
