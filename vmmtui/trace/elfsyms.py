"""Where a shared library's functions start in its file, for uprobes placed by offset.

A ``uprobe_multi`` link (Linux 6.6+) takes file offsets, not names: libbpf's own name lookup
(``bpf_program__attach_uprobe_opts(func_name=…)``) places one probe per call, and the system's
libbpf (1.1 on Debian 12) has no ``bpf_program__attach_uprobe_multi``. The offset is the one libbpf
computes: the symbol's address made relative to its section's, plus that section's place in the
file (``elf_sym_offset`` in libbpf's ``elf.c``). Only ELF64 little-endian (x86-64, aarch64): the
machines the trace runs on.
"""

from __future__ import annotations

import mmap
import os
import struct
from pathlib import Path

_EHDR = struct.Struct("<16sHHIQQQIHHHHHH")
_SHDR = struct.Struct("<IIQQQQIIQQ")
_SYM = struct.Struct("<IBBHQQ")
SHT_SYMTAB, SHT_DYNSYM = 2, 11
STT_FUNC = 2


class ElfError(ValueError):
    """The file is not an ELF64 little-endian object this reader understands."""


def function_offsets(path: str | Path, names: set[str]) -> dict[str, int]:
    """The file offset of each defined function of ``names`` in the ELF file at ``path`` (the
    dynamic symbols first, then the full table where it is kept); a name not found is absent."""
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size < _EHDR.size:
            raise ElfError(f"{path}: not a 64-bit little-endian ELF file")
        # mapped, not read: a driver's libcuda is tens of MB, of which the symbols are a little
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            return _offsets(path, data, names)


def _offsets(path: str | Path, data: mmap.mmap, names: set[str]) -> dict[str, int]:
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ElfError(f"{path}: not a 64-bit little-endian ELF file")
    fields = _EHDR.unpack_from(data)
    shoff, shentsize, shnum = fields[6], fields[11], fields[12]
    if shentsize != _SHDR.size or shoff + shnum * shentsize > len(data):
        raise ElfError(f"{path}: section headers out of the file")
    sections = [_SHDR.unpack_from(data, shoff + i * shentsize) for i in range(shnum)]
    found: dict[str, int] = {}
    for kind in (SHT_DYNSYM, SHT_SYMTAB):
        for sh in sections:
            if sh[1] != kind or sh[6] >= len(sections):
                continue
            strtab = sections[sh[6]]
            str_off, str_end = strtab[4], strtab[4] + strtab[5]
            for off in range(sh[4], min(sh[4] + sh[5], len(data)) - _SYM.size + 1, _SYM.size):
                name_at, info, _other, shndx, value, _size = _SYM.unpack_from(data, off)
                if info & 0xF != STT_FUNC or shndx == 0 or shndx >= len(sections):
                    continue
                start = str_off + name_at
                end = data.find(b"\0", start, str_end)
                name = data[start:end].decode(errors="replace") if end >= 0 else ""
                if name in names and name not in found:
                    home = sections[shndx]
                    found[name] = value - home[3] + home[4]
    return found
