"""Which libcuda the uprobes go on: the one the traced program will load."""

from vmmtui.trace.cuda import find_libcuda


def test_the_environment_and_ld_library_path_come_first(tmp_path, monkeypatch):
    real = tmp_path / "libcuda.so.580.1"
    real.write_bytes(b"")
    (tmp_path / "libcuda.so.1").symlink_to(real.name)
    monkeypatch.delenv("VMMTUI_LIBCUDA", raising=False)
    monkeypatch.setenv("LD_LIBRARY_PATH", f"/nonexistent:{tmp_path}")
    assert find_libcuda() == str(real)  # the symlink resolved: a uprobe sits on the file's inode
    other = tmp_path / "other.so"
    other.write_bytes(b"")
    monkeypatch.setenv("VMMTUI_LIBCUDA", str(other))
    assert find_libcuda() == str(other)
