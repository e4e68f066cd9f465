"""The new roads on the cuda backend (issue 20): the pidfd transport, memory pools, and their scenarios,
each ending with the device memory back (cuMemGetInfo). Skipped where no usable GPU exists; run by
``bash scripts/gpu-check.sh roads``."""

import pytest

from tests.gpu.test_gpu import device_free, run_cuda, settled_free
from vmmtui.stream.events import KcmpVerdict, SessionClosed, StepDone

pytestmark = pytest.mark.gpu


def done(events) -> dict:
    return {(e.role, e.step): e.report for e in events if isinstance(e, StepDone) and e.index >= 0}


@pytest.fixture(scope="module", autouse=True)
def cuda_context():
    device_free()


@pytest.mark.parametrize("mechanism", ["vmm", "pool"])
def test_pidfd_takes_the_gpu_fd_and_kcmp_proves_it(mechanism, clean_state):
    before = device_free()
    s, events = run_cuda(clean_state, 64 << 20, transport="pidfd", mechanism=mechanism)
    assert s.verified and s.failure is None and events[-1].clean, s.failure
    steps = done(events)
    receive = steps[("consumer", "receive")]
    names = [c.name for c in receive.calls]
    assert names.index("recvmsg") < names.index("pidfd_open") < names.index("pidfd_getfd")
    taken = next(h for h in receive.held if h.kind == "received")
    assert taken.target.startswith("/dev/nvidia") and taken.note.startswith(
        "taken with pidfd_getfd"
    )
    verdicts = [e for e in events if isinstance(e, KcmpVerdict)]
    assert verdicts and all(v.same for v in verdicts)
    assert settled_free(before) >= before - (64 << 20)


@pytest.mark.parametrize("size", [1 << 20, 1 << 30], ids=["1MiB", "1GiB"])
def test_pool_road_end_to_end_and_freed_in_order(size, clean_state):
    before = device_free()
    s, events = run_cuda(clean_state, size, mechanism="pool")
    assert s.verified and s.failure is None and events[-1].clean, s.failure
    steps = done(events)
    export = [c.name for c in steps[("producer", "export")].calls]
    assert export == ["cuMemPoolExportToShareableHandle", "cuMemPoolExportPointer"]
    sent = steps[("producer", "send")].state.sent
    assert len(bytes.fromhex(sent.export_data)) == 64
    imported = steps[("consumer", "import")]
    names = [c.name for c in imported.calls]
    assert names.index("cuMemPoolImportFromShareableHandle") < names.index("cuMemPoolImportPointer")
    assert imported.state.size_reported >= size
    assert steps[("consumer", "receive")].state.received_fd is not None
    consumer_free = [c.name for c in steps[("consumer", "cleanup")].calls]
    assert consumer_free.index("cuMemFreeAsync") < consumer_free.index("cuMemPoolDestroy")
    order = [(e.role, e.step) for e in events if isinstance(e, StepDone) and e.index >= 0]
    assert order.index(("consumer", "cleanup")) < order.index(("producer", "cleanup"))
    kc = [e for e in events if isinstance(e, KcmpVerdict)]
    assert kc and kc[-1].same is True
    assert settled_free(before) >= before - (64 << 20)


def test_pool_with_consumers_writing(clean_state):
    s, events = run_cuda(
        clean_state, 64 << 20, mechanism="pool", consumers=2, direction="consumer-writes"
    )
    assert s.verified and s.failure is None and events[-1].clean, s.failure


@pytest.mark.parametrize(
    "name",
    ["pool-no-handle-type", "pidfd-seccomp", "pidfd-pidns", "pidfd-yama", "pidfd-producer-gone"],
)
def test_new_scenarios_on_cuda_and_memory_comes_back(name, clean_state):
    from vmmtui.scenarios import SCENARIOS

    why = SCENARIOS[name].host_reason()
    if why:
        pytest.skip(f"{name} cannot be shown on this host: {why}")
    before = device_free()
    s, events = run_cuda(clean_state, 1 << 20, scenario=name)
    print(f"\n{name}: {s.outcome.outcome} at {s.outcome.at}: {s.failure and s.failure.one_line()}")
    assert s.outcome.as_expected, s.outcome
    if name == "pool-no-handle-type":
        assert s.failure.call == "cuMemPoolExportToShareableHandle"
    assert isinstance(events[-1], SessionClosed) and events[-1].clean
    assert settled_free(before) >= before - (64 << 20)


def test_importer_pins_the_device_memory_until_it_releases(clean_state):
    size = 1 << 30
    before = device_free()
    s, events = run_cuda(clean_state, size, scenario="importer-pins")
    assert s.verified and s.outcome.as_expected and events[-1].clean, s.outcome
    steps = done(events)
    producer = steps[("producer", "cleanup")].state.scenario_results
    consumer = steps[("consumer", "cleanup")].state.scenario_results
    held, freed = int(consumer["used before release"]), int(consumer["used after release"])
    print(f"\nproducer released: {producer}; consumer: {consumer}")
    assert held - freed >= size - (64 << 20), "the consumer's release did not free the allocation"
    assert int(producer["used after release"]) - int(producer["used before release"]) > -size // 2
    assert s.fd_problems == 0
    assert settled_free(before) >= before - (64 << 20)
