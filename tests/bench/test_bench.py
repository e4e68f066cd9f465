"""The bench's logic and output format, on memfd with tiny sizes (the figures themselves are not tested)."""

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from vmmtui.backends import Choice
from vmmtui.bench.report import gaps, svg, tables
from vmmtui.bench.result import BenchResult, Machine, PathSummary, Stats
from vmmtui.bench.run import Bench, BenchConfig, GiB, MiB, stats, targets, write
from vmmtui.cli import main
from vmmtui.plan.steps import build_plan

#: serial: bandwidths measured
pytestmark = pytest.mark.serial

PLAN = build_plan()

MEMFD = Choice("memfd", "memfd backend requested (CPU memory, not GPU memory)")


def test_stats_median_spread_and_percentile():
    assert stats([]) == Stats(0)
    s = stats([5.0, 1.0, 3.0, 2.0, 4.0])
    assert (s.median, s.min, s.max, s.n) == (3.0, 1.0, 5.0, 5)
    assert stats(list(map(float, range(11)))).p90 == 9.0


@pytest.fixture(scope="module")
def memfd_result(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bench")
    lines: list[str] = []
    config = BenchConfig("memfd", [64 << 10, 1 << 20], repeat=2, tmpdir=str(tmp))
    return Bench(config, MEMFD, progress=lines.append).run(), lines


def test_memfd_bench_measures_each_step_and_skips_gpu_paths_with_a_reason(memfd_result):
    result, lines = memfd_result
    assert len(lines) == 2 and all("memfd" in line for line in lines)
    for size in (65536, 1048576):
        entry = result.paths["memfd"][size]
        assert entry.verified == "2/2" and entry.failures == []
        assert {"producer create", "producer fill", "consumer verify", "producer wait_ack"} <= set(
            entry.steps_ms
        )
        assert "producer init" not in entry.steps_ms and set(entry.init_ms) == {
            "producer",
            "consumer",
        }
        assert entry.e2e_ms.n == 2 and entry.e2e_ms.min > 0
        # the span is a sum of steps: at least the fill and the verify in it
        assert (
            entry.e2e_ms.max
            >= entry.steps_ms["producer fill"].min + entry.steps_ms["consumer verify"].min
        )
        assert entry.overhead_ms.n == 2 * len(PLAN) and entry.rtt_overhead_ms.median >= 0
        for path in ("vmm", "legacy", "staged", "c_floor", "torch"):
            assert "needs the cuda backend" in result.skipped[path][size]
    assert result.paths["vmm"] == {} and result.ceiling_gbps == {}
    assert result.machine.hostname and result.config.repeat == 2


def test_targets_say_not_measured_where_no_gpu_ran(memfd_result):
    result, _ = memfd_result
    by_name = {t.name.split(" ")[0]: t for t in result.targets}
    assert by_name["share"].met is None and by_name["zero-copy"].met is None
    assert by_name["inspector"].measured.endswith("(worst size's median)")


def test_written_json_and_svg(memfd_result, tmp_path):
    result, _ = memfd_result
    js, plot = write(result, tmp_path, "t")
    assert BenchResult.from_json(json.loads(js.read_text())) == result  # read back typed, equal
    root = ET.fromstring(plot.read_text())
    lines = [e for e in root.iter() if e.tag.endswith("polyline")]
    assert [e.get("data-path") for e in lines] == ["memfd"]
    assert len(lines[0].get("points").split()) == 2


def synthetic(
    e2e_1g: float, verify: float, copy: float, staged: float, floor: float | None = None
) -> BenchResult:
    """Figures at 2 MiB, 64 MiB, 1 GiB; ``floor``: vmm's time as a multiple of the C floor's (and
    torch taking twice the floor)."""

    def entry(ms, verify_gbps=None):
        return PathSummary(
            "1/1",
            stats([ms]),
            overhead_ms=stats([0.5]),
            verify_gbps=stats([verify_gbps]) if verify_gbps else Stats(),
        )

    sizes = [2 * MiB, 64 * MiB, GiB]
    return BenchResult(
        "2026-11-22",
        machine=Machine(gpu="test"),
        ceiling_gbps={s: copy for s in sizes},
        paths={
            "vmm": {s: entry(e2e_1g * s / GiB, verify) for s in sizes},
            "legacy": {s: entry(e2e_1g * 2 * s / GiB) for s in sizes},
            "staged": {GiB: entry(staged)},
            "memfd": {},
            "c_floor": {s: entry(e2e_1g * s / GiB / floor) for s in sizes} if floor else {},
            "torch": {s: entry(2 * e2e_1g * s / GiB / floor) for s in sizes} if floor else {},
        },
    )


def test_targets_compare_against_the_issue_figures():
    good = synthetic(e2e_1g=4.0, verify=2600.0, copy=3000.0, staged=500.0, floor=1.25)
    assert [t.met for t in targets(good)] == [True] * 6
    bad = synthetic(e2e_1g=6.0, verify=2000.0, copy=3000.0, staged=300.0, floor=2.0)
    met = [t.met for t in targets(bad)]
    assert met == [True, False, False, False, False, True]
    assert targets(bad)[3].measured.startswith("50x")
    assert targets(bad)[4].measured.startswith("2.00x at worst")
    assert targets(synthetic(4.0, 2600.0, 3000.0, 500.0))[4].met is None  # no C floor ran


def test_svg_has_one_line_per_path_and_log_axes():
    result = synthetic(4.0, 2600.0, 3000.0, 500.0)
    root = ET.fromstring(svg(result))
    lines = {e.get("data-path"): e.get("points") for e in root.iter() if e.tag.endswith("polyline")}
    assert set(lines) == {"vmm", "legacy", "staged"}
    xs = [float(p.split(",")[0]) for p in lines["vmm"].split()]
    ys = [float(p.split(",")[1]) for p in lines["vmm"].split()]
    assert xs == sorted(xs) and ys == sorted(
        ys, reverse=True
    )  # bigger sizes right, longer times up
    # log-log: 2 MiB → 64 MiB is 5 doublings, 64 MiB → 1 GiB is 4; time ratios are the same
    assert (xs[1] - xs[0]) / (xs[2] - xs[1]) == pytest.approx(5 / 4, rel=0.01)
    assert tables(result)[0][1].row_count == 3


def test_bench_command_writes_files_and_exits_zero(tmp_path, capsys):
    rc = main(
        [
            "bench",
            "--backend",
            "memfd",
            "--sizes",
            "64KiB",
            "--repeat",
            "1",
            "--out",
            str(tmp_path),
            "--name",
            "cli",
        ]
    )
    assert rc == 0
    assert (tmp_path / "cli.json").exists() and (tmp_path / "cli.svg").exists()
    assert "wrote" in capsys.readouterr().out


def test_bench_command_rejects_bad_input():
    with pytest.raises(SystemExit) as e:
        main(["bench", "--sizes", "12 parsecs"])
    assert e.value.code == 2
    with pytest.raises(SystemExit) as e:
        main(["bench", "--backend", "memfd", "--repeat", "0"])
    assert e.value.code == 2


def test_an_out_that_is_a_file_is_refused_before_measuring(tmp_path, capsys):
    (tmp_path / "f").write_text("")
    argv = ["bench", "--backend", "memfd", "--sizes", "64KiB", "--repeat", "1"]
    assert main([*argv, "--out", str(tmp_path / "f")]) == 2  # was a FileExistsError after the run
    err = capsys.readouterr().err
    assert (
        err
        == f"vmmtui: --out {tmp_path / 'f'}: is not a directory; name a writable directory (it is made if missing)\n"
    )


def _render(result: BenchResult, width: int = 80) -> str:
    import io

    from rich.console import Console

    out = io.StringIO()
    console = Console(file=out, width=width, color_system=None)
    for heading, t in tables(result):
        console.print(heading)
        console.print(t)
    return out.getvalue()


def test_every_column_fits_80_columns_uncut():
    result = synthetic(e2e_1g=4.0, verify=2600.0, copy=3000.0, staged=500.0, floor=1.25)
    for entry in result.paths["vmm"].values():
        entry.fill_gbps = stats([2786.0])
    text = _render(result)
    assert "1.25x" in text and "0.62x" in text  # vmm/C and vmm/torch
    assert "…" not in text and max(map(len, text.splitlines())) <= 80
    for header in (
        "vmm",
        "legacy",
        "staged",
        "staged/vmm",
        "fill",
        "verify",
        "copy",
        "verify/copy",
        "overhead",
        "C floor",
        "vmm/C",
        "torch",
        "vmm/torch",
    ):
        assert header in text, header
    assert "2786" in text and "82%" not in text and "87%" in text  # 2600 / 3000


def test_every_empty_cell_is_explained_under_the_table():
    result = synthetic(e2e_1g=4.0, verify=2600.0, copy=3000.0, staged=500.0)
    result.skipped = {
        "staged": {
            2 * MiB: "above --staged-max 1 MiB",
            64 * MiB: "above --staged-max 1 MiB",
        },
        "memfd": {
            s: "above --memfd-max 1 MiB (memfd fills and checks with numpy: about 5 s per GiB)"
            for s in (2 * MiB, 64 * MiB, GiB)
        },
    }
    lines = gaps(result)
    assert "- staged at 2 MiB, 64 MiB: above --staged-max 1 MiB" in lines
    assert any(line.startswith("- memfd at every size: above --memfd-max") for line in lines)
    assert any(line.startswith("- fill at every size: the kernels did not run") for line in lines)
    assert lines[-1].startswith("- a ratio")  # staged/vmm has a figure at 1 GiB only


def test_bench_output_in_a_pipe_is_readable_and_says_why_cells_are_empty(tmp_path, capsys):
    rc = main(
        [
            "bench",
            "--backend",
            "memfd",
            "--sizes",
            "64KiB,4GiB",
            "--repeat",
            "1",
            "--out",
            str(tmp_path),
        ]
    )
    out = capsys.readouterr().out
    # the words wrap at 80 columns; a path written is whole on its own line, however long
    words = [line for line in out.splitlines() if not line.startswith("wrote /")]
    assert rc == 0 and "…" not in out and max(map(len, words)) <= 80
    assert [line for line in out.splitlines() if line.startswith("wrote ")] == [
        f"wrote {p}" for p in sorted(map(str, tmp_path.iterdir()))
    ]
    assert "memfd at 4 GiB: above --memfd-max 2 GiB" in out and "about 5 s per GiB" in out
    assert (
        "vmm, legacy, staged, pool, pidfd, fill, verify, copy, c_floor, torch at every size: needs the cuda"
        in " ".join(out.split())
    )
    assert "issue 5" not in out and "performance targets on a GPU" in out
    assert "not measured: 1 GiB was not among --sizes" in " ".join(out.split())
    # each reason and target a bullet whose wrapped lines hang under it, no trailing blanks
    lines = out.splitlines()
    block = lines[lines.index("empty cells:") + 1 : lines.index("") if "" in lines else None]
    assert block and all(line.startswith(("- ", "  ")) for line in block), block
    assert all(line == line.rstrip() for line in block)


def test_bench_that_measures_nothing_exits_1_with_the_reason(tmp_path, capsys):
    rc = main(
        ["bench", "--backend", "memfd", "--sizes", "4GiB", "--repeat", "1", "--out", str(tmp_path)]
    )
    captured = capsys.readouterr()
    assert rc == 1
    assert captured.err.startswith("vmmtui: nothing could be measured: above --memfd-max 2 GiB")
    assert "about 5 s per GiB" in captured.err


def test_the_c_floor_and_torch_rows_say_why_they_cannot_run(monkeypatch):
    from vmmtui.bench import peers

    monkeypatch.setenv("PATH", "/nonexistent")
    binary, why = peers.build_c_floor()
    assert binary is None and why.startswith("nvcc is not on the PATH")
    monkeypatch.setattr(peers.importlib.util, "find_spec", lambda name: None)
    assert peers.torch_missing() == "torch is not installed for this Python"


def test_the_c_floor_source_has_the_timed_bench_mode_and_the_same_kernels():
    from vmmtui.bench import peers

    text = peers.SOURCE.read_text()
    assert '"--bench"' in text and '#include "../../vmmtui/backends/pattern_kernels.cu"' in text
    assert (peers.SOURCE.parent / "../../vmmtui/backends/pattern_kernels.cu").resolve() == (
        peers.KERNELS
    )


@pytest.mark.parametrize("name", ["h100-2026-11-22.json", "h100-2026-11-22-earlier.json"])
def test_the_committed_results_read_back_typed(name):
    """Results written before the result was typed read into the BenchResult the bench makes."""
    path = Path(__file__).resolve().parents[2] / "bench" / "results" / name
    result = BenchResult.from_json(json.loads(path.read_text()))
    assert result.machine.gpu.startswith("NVIDIA H100")
    vmm = result.paths["vmm"][GiB]
    assert vmm.all_verified and vmm.e2e_ms.median > 0 and GiB in result.config.sizes
    assert len(result.targets) == 4 and tables(result)


QUICK = ["bench", "--backend", "memfd", "--sizes", "64KiB", "--repeat", "1"]


def test_bench_never_overwrites_the_days_results(tmp_path, capsys):
    assert main([*QUICK, "--out", str(tmp_path)]) == 0
    assert main([*QUICK, "--out", str(tmp_path)]) == 0  # the same day: a new name, not the old one
    stems = sorted(p.stem for p in tmp_path.glob("*.json"))
    assert len(stems) == 2 and stems[1] == stems[0] + "-2", stems
    capsys.readouterr()
    before = {p: p.read_bytes() for p in tmp_path.iterdir()}
    assert (
        main([*QUICK, "--out", str(tmp_path), "--name", stems[0]]) == 2
    )  # refused before measuring
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"--name {stems[0]}" in err[0] and "exists" in err[0], err
    assert {p: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_bench_that_measures_nothing_writes_nothing(tmp_path, capsys):
    out = tmp_path / "results"
    assert (
        main(["bench", "--backend", "memfd", "--sizes", "4GiB", "--repeat", "1", "--out", str(out)])
        == 1
    )
    assert not out.exists() and "wrote" not in capsys.readouterr().out


def test_bench_writes_to_the_users_data_directory_not_where_it_runs(tmp_path, monkeypatch, capsys):
    clone = tmp_path / "clone"
    (clone / "bench" / "results").mkdir(parents=True)
    monkeypatch.chdir(clone)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert main(QUICK) == 0
    assert [p.name for p in clone.rglob("*") if p.is_file()] == []
    written = sorted(p.suffix for p in (tmp_path / "data" / "vmmtui" / "bench").iterdir())
    assert written == [".json", ".svg"] and str(tmp_path / "data") in capsys.readouterr().out
