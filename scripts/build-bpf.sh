#!/usr/bin/env bash
# Rebuild vmmtui/trace/bpf/trace.bpf.o (the CO-RE object `vmmtui trace` loads) from its source,
# and write trace.bpf.o.sources: the SHA-256 of each source and of the object, which
# tests/trace/test_bpf_object.py compares (mtimes mean nothing in a fresh clone).
# Needs clang (>= 11) and llvm-strip: apt-get install -y clang llvm libbpf-dev
set -euo pipefail
cd "$(dirname "$0")/../vmmtui/trace/bpf"
CLANG=${CLANG:-clang}
STRIP=${STRIP:-$(command -v llvm-strip || ls /usr/bin/llvm-strip-* 2>/dev/null | head -1)}
"$CLANG" -g -O2 -target bpf -D__TARGET_ARCH_x86 -I. -Wall -Wno-pass-failed \
    -c trace.bpf.c -o trace.bpf.o.tmp
# keep BTF (CO-RE needs it), drop DWARF: the object shrinks to a fraction
"$STRIP" -g trace.bpf.o.tmp
mv trace.bpf.o.tmp trace.bpf.o
{
    sha256sum trace.bpf.c kernel.h trace.h
    sha256sum trace.bpf.o
} > trace.bpf.o.sources
echo "built $(pwd)/trace.bpf.o ($(stat -c %s trace.bpf.o) bytes) with $("$CLANG" --version | head -1)"
