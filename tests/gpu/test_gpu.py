"""The same whole sessions on the cuda backend (skipped where no GPU with VMM + POSIX fds exists)."""

import os

import pytest

from vmmtui.plan.config import SessionConfig
from vmmtui.session import Session
from vmmtui.stream.events import KcmpVerdict, SessionClosed, StepDone
from vmmtui.system.fdtable import FdTable
from vmmtui.words.troubleshooting import worded

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("size", [1 << 20, 1 << 30], ids=["1MiB", "1GiB"])
def test_cuda_session_verifies_and_fds_match_proc(size, clean_state):
    events = []
    s = Session(SessionConfig(backend="cuda", size=size, tmpdir=str(clean_state)))
    try:
        events += s.start()
        for e in s.run():
            events.append(e)
            if isinstance(e, StepDone) and e.step == "receive":
                rfd = e.report.state.received_fd
                table = FdTable.read(s.workers["consumer"].pid)
                assert table.entries[rfd].target.startswith("/dev/nvidia")
            if isinstance(e, StepDone) and e.step == "export":
                xfd = e.report.state.exported_fd
                assert xfd in FdTable.read(s.workers["producer"].pid).entries
    finally:
        events += s.close()
    assert s.verified and s.failure is None and s.fd_problems == 0
    query = next(e for e in events if isinstance(e, StepDone) and e.step == "query").report.state
    assert query.alloc_size % query.granularity == 0 and query.alloc_size >= size
    kc = [e for e in events if isinstance(e, KcmpVerdict)]
    assert kc and kc[-1].same is True
    assert isinstance(events[-1], SessionClosed) and events[-1].clean
    assert os.listdir(clean_state) == []


@pytest.fixture(scope="module", autouse=True)
def cuda_context():
    """Open this process's own context before clean_state counts fds (the driver's fds stay open)."""
    device_free()


def device_free() -> int:
    """Free device memory as the driver reports it (cuMemGetInfo), from a context in this process."""
    from cuda.bindings import driver as cu

    cu.cuInit(0)
    _, dev = cu.cuDeviceGet(0)
    _, ctx = cu.cuDevicePrimaryCtxRetain(dev)
    cu.cuCtxSetCurrent(ctx)
    err, free, _ = cu.cuMemGetInfo()
    assert err == cu.CUresult.CUDA_SUCCESS
    return int(free)


def settled_free(before: int, tolerance: int = 64 << 20) -> int:
    """Free memory once the workers' contexts are gone (the driver frees them a little after exit)."""
    import time

    free = device_free()
    for _ in range(50):
        if free >= before - tolerance:
            break
        time.sleep(0.1)
        free = device_free()
    return free


def run_cuda(tmp, size=1 << 20, **kw):
    s = Session(SessionConfig(backend="cuda", size=size, tmpdir=str(tmp), **kw))
    return s, s.lifetime()


CUDA_SCENARIOS = [
    "unaligned-size",
    "consumer-first",
    "stale-socket",
    "wrong-release",
    "producer-dies",
    "consumer-dies",
    "consumer-hangs",
    "leaked-fd",
    "no-fd-handle-type",
    "intruder",
    "out-of-memory",
    "legacy-second-context",
]


@pytest.mark.parametrize("name", CUDA_SCENARIOS)
def test_cuda_scenario_happens_as_described_and_memory_comes_back(name, clean_state):
    before = device_free()
    s, events = run_cuda(
        clean_state, 1 << 30 if name == "producer-dies" else 1 << 20, scenario=name
    )
    print(
        f"\n{name}: outcome {s.outcome.outcome} at {s.outcome.at or '-'}"
        + (f": {s.failure.one_line()}" if s.failure else "")
    )
    assert s.outcome.as_expected, s.outcome
    if name == "unaligned-size":
        assert s.failure.call == "cuMemCreate" and s.failure.code == "CUDA_ERROR_INVALID_VALUE"
    if name == "out-of-memory":
        assert s.failure.code == "CUDA_ERROR_OUT_OF_MEMORY"
    if name == "no-fd-handle-type":
        assert s.failure.call == "cuMemExportToShareableHandle"
    if name == "legacy-second-context":
        assert (
            s.failure.call == "cuIpcOpenMemHandle (second context)"
            and "one context per device" in worded(s.failure)[0]
        )
    if name == "leaked-fd":
        assert "/dev/nvidia" in s.failure.message
    assert isinstance(events[-1], SessionClosed) and events[-1].clean
    after = settled_free(before)
    assert after >= before - (64 << 20), (
        f"device memory not back: {before} free before, {after} after"
    )


@pytest.mark.parametrize("step", ["create", "map", "export", "send"])
def test_cuda_producer_killed_mid_way_gives_the_memory_back(step, clean_state):
    before = device_free()
    s, events = run_cuda(clean_state, 1 << 30, crash=f"producer:{step}:kill")
    assert s.failure.code == "WORKER_DIED" and events[-1].clean
    assert settled_free(before) >= before - (64 << 20)


@pytest.mark.parametrize("step", ["import", "map", "verify"])
def test_cuda_consumer_killed_mid_way_gives_the_memory_back(step, clean_state):
    before = device_free()
    s, events = run_cuda(clean_state, 1 << 30, crash=f"consumer:{step}:kill")
    assert s.failure.code == "WORKER_DIED" and events[-1].clean
    assert settled_free(before) >= before - (64 << 20)


# -- issue 5 and 6 on the GPU ------------------------------------------------------------------------
def device_count() -> int:
    from cuda.bindings import driver as cu

    cu.cuInit(0)
    return int(cu.cuDeviceGetCount()[1])


@pytest.mark.parametrize("verify", ["device", "host", "both"])
def test_cuda_verify_modes(verify, clean_state):
    s, events = run_cuda(clean_state, 64 << 20, verify=verify)
    assert s.verified and s.failure is None and events[-1].clean
    state = next(e for e in events if isinstance(e, StepDone) and e.step == "verify").report.state
    assert state.verification.on == verify and state.verification.checked == (64 << 20) // 4
    assert ("verify" in state.gpu_ms) == (verify != "host")


def test_legacy_ipc_verifies_and_no_fd_reaches_the_consumer(clean_state):
    before = device_free()
    s, events = run_cuda(clean_state, 64 << 20, mechanism="legacy")
    assert s.verified and s.failure is None and events[-1].clean, s.failure
    done = {(e.role, e.step): e.report for e in events if isinstance(e, StepDone)}
    handle = done[("producer", "export")].state.mapping.ipc_handle
    assert len(bytes.fromhex(handle)) == 64
    receive = done[("consumer", "receive")]
    assert receive.opened == [] and receive.state.received_fd is None
    assert [c.name for c in done[("consumer", "import")].calls if c.name.startswith("cuIpc")] == [
        "cuIpcOpenMemHandle"
    ]
    assert any(c.name == "cuIpcCloseMemHandle" for c in done[("consumer", "cleanup")].calls)
    assert any(c.name == "cuMemFree" for c in done[("producer", "cleanup")].calls)
    from vmmtui.stream.events import Notice, NoticeCode
    from vmmtui.words.notices import text_of

    note = next(
        text_of(e) for e in events if isinstance(e, Notice) and e.code == NoticeCode.FD_DELTA
    )
    assert note.startswith("consumer fd table") and "no fd arrived" in note
    assert not [e for e in events if isinstance(e, KcmpVerdict)]
    assert settled_free(before) >= before - (64 << 20)


@pytest.mark.parametrize("mechanism", ["vmm", "legacy"])
def test_four_consumers_each_map_the_same_allocation(mechanism, clean_state):
    s, events = run_cuda(clean_state, 256 << 20, consumers=4, mechanism=mechanism)
    assert s.verified and s.failure is None and events[-1].clean, s.failure
    assert set(s.verdicts) == {f"consumer-{k}" for k in range(1, 5)} and all(s.verdicts.values())
    if mechanism == "vmm":
        assert len(s.kcmp) == 4 and all(v.same for v in s.kcmp.values())


@pytest.mark.parametrize("mechanism", ["vmm", "legacy"])
def test_consumers_write_their_slices_and_the_producer_verifies(mechanism, clean_state):
    s, events = run_cuda(
        clean_state, 64 << 20, consumers=3, direction="consumer-writes", mechanism=mechanism
    )
    assert s.verified and s.failure is None and events[-1].clean, s.failure
    done = {(e.role, e.step): e.report for e in events if isinstance(e, StepDone)}
    slices = [done[(f"consumer-{k}", "write")].state.slice for k in (1, 2, 3)]
    assert slices[0][0] == 0 and slices[-1][1] == (64 << 20) // 4
    assert all(a[1] == b[0] for a, b in zip(slices, slices[1:], strict=False))
    assert done[("producer", "verify")].state.verification.passed


def test_consumers_on_another_gpu(clean_state):
    if device_count() < 2:
        pytest.skip("needs two GPUs")
    for mechanism in ("vmm", "legacy"):
        s, events = run_cuda(
            clean_state, 256 << 20, consumers=2, devices=[1, 0], mechanism=mechanism
        )
        assert s.verified and s.failure is None and events[-1].clean, (mechanism, s.failure)
        done = {(e.role, e.step): e.report for e in events if isinstance(e, StepDone)}
        assert done[("consumer-1", "init")].state.device == 1
        assert done[("consumer-1", "import")].state.peer_access is True


def test_bench_on_the_gpu_measures_every_path(tmp_path):
    from vmmtui.backends import choose
    from vmmtui.bench.run import Bench, BenchConfig

    result = Bench(
        BenchConfig("cuda", [2 << 20, 64 << 20], repeat=2, tmpdir=str(tmp_path)),
        choose("cuda"),
        progress=print,
    ).run()
    for path in ("vmm", "legacy", "staged", "memfd"):
        for size in (2 << 20, 64 << 20):
            entry = result.paths[path][size]
            assert entry.verified == "2/2", (path, size, entry)
    vmm = result.paths["vmm"][64 << 20]
    assert (vmm.verify_gbps.median or 0) > 0 and (vmm.fill_gbps.median or 0) > 0, vmm
    assert result.ceiling_gbps[64 << 20] > 0
    # the floor and the peer, in the same run: each verified, or skipped with its reason
    import shutil

    from vmmtui.bench.peers import torch_missing

    for path, missing in (("c_floor", shutil.which("nvcc") is None), ("torch", torch_missing())):
        for size in (2 << 20, 64 << 20):
            if missing:
                assert result.skipped[path][size], (path, size)
            else:
                entry = result.paths[path][size]
                assert entry.verified == "2/2" and (entry.e2e_ms.median or 0) > 0, (path, entry)
