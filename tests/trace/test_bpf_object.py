"""The shipped BPF object is the one its source builds: scripts/build-bpf.sh records the SHA-256 of
the sources and of the object in trace.bpf.o.sources; a source edited without a rebuild, or an
object replaced by hand, fails here (file times mean nothing in a fresh clone)."""

import hashlib
from pathlib import Path

import pytest

BPF = Path(__file__).resolve().parents[2] / "vmmtui" / "trace" / "bpf"


def recorded() -> dict[str, str]:
    lines = (BPF / "trace.bpf.o.sources").read_text().splitlines()
    return {name: digest for digest, name in (line.split() for line in lines)}


@pytest.mark.parametrize("name", ["trace.bpf.c", "kernel.h", "trace.h", "trace.bpf.o"])
def test_the_object_matches_its_sources(name):
    digest = hashlib.sha256((BPF / name).read_bytes()).hexdigest()
    assert recorded().get(name) == digest, (
        f"{name} changed since trace.bpf.o was built: run scripts/build-bpf.sh and commit "
        "trace.bpf.o and trace.bpf.o.sources"
    )


def test_every_source_is_recorded():
    assert set(recorded()) == {"trace.bpf.c", "kernel.h", "trace.h", "trace.bpf.o"}


def test_the_object_ships_with_the_package():
    text = (BPF.parents[2] / "pyproject.toml").read_text()
    for pattern in ("trace/bpf/*.o", "trace/bpf/*.sources"):
        assert pattern in text
