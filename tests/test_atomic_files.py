"""Atomic writes: a crash leaves the old complete file or the new one."""
import os

import pytest

from lib.atomic_files import atomic_path, atomic_torch_save, atomic_write_bytes


# -----------------------------------------------------------------------------
# atomic writes

def test_atomic_path_keeps_old_file_on_error(tmp_path):
    target = tmp_path / "train.bin"
    target.write_bytes(b"old complete content")
    with pytest.raises(RuntimeError):
        with atomic_path(target) as tmp:
            assert os.path.dirname(tmp) == str(tmp_path)
            with open(tmp, "wb") as f:
                f.write(b"new but half")
            raise RuntimeError("crash midway")
    assert target.read_bytes() == b"old complete content"
    assert os.listdir(tmp_path) == ["train.bin"]


def test_atomic_writes_replace_the_file(tmp_path):
    target = tmp_path / "meta.json"
    atomic_write_bytes(target, b"one")
    atomic_write_bytes(target, b"two")
    assert target.read_bytes() == b"two"
    with atomic_path(str(target)) as tmp:
        with open(tmp, "wb") as f:
            f.write(b"three")
        assert target.read_bytes() == b"two"  # nothing visible until the block ends
    assert target.read_bytes() == b"three"
    assert os.listdir(tmp_path) == ["meta.json"]


def test_atomic_torch_save(tmp_path):
    import torch
    target = tmp_path / "ckpt.pt"
    atomic_torch_save({"w": torch.arange(3)}, target)
    assert torch.equal(torch.load(target)["w"], torch.arange(3))
    assert os.listdir(tmp_path) == ["ckpt.pt"]


