"""A small reader of the BTF an ELF object carries (its ``.BTF`` section): enough to list a
struct's members with their offsets and sizes, for checking the Python decoder's layouts against
what clang compiled (no bpftool, no dependency). The format: linux/btf.h, Documentation/bpf/btf.rst.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

INT, PTR, ARRAY, STRUCT, UNION, ENUM, FWD, TYPEDEF, VOLATILE, CONST, RESTRICT = range(1, 12)
FUNC, FUNC_PROTO, VAR, DATASEC, FLOAT, DECL_TAG, TYPE_TAG, ENUM64 = range(12, 20)
#: the kinds that only qualify or name another type
_ALIASES = (TYPEDEF, VOLATILE, CONST, RESTRICT, TYPE_TAG)


@dataclass(frozen=True)
class Type:
    kind: int
    name: str
    size_or_type: int
    #: struct/union members: (name, type id, bit offset); array: (elem type, nelems)
    members: tuple = ()


@dataclass(frozen=True)
class Field:
    """One leaf of a struct, arrays kept whole: ``size`` is the array's, ``elem`` an element's."""

    name: str
    offset: int
    size: int
    elem: int
    count: int  # 1 for a scalar


def section(elf: bytes, wanted: str) -> bytes:
    if elf[:4] != b"\x7fELF" or elf[4] != 2:
        raise ValueError("not a 64-bit ELF object")
    shoff = struct.unpack_from("<Q", elf, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, 0x3A)

    def header(i: int) -> tuple[int, int, int]:
        base = shoff + i * shentsize
        name = struct.unpack_from("<I", elf, base)[0]
        off, size = struct.unpack_from("<QQ", elf, base + 24)
        return name, off, size

    _, stroff, _ = header(shstrndx)
    for i in range(shnum):
        name, off, size = header(i)
        end = elf.index(b"\0", stroff + name)
        if elf[stroff + name : end].decode() == wanted:
            return elf[off : off + size]
    raise KeyError(f"no {wanted} section")


class Btf:
    def __init__(self, data: bytes) -> None:
        magic, _version, _flags, hdr_len = struct.unpack_from("<HBBI", data)
        if magic != 0xEB9F:
            raise ValueError("not BTF")
        type_off, type_len, str_off, _str_len = struct.unpack_from("<IIII", data, 8)
        self.strings = data[hdr_len + str_off :]
        self.types: list[Type | None] = [None]  # id 0 is void
        pos, end = hdr_len + type_off, hdr_len + type_off + type_len
        while pos < end:
            name_off, info, st = struct.unpack_from("<III", data, pos)
            pos += 12
            kind, vlen, kflag = (info >> 24) & 0x1F, info & 0xFFFF, info >> 31
            members: tuple = ()
            if kind == INT or kind in (VAR, DECL_TAG):
                pos += 4
            elif kind == ARRAY:
                elem, _index, n = struct.unpack_from("<III", data, pos)
                members = (elem, n)
                pos += 12
            elif kind in (STRUCT, UNION):
                ms = []
                for _ in range(vlen):
                    mname, mtype, moff = struct.unpack_from("<III", data, pos)
                    ms.append((self._str(mname), mtype, moff & 0xFFFFFF if kflag else moff))
                    pos += 12
                members = tuple(ms)
            elif kind in (ENUM, FUNC_PROTO):
                pos += 8 * vlen
            elif kind in (DATASEC, ENUM64):
                pos += 12 * vlen
            self.types.append(Type(kind, self._str(name_off), st, members))

    @classmethod
    def of_object(cls, path: Path) -> Btf:
        return cls(section(path.read_bytes(), ".BTF"))

    def _str(self, off: int) -> str:
        return self.strings[off : self.strings.index(b"\0", off)].decode()

    def resolve(self, tid: int) -> Type:
        t = self.types[tid]
        while t is not None and t.kind in _ALIASES:
            t = self.types[t.size_or_type]
        if t is None:
            raise ValueError("void has no layout")
        return t

    def size(self, tid: int) -> int:
        t = self.resolve(tid)
        if t.kind == ARRAY:
            elem, n = t.members
            return self.size(elem) * n
        if t.kind == PTR:
            return 8
        return t.size_or_type

    def struct(self, name: str) -> Type:
        for t in self.types:
            if t is not None and t.kind == STRUCT and t.name == name:
                return t
        raise KeyError(f"no struct {name} in the BTF")

    def fields(self, name: str) -> list[Field]:
        """The struct's members, nested structs flattened (``h.ktime``), in order."""
        out: list[Field] = []
        self._flatten(self.struct(name), "", 0, out)
        return out

    def _flatten(self, t: Type, prefix: str, base: int, out: list[Field]) -> None:
        for mname, mtype, bits in t.members:
            off = base + bits // 8
            m = self.resolve(mtype)
            if m.kind == STRUCT:
                self._flatten(m, f"{prefix}{mname}.", off, out)
            elif m.kind == ARRAY:
                elem, n = m.members
                out.append(Field(prefix + mname, off, self.size(mtype), self.size(elem), n))
            else:
                size = self.size(mtype)
                out.append(Field(prefix + mname, off, size, size, 1))
