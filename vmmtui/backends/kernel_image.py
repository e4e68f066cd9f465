"""Where the fill/verify kernels come from: PTX shipped in the package, JIT-compiled by the driver.

The source is ``pattern_kernels.cu``; ``pattern_kernels.ptx`` is what nvcc made of it for
``compute_75`` (the lowest virtual architecture nvcc 13 targets) and is loaded with
``cuModuleLoadData``: the driver compiles PTX itself (and keeps its own JIT cache), so a machine
with only the NVIDIA driver runs the kernels, with no toolkit and no libnvrtc. NVRTC is the second
way, used only when the driver cannot JIT that PTX (a driver older than the PTX, see PTX_DRIVER).
Imports neither numpy nor the backends, so that the capability probe can try a load cheaply.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from vmmtui.stream.failures import StepError, failure

HERE = Path(__file__).resolve().parent
SOURCE_FILE = HERE / "pattern_kernels.cu"
PTX_FILE = HERE / "pattern_kernels.ptx"
#: the lowest virtual architecture nvcc 13 accepts (compute_70 and below were dropped in CUDA 13)
PTX_ARCH = "compute_75"
#: what the shipped PTX needs of the driver (nvcc 13.0 writes PTX ISA 9.0)
PTX_DRIVER = (
    "an R580 driver (CUDA 13.0) or newer and a Turing-or-newer GPU (compute capability 7.5)"
)
#: the first line of the shipped PTX: which source it was made from
DIGEST_LINE = "// vmmtui: made by nvcc -ptx -arch={arch} from pattern_kernels.cu sha256 {digest}"
#: set to 0 to leave NVRTC out (shows the driver-only path on a machine that has libnvrtc)
NVRTC_ENV = "VMMTUI_NVRTC"
#: a PTX file to load instead of the shipped one (to see what an old driver says, for instance)
PTX_ENV = "VMMTUI_PTX"

SOURCE = SOURCE_FILE.read_text()


def source_digest(text: str = SOURCE) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def generate_ptx(nvcc: str = "nvcc") -> str:
    """Run ``nvcc -ptx`` on the kernel source; the PTX as shipped, digest line first."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "pattern_kernels.ptx"
        subprocess.run(
            [nvcc, "-ptx", f"-arch={PTX_ARCH}", "-o", str(out), str(SOURCE_FILE)],
            check=True,
            capture_output=True,
            text=True,
            cwd=tmp,
        )
        body = out.read_text()
    return DIGEST_LINE.format(arch=PTX_ARCH, digest=source_digest()) + "\n" + body


def ptx_image() -> tuple[bytes, str]:
    """The PTX to load (NUL-terminated, as cuModuleLoadData wants) and a label: ``PTX 9.0 sm_75``."""
    path = Path(os.environ.get(PTX_ENV) or PTX_FILE)
    try:
        text = path.read_text()
    except OSError as exc:
        raise StepError(failure("OSERROR", f"read {path}", str(exc))) from None
    version = re.search(r"^\.version\s+(\S+)", text, re.M)
    target = re.search(r"^\.target\s+(\S+)", text, re.M)
    label = f"PTX {version.group(1) if version else '?'} {target.group(1) if target else '?'}"
    return text.encode() + b"\0", label + ("" if path == PTX_FILE else f" from {path}")


def nvrtc_allowed() -> bool:
    return os.environ.get(NVRTC_ENV, "1") != "0"


def _nvrtc_check(nvrtc, name: str, res) -> tuple:
    err, *values = res
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise StepError(failure("NVRTC_ERROR", name, nvrtc.nvrtcResult(err).name))
    return tuple(values)


def compile_cubin(arch: str) -> tuple[bytes, str]:
    """NVRTC-compile SOURCE for ``arch`` (``sm_90``); returns the cubin and the compile log."""
    from cuda.bindings import nvrtc

    (prog,) = _nvrtc_check(
        nvrtc,
        "nvrtcCreateProgram",
        nvrtc.nvrtcCreateProgram(SOURCE.encode(), b"pattern_kernels.cu", 0, [], []),
    )
    try:
        opts = [f"--gpu-architecture={arch}".encode(), b"--std=c++17"]
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        (log_size,) = _nvrtc_check(
            nvrtc, "nvrtcGetProgramLogSize", nvrtc.nvrtcGetProgramLogSize(prog)
        )
        # NVRTC writes into these buffers. Never let one be a 1-byte bytes object: CPython shares those as
        # singletons (b" " * 1 is b" "), and writing the log's NUL into it corrupts every b" " in the process.
        log = b" " * max(log_size, 2)
        _nvrtc_check(nvrtc, "nvrtcGetProgramLog", nvrtc.nvrtcGetProgramLog(prog, log))
        text = log.decode(errors="replace").rstrip("\0 \n")
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise StepError(
                failure(
                    "NVRTC_ERROR",
                    "nvrtcCompileProgram",
                    f"{nvrtc.nvrtcResult(err).name}: {text[:300]}",
                )
            )
        (size,) = _nvrtc_check(nvrtc, "nvrtcGetCUBINSize", nvrtc.nvrtcGetCUBINSize(prog))
        cubin = b" " * max(size, 2)
        _nvrtc_check(nvrtc, "nvrtcGetCUBIN", nvrtc.nvrtcGetCUBIN(prog, cubin))
        return cubin[:size], text
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def nvrtc_version() -> str:
    """NVRTC's version, or StepError NVRTC_ERROR when it is left out or libnvrtc does not load."""
    if not nvrtc_allowed():
        raise StepError(failure("NVRTC_ERROR", "load libnvrtc", f"left out ({NVRTC_ENV}=0)"))
    try:
        from cuda.bindings import nvrtc

        major, minor = _nvrtc_check(nvrtc, "nvrtcVersion", nvrtc.nvrtcVersion())
    except StepError:
        raise
    except Exception as exc:  # libnvrtc missing: cuda.pathfinder raises its own error type
        raise StepError(
            failure("NVRTC_ERROR", "load libnvrtc", f"{type(exc).__name__}: {str(exc)[:200]}")
        ) from exc
    return f"{major}.{minor}"


PTX_CALL = "cuModuleLoadData (PTX)"


def load_module(b: Any, arch: str) -> tuple[Any, str]:
    """Load the kernels into the current context (``b`` is the cuda backend, or anything with its
    ``call`` and ``calls``): the shipped PTX through the driver's JIT, else (where allowed) an NVRTC cubin.

    Returns the module and how it was made; raises the PTX's StepError when neither way works."""
    from cuda.bindings import driver as cu

    from vmmtui.stream.values import Call

    image, label = ptx_image()
    try:
        return (
            b.call(
                PTX_CALL,
                cu.cuModuleLoadData,
                image,
                show={"image": f"{label}, JIT-compiled by the driver"},
            ),
            f"{label}, JIT-compiled by the driver",
        )
    except StepError as exc:
        ptx_failed = exc.failure
    try:
        version = nvrtc_version()
        t0 = time.perf_counter_ns()
        cubin, _ = compile_cubin(arch)
    except StepError as exc:
        ptx_failed.message += (
            f"; NVRTC, the second way, is not available either: {exc.failure.message}"
        )
        raise StepError(ptx_failed) from None
    b.calls.add(
        Call(
            "nvrtcCompileProgram",
            {"kernels": "fill_pattern, verify_pattern", "arch": arch, "nvrtc": version},
            f"{len(cubin)} bytes",
            time.perf_counter_ns() - t0,
        )
    )
    module = b.call(
        "cuModuleLoadData",
        cu.cuModuleLoadData,
        cubin,
        show={"image": f"cubin {arch} (NVRTC {version})"},
    )
    return (
        module,
        f"compiled by NVRTC {version}: the driver could not JIT the {label} ({ptx_failed.code})",
    )


def try_load(arch: str) -> tuple[str | None, str]:
    """For the capability probe: (None, how) when the kernels load into the current context, else (why not, "").

    The module is unloaded again; no call log is kept."""
    from cuda.bindings import driver as cu

    try:
        image, label = ptx_image()
    except StepError as exc:
        return exc.failure.one_line(), ""
    err, module = cu.cuModuleLoadData(image)
    if err == cu.CUresult.CUDA_SUCCESS:
        cu.cuModuleUnload(module)
        return None, f"{label}, JIT-compiled by the driver"
    ptx_code = cu.CUresult(err).name
    try:
        version = nvrtc_version()
        cubin, _ = compile_cubin(arch)
    except StepError as exc:
        return (
            f"the driver cannot JIT the shipped {label} ({ptx_code}; it needs {PTX_DRIVER}) and NVRTC is not "
            f"available ({exc.failure.message})"
        ), ""
    err, module = cu.cuModuleLoadData(cubin)
    if err != cu.CUresult.CUDA_SUCCESS:
        return (
            f"neither the shipped {label} ({ptx_code}) nor NVRTC's cubin ({cu.CUresult(err).name}) loads",
            "",
        )
    cu.cuModuleUnload(module)
    return None, f"compiled by NVRTC {version} (the driver cannot JIT the {label}: {ptx_code})"


if __name__ == "__main__" and sys.argv[1:] == [
    "--write-ptx"
]:  # regenerate the shipped PTX (needs nvcc)
    PTX_FILE.write_text(generate_ptx())
    print(f"wrote {PTX_FILE}")
