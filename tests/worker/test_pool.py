"""The memory-pool road's shape, checked without a GPU: its plan, its teaching text, its refusals.

The road itself runs on cuda only (scripts/gpu-check.sh roads); on memfd it is refused, never faked."""

import pytest

from vmmtui.plan.config import SessionConfig, WorkerConfig, validate
from vmmtui.plan.steps import CONSUMER, PRODUCER, build_plan, step_info
from vmmtui.scenarios import SCENARIOS
from vmmtui.stream.failures import StepError
from vmmtui.stream.values import AllocMessage
from vmmtui.words.troubleshooting import explain
from vmmtui.worker.core import Worker


def test_the_pool_plan_has_no_reserve_map_or_set_access():
    plan = build_plan("pool")
    assert not {s for _, s in plan} & {"reserve", "map", "set_access"}
    assert plan.index((CONSUMER, "cleanup")) < plan.index((PRODUCER, "cleanup"))
    assert plan.index((PRODUCER, "wait_ack")) < plan.index((PRODUCER, "cleanup"))


def test_the_pool_steps_name_the_pool_calls():
    assert "cuMemPoolCreate" in step_info(PRODUCER, "create", "pool").apis
    export = step_info(PRODUCER, "export", "pool").apis
    assert export == ("cuMemPoolExportToShareableHandle", "cuMemPoolExportPointer")
    imp = step_info(CONSUMER, "import", "pool").apis
    assert imp[:2] == ("cuMemPoolImportFromShareableHandle", "cuMemPoolImportPointer")
    assert "cuMemFreeAsync" in step_info(CONSUMER, "cleanup", "pool").apis
    assert "pidfd_getfd" in step_info(CONSUMER, "receive", "pool", "pidfd").apis


def test_memfd_refuses_pools_in_one_line():
    why = validate(SessionConfig(mechanism="pool"), "memfd")
    assert why.startswith("memory pools are a CUDA road") and "--mechanism vmm" in why
    assert "pool-no-handle-type" in SCENARIOS
    assert "memfd" in SCENARIOS["pool-no-handle-type"].cannot


def test_a_pool_worker_on_memfd_says_pools_are_cuda_only(tmp_path):
    """Past validate (a hand-made worker), the backend itself refuses: nothing pretends to be a pool."""
    w = Worker(WorkerConfig(PRODUCER, "memfd", 4096, str(tmp_path / "s"), mechanism="pool"))
    assert w.run_step("init").ok
    query = w.run_step("query")
    assert not query.ok and query.failure.code == "UNAVAILABLE"
    assert "memory pools" in query.failure.message
    w.release_all()


def test_the_consumer_refuses_export_data_that_is_not_64_bytes(tmp_path):
    w = Worker(WorkerConfig(CONSUMER, "memfd", 4096, str(tmp_path / "s"), mechanism="pool"))
    meta = AllocMessage(4096, 4096, 4, 0, "", "cuda", "pool", export_data="ab" * 10)
    with pytest.raises(StepError, match="export_data is not 64 bytes"):
        w.sharing.received(w, meta, [99])


def test_the_pool_export_refusal_has_its_cause_and_fix():
    cause, fix = explain("CUDA_ERROR_INVALID_VALUE", "cuMemPoolExportToShareableHandle")
    assert "handleTypes" in cause and "POSIX_FILE_DESCRIPTOR" in fix
