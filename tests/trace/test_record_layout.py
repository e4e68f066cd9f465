"""The Python decoder reads the records as trace.h lays them out: every field of every record
struct, by name, offset and size, as the compiled object's BTF says clang laid it out (the object
must match its sources: test_bpf_object.py). A field added, removed or resized on one side only
fails here, not as garbage in a trace."""

import re
import struct
from pathlib import Path

import pytest

from vmmtui.trace import records

from .btf import Btf

BPF = Path(records.__file__).resolve().parent / "bpf"


@pytest.fixture(scope="module")
def btf() -> Btf:
    return Btf.of_object(BPF / "trace.bpf.o")


def python_fields(name: str, base: int = 0) -> list[tuple[str, int, int, int]]:
    """(name, offset, size, element size) of each field of ``records.LAYOUTS[name]``."""
    out, off = [], base
    for field, fmt in records.LAYOUTS[name]:
        m = re.fullmatch(r"(\d*)([a-zA-Z])", fmt)
        assert m, fmt
        count, code = int(m.group(1) or 1), m.group(2)
        elem = struct.calcsize("<" + code)
        out.append((field, off, elem * count, elem))
        off += elem * count
    return out


def btf_fields(btf: Btf, name: str) -> list[tuple[str, int, int, int]]:
    return [(f.name, f.offset, f.size, f.elem) for f in btf.fields(name)]


def test_the_head_of_every_record_is_struct_rec(btf):
    assert python_fields("rec") == btf_fields(btf, "rec")
    assert records.HEAD.size == btf.struct("rec").size_or_type == 64


@pytest.mark.parametrize(
    "name", ["rec_named", "rec_msg", "rec_fds", "rec_cuda", "rec_refusal", "rec_map"]
)
def test_each_record_tail_is_its_struct_after_the_head(btf, name):
    got = btf_fields(btf, name)
    head = [(f"h.{n}", o, s, e) for n, o, s, e in python_fields("rec")]
    assert got[: len(head)] == head, f"struct {name} must start with struct rec h"
    assert got[len(head) :] == python_fields(name, records.HEAD.size), (
        f"records.LAYOUTS[{name!r}] differs from struct {name} of trace.h"
    )
    assert btf.struct(name).size_or_type == records.HEAD.size + struct.calcsize(
        "<" + "".join(f for _, f in records.LAYOUTS[name])
    )


def test_a_side_of_a_refusal_is_struct_side(btf):
    assert btf_fields(btf, "side") == python_fields("side")


def test_every_record_struct_is_decoded():
    text = (BPF / "trace.h").read_text()
    structs = set(re.findall(r"^struct (\w+) \{", text, re.M))
    assert structs == set(records.LAYOUTS)


def test_the_kinds_are_the_headers():
    text = (BPF / "trace.h").read_text()
    kinds = {name: int(v) for name, v in re.findall(r"\bEV_(\w+) = (\d+)", text)}
    assert kinds == {
        name: getattr(records, name)
        for name in (
            "SEND", "RECV", "PIDFD_OPEN", "PIDFD_GETFD", "CLOSE", "CLOSE_RANGE", "DUP", "MEMFD",
            "FORK", "EXEC", "EXIT", "CUDA", "FDS", "QUEUED", "REFUSAL", "DROPPED", "MMAP",
            "MUNMAP", "TRUNC",
        )
    }  # fmt: skip
    assert int(re.search(r"#define MAXFDS (\d+)", text).group(1)) == records.MAXFDS


def test_a_field_added_on_one_side_only_is_caught(btf, monkeypatch):
    """The check itself can fail: a field the decoder does not know shifts what follows."""
    layout = dict(records.LAYOUTS)
    layout["rec_fds"] = (("extra", "Q"), *layout["rec_fds"])
    monkeypatch.setattr(records, "LAYOUTS", layout)
    assert btf_fields(btf, "rec_fds")[8:] != python_fields("rec_fds", records.HEAD.size)


def test_the_unrecorded_kinds_are_the_headers():
    """The loader names the kernel's counts of calls worth no record in trace.h's order."""
    from vmmtui.trace.loader import UNRECORDED

    text = (BPF / "trace.h").read_text()
    kinds = dict(re.findall(r"\bUNREC_(\w+) = (\d+)", text))
    assert int(kinds.pop("KINDS")) == len(UNRECORDED)
    assert [name for name, _ in sorted(kinds.items(), key=lambda kv: int(kv[1]))] == [
        "CLOSE", "DUP", "MMAP", "UNMAP", "MSG",
    ]  # fmt: skip
