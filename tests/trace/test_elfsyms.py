"""The file offsets the uprobe_multi links are placed at: each is where the function's code is in
the file, checked against the code the dynamic loader mapped for it (the stand-in libcuda, built
here); and the kernel's numbers the link is created with, checked against this kernel's BTF."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path

import pytest

from vmmtui.trace import loader
from vmmtui.trace.cuda import FUNCS
from vmmtui.trace.elfsyms import ElfError, function_offsets

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture(scope="module")
def libcuda(tmp_path_factory) -> Path:
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler to build the stand-in libcuda")
    lib = tmp_path_factory.mktemp("elf") / "libcuda.so.1"
    subprocess.run(
        [cc, "-shared", "-fPIC", "-O1", "-o", str(lib), str(FIXTURES / "fake_libcuda.c")],
        check=True,
    )
    return lib


def test_each_offset_holds_the_code_the_loader_mapped_for_the_function(libcuda):
    offsets = function_offsets(libcuda, set(FUNCS))
    assert "cuMemCreate" in offsets and "cuMemImportFromShareableHandle" in offsets
    assert "cuGetProcAddress_not_there" not in offsets
    data = libcuda.read_bytes()
    lib = ctypes.CDLL(str(libcuda))
    for name, off in offsets.items():
        code = ctypes.string_at(ctypes.cast(getattr(lib, name), ctypes.c_void_p).value, 16)
        assert data[off : off + 16] == code, name


def test_not_an_elf_file_is_said(tmp_path):
    bad = tmp_path / "libcuda.so.1"
    bad.write_bytes(b"#!/bin/sh\n" * 10)
    with pytest.raises(ElfError):
        function_offsets(bad, {"cuMemCreate"})


def test_the_link_numbers_are_this_kernels():
    bpftool = shutil.which("bpftool")
    if bpftool is None or not Path("/sys/kernel/btf/vmlinux").exists():
        pytest.skip("no bpftool or no kernel BTF to check against")
    raw = subprocess.run(
        [bpftool, "btf", "dump", "file", "/sys/kernel/btf/vmlinux", "format", "raw"],
        capture_output=True,
        text=True,
    ).stdout
    if "'BPF_TRACE_UPROBE_MULTI'" not in raw:
        pytest.skip("a kernel without uprobe_multi links")
    for name, value in (
        ("BPF_TRACE_UPROBE_MULTI", loader.BPF_TRACE_UPROBE_MULTI),
        ("BPF_F_UPROBE_MULTI_RETURN", loader.BPF_F_UPROBE_MULTI_RETURN),
        ("BPF_LINK_CREATE", loader.BPF_LINK_CREATE),
    ):
        assert f"'{name}' val={value}" in raw, name


def test_uprobe_multi_is_used_from_linux_6_6():
    assert not loader.uprobe_multi_here("6.5.0-generic")
    assert not loader.uprobe_multi_here("5.15.0")
    assert loader.uprobe_multi_here("6.6.1") == (loader.os.uname().machine in loader.SYS_BPF)
    assert not loader.uprobe_multi_here("garbage")
