"""The kernels ship as PTX made from pattern_kernels.cu: no drift between the two, and NVRTC stays a second way."""

import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

from vmmtui.backends import kernel_image
from vmmtui.backends.kernel_image import (
    DIGEST_LINE,
    PTX_ARCH,
    PTX_FILE,
    compile_cubin,
    generate_ptx,
    nvrtc_version,
    ptx_image,
    source_digest,
)
from vmmtui.stream.failures import StepError

ROOT = Path(__file__).resolve().parents[2]
NVCC = shutil.which("nvcc")


def _nvrtc_missing() -> str | None:
    try:
        nvrtc_version()
    except Exception as exc:  # cuda.pathfinder raises its own type when libnvrtc is absent
        return f"{type(exc).__name__}: {str(exc)[:80]}"
    return None


def _release(text: str) -> str | None:
    found = re.search(r"^// Cuda compilation tools, release (\S+), (V\S+)", text, re.M)
    return found.group(2) if found else None


def test_the_shipped_ptx_was_made_from_this_source():
    """Runs everywhere (no nvcc): an edit of pattern_kernels.cu without regenerating the PTX fails here."""
    text = PTX_FILE.read_text()
    assert text.splitlines()[0] == DIGEST_LINE.format(arch=PTX_ARCH, digest=source_digest()), (
        "pattern_kernels.ptx is stale: run python -m vmmtui.backends.kernel_image --write-ptx (needs nvcc)"
    )
    assert re.search(r"^\.target sm_75$", text, re.M) and re.search(r"^\.version 9\.0$", text, re.M)
    for kernel in ("fill_pattern", "verify_pattern"):
        assert re.search(rf"^\.visible \.entry {kernel}\(", text, re.M), kernel


def test_the_image_is_nul_terminated_and_labelled(monkeypatch, tmp_path):
    image, label = ptx_image()
    assert image.endswith(b"\0") and image.count(b"\0") == 1 and label == "PTX 9.0 sm_75"
    other = tmp_path / "old.ptx"
    other.write_text(".version 99.0\n.target sm_75\n")
    monkeypatch.setenv(kernel_image.PTX_ENV, str(other))
    assert ptx_image()[1] == f"PTX 99.0 sm_75 from {other}"
    monkeypatch.setenv(kernel_image.PTX_ENV, str(tmp_path / "missing.ptx"))
    with pytest.raises(StepError, match="OSERROR"):
        ptx_image()


def test_the_ptx_and_its_source_are_package_data():
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"
    ]["vmmtui"]
    assert "backends/*.ptx" in data and "backends/*.cu" in data


@pytest.mark.skipif(
    NVCC is None, reason="nvcc not installed (the digest test above still guards the source)"
)
def test_nvcc_regenerates_the_shipped_ptx_exactly():
    shipped = PTX_FILE.read_text()
    try:
        made = generate_ptx(NVCC)
    except subprocess.CalledProcessError as exc:
        pytest.fail(f"nvcc -ptx -arch={PTX_ARCH} failed: {exc.stderr[-400:]}")
    if _release(made) != _release(shipped):
        pytest.skip(
            f"nvcc {_release(made)} is not the nvcc that made the shipped PTX ({_release(shipped)})"
        )
    assert made == shipped, (
        "pattern_kernels.ptx drifted: run python -m vmmtui.backends.kernel_image --write-ptx"
    )


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not installed")
@pytest.mark.parametrize("arch", ["sm_75", "sm_90"])
def test_ptxas_assembles_the_shipped_ptx(tmp_path, arch):
    """What the driver's JIT will do with it, done by the toolkit's assembler."""
    out = subprocess.run(
        ["ptxas", f"-arch={arch}", "-o", str(tmp_path / "k.cubin"), str(PTX_FILE)],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr


def test_nvrtc_can_be_left_out(monkeypatch):
    monkeypatch.setenv(kernel_image.NVRTC_ENV, "0")
    with pytest.raises(StepError, match="NVRTC_ERROR.*left out"):
        nvrtc_version()


@pytest.mark.skipif(_nvrtc_missing() is not None, reason="libnvrtc not installed")
def test_compile_gives_a_cubin_and_leaves_the_bytes_singletons_alone():
    cubin, log = compile_cubin("sm_90")
    assert cubin[:4] == b"\x7fELF" and log == ""
    # NVRTC writes its log's NUL into the buffer it is given: a 1-byte buffer would be CPython's shared
    # b" " (b" " * 1 returns it), and every b" " in the process would read b"\x00" afterwards
    one = len(log) + 1  # not a constant, so that the multiplication happens at run time
    assert (b" " * one)[0] == 32


def test_the_import_steps_size_check_costs_no_module_import_and_no_long_repr():
    """On the H100 the consumer's import step took 1.4 ms where its driver calls took 0.17: the size
    check's module was imported inside the step and the allocation's properties were logged through
    their 12-line str(). Both are gone: the module comes with the backend, the call log says
    ``PINNED on device 0``."""
    cu = pytest.importorskip("cuda.bindings.driver")
    import subprocess
    import sys

    from vmmtui.backends.errors import short

    prop = cu.CUmemAllocationProp()
    prop.type = cu.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
    prop.location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
    assert short(prop) == "PINNED on device 0"
    loaded = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, vmmtui.backends.cuda; print('vmmtui.backends.cuda_size' in sys.modules)",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert loaded == "True"


def test_the_pool_calls_come_with_the_cuda_backend_not_inside_a_timed_step():
    """``pools()`` imported cuda_pool on first use: the pool road's query (producer) and import
    (consumer) steps paid that import, 2-3 ms each on the H100 (a fresh checkout compiles it)."""
    import subprocess
    import sys

    loaded = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, vmmtui.backends.cuda; print('vmmtui.backends.cuda_pool' in sys.modules)",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert loaded == "True"
