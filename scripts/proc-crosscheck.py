"""Independent check that the fd numbers `vmmtui run` prints are the ones /proc shows.

Steps a session to just after the consumer received the fd, then reads /proc/PID/fd itself (no
vmmtui code in the reading) and prints what it sees next to what the workers reported.
"""

import os
import sys

from vmmtui.plan.config import SessionConfig
from vmmtui.session import Session
from vmmtui.stream.events import StepDone

backend = sys.argv[1] if len(sys.argv) > 1 else "auto"
s = Session(SessionConfig(backend=backend, size=1 << 20))
try:
    s.start()
    state = {}
    while s.next_step != ("consumer", "import"):
        for e in s.step():
            if isinstance(e, StepDone):
                state[e.role] = e.report.state
    ok = True
    for role, key in (("producer", "exported_fd"), ("consumer", "received_fd")):
        pid, fd = s.workers[role].pid, getattr(state[role], key)
        target = os.readlink(f"/proc/{pid}/fd/{fd}")
        print(f"{role} pid {pid}: reported {key}={fd}; /proc/{pid}/fd/{fd} -> {target}")
        ok &= target.startswith(("/dev/nvidia", "/memfd:"))
    others = [
        fd
        for fd in os.listdir(f"/proc/{s.workers['producer'].pid}/fd")
        if os.readlink(f"/proc/{s.workers['producer'].pid}/fd/{fd}").startswith("/dev/nvidia")
    ]
    verdict = s.kcmp.get("consumer")
    print(
        f"producer has {len(others)} fds on /dev/nvidia*; kcmp: "
        + (
            f"producer fd {verdict.producer_fd} vs consumer fd {verdict.consumer_fd}: {verdict.detail}"
            if verdict
            else "none"
        )
    )
    ok &= bool(verdict and verdict.same)
    print("CROSSCHECK", "OK" if ok else "FAILED")
finally:
    s.close()
sys.exit(0 if ok else 1)
