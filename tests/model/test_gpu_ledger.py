"""The GPU ledger as a projection of the world (``model/gpu_ledger.py``): what NVML charges each
process beside what the trace saw it create, import and pin, from trace events (the stories of
issue 52: a killed exporter, two importers, torch's IPC limbo, a trace that began late)."""

from vmmtui.model.gpu_ledger import Kind, gpu_ledger, of_world
from vmmtui.model.ledger import Ledger
from vmmtui.model.world import World
from vmmtui.stream.gpu import GpuCharge, GpuReading, GpuTable, NvmlSample
from vmmtui.stream.observed import (
    CudaCall,
    FdCloseCall,
    FdsReceived,
    FdsSent,
    ProcessExit,
    SocketEnd,
)
from vmmtui.words.gpu import row_sentence, table_lines

SOCK, PEER = SocketEnd(100, 101, "@vmm"), SocketEnd(101, 100, "@vmm")
A, B, C = 1000, 2000, 3000
MiB = 1 << 20
IPC = "5a" * 64


def reading(**charges: int) -> NvmlSample:
    """NVML's reading of one GPU (``pPID=bytes``)."""
    listed = [GpuCharge(int(p[1:]), n) for p, n in charges.items()]
    return NvmlSample([GpuReading(0, "GPU-x", 80 << 30, sum(charges.values()), listed)])


def vmm_share(size: int = 64 * MiB) -> list:
    """A makes ``size`` on GPU 0, exports it as fd 7 and sends it; B imports and maps it."""
    return [
        CudaCall(A, A, 1, "cuMemCreate", 0, size=size, device=0, handle_types=1, handle=0xA),
        CudaCall(A, A, 2, "cuMemExportToShareableHandle", 0, handle=0xA, fd=7),
        FdsSent(A, A, 3, "sendmsg", SOCK, [7], ["f7"], 1),
        FdsReceived(B, B, 4, "recvmsg", PEER, [9], ["f7"], 1),
        CudaCall(B, B, 5, "cuMemImportFromShareableHandle", 0, handle=0xB, fd=9),
        FdCloseCall(B, B, 6, 9, "f7", 0),
        CudaCall(B, B, 7, "cuMemMap", 0, handle=0xB, ptr=0x7F0000, size=size),
    ]


def legacy_share(size: int = 32 * MiB, *importers: int) -> list:
    """A allocates ``size`` with cuMemAlloc and makes a legacy IPC handle; each importer opens it."""
    events = [
        CudaCall(A, A, 10, "cuMemAlloc", 0, size=size, ptr=0x9000),
        CudaCall(A, A, 11, "cuIpcGetMemHandle", 0, ptr=0x9000, ipc=IPC),
    ]
    for i, pid in enumerate(importers or (B,)):
        events.append(CudaCall(pid, pid, 12 + i, "cuIpcOpenMemHandle_v2", 0, ptr=0x7000, ipc=IPC))
    return events


def world_of(*events) -> World:
    w = World()
    for e in events:
        w.fold(e)
    return w


def rows(w: World) -> dict:
    (gpu,) = of_world(w).gpus
    return {r.pid: r for r in gpu.rows}


def test_before_the_kill_the_creator_is_charged_and_pins_for_the_importer():
    w = world_of(*vmm_share(), *legacy_share(), reading(**{f"p{A}": 396 * MiB, f"p{B}": 300 * MiB}))
    r = rows(w)
    assert r[A].created == 96 * MiB and r[A].pinned_for_others == 96 * MiB
    assert r[A].by_kind == {Kind.VMM: 64 * MiB, Kind.IPC: 32 * MiB}
    assert r[B].imported == 96 * MiB and r[B].orphaned == 0
    assert (r[B].imports, r[B].ipc_opens) == (1, 1)
    assert (r[A].difference, r[B].difference) == (300 * MiB, 300 * MiB)


def test_after_the_kill_the_importer_is_charged_and_the_bytes_are_orphaned_with_their_creator():
    w = world_of(
        *vmm_share(), *legacy_share(), ProcessExit(A, A, 20, 9), reading(**{f"p{B}": 396 * MiB})
    )
    (gpu,) = of_world(w).gpus
    r = {x.pid: x for x in gpu.rows}
    assert not r[A].alive and r[A].charged is None and r[A].accounted == 0
    assert r[B].orphaned == 96 * MiB and gpu.orphaned == 96 * MiB
    assert {(s.creator, s.creator_alive, s.creator_gone_at) for s in r[B].shares} == {
        (A, False, 20)
    }
    assert r[B].accounted == 96 * MiB and r[B].difference == 300 * MiB
    said = row_sentence(
        next(x for x in w.fold(reading(**{f"p{B}": 396 * MiB})) if isinstance(x, GpuTable)).rows[1],
        20,
    )
    assert "96 MiB orphaned: no living creator owns it" in said


def test_two_importers_each_pin_it_but_the_gpu_counts_the_orphaned_bytes_once():
    """NVML charges one importer; the other row shows the difference, never hidden."""
    w = world_of(*legacy_share(32 * MiB, B, C), ProcessExit(A, A, 20, 9),
                 reading(**{f"p{B}": 332 * MiB, f"p{C}": 300 * MiB}))  # fmt: skip
    (gpu,) = of_world(w).gpus
    r = {x.pid: x for x in gpu.rows}
    assert r[B].orphaned == r[C].orphaned == 32 * MiB
    assert gpu.orphaned == 32 * MiB
    assert r[B].difference == 300 * MiB and r[C].difference == 268 * MiB
    lines = table_lines(
        next(x for x in w.fold(reading(**{f"p{B}": 332 * MiB, f"p{C}": 300 * MiB})))
    )
    assert (
        lines[0]
        == "GPU 0 (GPU-x): NVML charges 632 MiB of 632 MiB used to 2 processes; 32 MiB orphaned"
    )


def test_an_exporter_still_holding_what_it_sent_after_every_importer_closed_is_said_as_such():
    """torch's IPC limbo: the receivers let go, the sender's block stays until ipc_collect()."""
    w = world_of(*legacy_share(), CudaCall(B, B, 30, "cuIpcCloseMemHandle", 0, ptr=0x7000))
    r = rows(
        world_of(
            *legacy_share(),
            CudaCall(B, B, 30, "cuIpcCloseMemHandle", 0, ptr=0x7000),
            reading(**{f"p{A}": 332 * MiB}),
        )
    )
    assert r[A].after_importers == 32 * MiB and r[A].pinned_for_others == 0
    assert "torch.cuda.ipc_collect()" in row_sentence(of_world_table(w, A), 0)
    # once it frees it, nothing is held after the importers
    freed = world_of(*legacy_share(), CudaCall(B, B, 30, "cuIpcCloseMemHandle", 0, ptr=0x7000),
                     CudaCall(A, A, 31, "cuMemFree", 0, ptr=0x9000), reading(**{f"p{A}": 300 * MiB}))  # fmt: skip
    assert rows(freed)[A].created == 0 and rows(freed)[A].after_importers == 0


def of_world_table(w: World, pid: int):
    table = next(x for x in w.fold(reading(**{f"p{pid}": 1})) if isinstance(x, GpuTable))
    return next(r for r in table.rows if r.pid == pid)


def test_memory_exported_before_the_trace_began_is_found_not_made():
    """trace -p: the export is seen, the cuMemCreate was not: its size and making unknown."""
    events = [
        CudaCall(A, A, 2, "cuMemExportToShareableHandle", 0, handle=0xA, fd=7),
        FdsSent(A, A, 3, "sendmsg", SOCK, [7], ["f7"], 1),
        FdsReceived(B, B, 4, "recvmsg", PEER, [9], ["f7"], 1),
        CudaCall(B, B, 5, "cuMemImportFromShareableHandle", 0, handle=0xB, fd=9),
    ]
    r = rows(world_of(*events, reading(**{f"p{A}": 4706 * MiB})))
    assert r[A].found and r[B].found
    assert all(s.found for s in r[B].shares)
    table = of_world_table(world_of(*events), B)
    assert "found held at the start" in row_sentence(table, 0)


def test_no_nvml_reading_still_gives_the_world_s_side_and_no_charge():
    g = gpu_ledger(world_of(*vmm_share()).ledger, None)
    (gpu,) = g.gpus
    assert gpu.index == 0 and {r.pid: r.charged for r in gpu.rows} == {A: None, B: None}
    assert g.sample is None


def test_a_ledger_without_any_gpu_memory_and_no_reading_has_no_gpu():
    assert gpu_ledger(Ledger(), None).gpus == ()
