"""A process of the user's own that is exiting is gone, never "no permission" (issue 51): from
its exit_mm on, /proc gives its own user EACCES for /proc/PID/fd. Read as a user without root's
capabilities, as polling is used where eBPF is refused."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import stat
import subprocess
import sys

import pytest

from tests.trace.procfs.helpers import ROOT

READER = """
import collections, json, subprocess, sys
from vmmtui.trace.procfs.scan import scan_process
said = collections.Counter()
for _ in range(20):
    p = subprocess.Popen([sys.executable, "-c", "import mmap, os\\n"
        "m = [mmap.mmap(-1, 1 << 20) for _ in range(300)]\\n"
        "for x in m: x[0:1] = b'x'\\n"
        "os._exit(0)"])  # a big map to drop: its exit takes a while
    while (s := scan_process(p.pid)).error != "gone":
        said[(s.error or "read")[:13]] += 1
    p.wait()
print(json.dumps(said))
"""


def test_the_users_own_exiting_process_is_gone_never_no_permission():
    python = shutil.which("python3", path="/usr/bin:/bin")
    if os.geteuid() != 0 or not shutil.which("setpriv") or python is None:
        pytest.skip("reading as another user needs root, setpriv and a python3 every user runs")
    if [p for p in ROOT.parents if not p.stat().st_mode & stat.S_IXOTH]:
        pytest.skip("another user cannot reach this checkout")
    try:
        user = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no nobody account")
    site = [p for p in sys.path if p.endswith("site-packages") and os.path.isdir(p)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *site])}
    res = subprocess.run(
        ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups",
         python, "-c", READER],
        capture_output=True, text=True, timeout=120, cwd="/", env=env,
    )  # fmt: skip
    if res.returncode != 0 and "Error" in res.stderr:
        pytest.skip(f"this python3 cannot import vmmtui's dependencies: {res.stderr[-200:]}")
    said = json.loads(res.stdout.strip().splitlines()[-1])
    assert said.get("read", 0) > 0, said
    assert not [k for k in said if k.startswith("no permission")], said
