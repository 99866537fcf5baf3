"""The machine a run is on: out-of-memory messages and memory bounds (lib/memory.py), device and dtype choice
(lib/device.py)."""
import os
import subprocess
import sys

import pytest

from lib import device, memory
from lib.command_line import UserError
from lib.device import cpu_has_native_bf16, pick_device, pick_dtype


# -----------------------------------------------------------------------------
# running out of memory

def refused_allocation():
    """The exception torch's CPU allocator really raises for a request no machine can grant (1 PiB):
    refused at once, nothing is allocated."""
    import torch
    try:
        torch.empty(2 ** 50, dtype=torch.uint8)
    except RuntimeError as e:
        return e
    pytest.fail("a 1 PiB tensor was allocated")


def test_out_of_memory_reason_recognises_every_allocator_and_nothing_else():
    import numpy as np
    import torch
    assert memory.out_of_memory_reason(refused_allocation()) == "could not allocate 1.0 PiB"
    with pytest.raises(MemoryError) as numpy_error:
        np.empty(2 ** 47)  # "Unable to allocate 1.00 PiB for an array with shape ..."
    assert memory.out_of_memory_reason(numpy_error.value).startswith("could not allocate 1")
    # The messages of the allocators that this machine lacks, as torch words them.
    cuda = torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total capacity of "
                                  "79.19 GiB of which 3.12 GiB is free.")
    assert memory.out_of_memory_reason(cuda) == "could not allocate 20.00 GiB"
    assert torch.cuda.OutOfMemoryError is torch.OutOfMemoryError
    mps = RuntimeError("MPS backend out of memory (MPS allocated: 1.20 GB, other allocations: 2.00 MB, max allowed: "
                       "18.13 GB). Tried to allocate 256.00 MiB on private pool.")
    assert memory.out_of_memory_reason(mps) == "could not allocate 256.00 MiB"
    windows = RuntimeError("DefaultCPUAllocator: not enough memory: you tried to allocate 5368709120 bytes.")
    assert memory.out_of_memory_reason(windows) == "could not allocate 5.0 GiB"
    assert memory.out_of_memory_reason(MemoryError()) == "an allocation failed"
    for other in (RuntimeError("size mismatch for lm_head.weight"), ValueError("out of memory"), KeyError("x"),
                  UserError("--batch_size must be a positive integer")):
        assert memory.out_of_memory_reason(other) is None


def test_out_of_memory_becomes_a_user_error_with_the_callers_advice():
    with pytest.raises(UserError) as info:
        with memory.out_of_memory_is_user_error(lambda: "--batch_size=12; use a smaller --batch_size"):
            raise refused_allocation()
    assert str(info.value) == "out of memory (could not allocate 1.0 PiB); --batch_size=12; use a smaller --batch_size"
    assert info.value.__cause__ is None and info.value.__suppress_context__
    with pytest.raises(ZeroDivisionError):  # anything else passes through untouched
        with memory.out_of_memory_is_user_error("never shown"):
            1 / 0


def test_memory_shortfall_and_format_bytes(monkeypatch):
    assert [memory.format_bytes(n) for n in (100, 1536, 25 * 2 ** 30, 3 * 2 ** 50, 5 * 2 ** 60)] == [
        "100 bytes", "1.5 KiB", "25.0 GiB", "3.0 PiB", "5120.0 PiB"]
    total = memory.device_memory("cpu")
    assert total and total > 2 ** 28  # a machine that runs these tests has more than 256 MiB
    assert memory.memory_shortfall(total, "cpu") is None
    assert memory.memory_shortfall(total + 1, "cpu") == (
        f"at least {memory.format_bytes(total + 1)}, more than the {memory.format_bytes(total)} of RAM and swap on cpu")
    assert memory.device_memory("mps") == total  # the host's memory, which MPS shares
    monkeypatch.setattr(memory, "device_memory", lambda device: 80 * 2 ** 30)
    assert memory.memory_shortfall(2 ** 40, "cuda:1") == "at least 1.0 TiB, more than the 80.0 GiB of memory on cuda:1"
    # Unknown memory, or more than one process can address: the address space is the limit.
    for total in (None, 2 ** 60):
        monkeypatch.setattr(memory, "device_memory", lambda device: total)
        assert memory.memory_shortfall(2 ** 47, "cpu") is None
        assert memory.memory_shortfall(2 ** 47 + 1, "cpu").endswith("more than the 128.0 TiB one process can address")
    assert memory.largest_that_fits(lambda v: 2 ** 40 * v, "cpu", 10 ** 6) == 128
    assert memory.largest_that_fits(lambda v: 2 ** 40 * v, "cpu", 100) == 100
    assert memory.largest_that_fits(lambda v: 2 ** 48 + v, "cpu", 100) == 0


# -----------------------------------------------------------------------------
# device and dtype

@pytest.mark.cuda_branch
def test_pick_device():
    import torch
    assert pick_device("auto") in ("cuda", "mps", "cpu")
    assert pick_device("cpu") == "cpu"
    with pytest.raises(UserError, match="not a device"):
        pick_device("gpu")
    if not torch.cuda.is_available():
        with pytest.raises(UserError, match="CUDA is not available"):
            pick_device("cuda")
        return
    assert pick_device("auto") == "cuda" and pick_device("cuda:0") == "cuda:0"
    count = torch.cuda.device_count()
    with pytest.raises(UserError, match=f"--device=cuda:{count} but only {count} CUDA device"):
        pick_device(f"cuda:{count}")


@pytest.mark.cuda_branch
def test_pick_dtype_on_cuda(monkeypatch):
    import torch
    if not torch.cuda.is_available():  # the rule itself, with the answer a GPU would give
        for supported in (True, False):
            monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: supported)
            assert pick_dtype("auto", "cuda") == ("bfloat16" if supported else "float16")
        with pytest.raises(UserError, match="this GPU does not support it; use --dtype=float16"):
            pick_dtype("bfloat16", "cuda")
        return
    assert pick_dtype("auto", "cuda") == ("bfloat16" if torch.cuda.is_bf16_supported() else "float16")
    assert pick_dtype("float32", "cuda") == "float32" and pick_dtype("float16", "cuda") == "float16"


def test_pick_dtype(monkeypatch):
    monkeypatch.setattr(device, "cpu_has_native_bf16", lambda: True)
    assert pick_dtype("auto", "cpu") == "bfloat16"
    assert pick_dtype("auto", "mps") == "float32"
    monkeypatch.setattr(device, "cpu_has_native_bf16", lambda: False)
    assert pick_dtype("auto", "cpu") == "float32"
    assert pick_dtype("float32", "cpu") == "float32"
    assert pick_dtype("bfloat16", "cpu") == "bfloat16"
    with pytest.raises(UserError, match="float16 is not supported on cpu"):
        pick_dtype("float16", "cpu")
    with pytest.raises(UserError, match="choose one of: auto, float32, bfloat16, float16"):
        pick_dtype("fp8", "cpu")




def test_native_bf16_follows_what_torch_reports(monkeypatch):
    import torch
    def cpu(onednn, avx512_bf16, amx):
        monkeypatch.setattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: onednn, raising=False)
        monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: avx512_bf16)
        monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: amx)
        return cpu_has_native_bf16()
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    assert cpu(True, True, False)        # Zen 4, Sapphire Rapids' avx512_bf16
    assert cpu(True, False, True)        # AMX
    assert not cpu(True, False, False)   # AVX-512 without bf16 (Skylake-X): oneDNN emulates it
    assert not cpu(False, False, False)  # AVX2 only (Zen 3, most laptops)
    assert not cpu(False, True, False)   # the flags are there but oneDNN is capped below them
    for cap, native in [("AVX2", False), ("avx512_core", False), ("AVX512_CORE_BF16", True), ("AVX512_CORE_AMX", True)]:
        monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", cap)
        assert cpu(True, True, False) == native, cap


def test_pick_dtype_on_a_cpu_that_emulates_bf16_warns_once_for_an_explicit_choice(monkeypatch, capsys):
    monkeypatch.setattr(device, "cpu_has_native_bf16", lambda: False)
    assert pick_dtype("bfloat16", "cpu") == "bfloat16"
    warning = capsys.readouterr().err.splitlines()
    assert len(warning) == 1 and warning[0].startswith("warning: --dtype=bfloat16") and "float32" in warning[0]
    assert pick_dtype("bfloat16", "cpu", warn=False) == "bfloat16"
    assert pick_dtype("auto", "cpu") == "float32"
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(device, "cpu_has_native_bf16", lambda: True)
    assert pick_dtype("bfloat16", "cpu") == "bfloat16"
    assert capsys.readouterr().err == ""


AVX2_ONLY = dict(ONEDNN_MAX_CPU_ISA="AVX2", ATEN_CPU_CAPABILITY="avx2")


def test_an_avx2_cap_makes_auto_pick_float32_in_a_fresh_process():
    # The settings that turn any AVX-512 machine into an AVX2-only one for torch (a bug once: --dtype=auto
    # used to read avx512_bf16 from /proc/cpuinfo and run emulated bf16 here).
    code = "from lib import device; print(device.cpu_has_native_bf16(), device.pick_dtype('auto', 'cpu'))"
    result = subprocess.run([sys.executable, "-c", code], cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                            env=dict(os.environ, **AVX2_ONLY), capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "float32"]
