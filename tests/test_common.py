import os
import subprocess
import sys
import textwrap

import pytest

import common
from common import (UserError, atomic_path, atomic_torch_save, atomic_write_bytes, cpu_has_native_bf16, parse_config,
                    pick_device, pick_dtype, run_cli)

DEFAULTS = dict(
    learning_rate=6e-4,
    max_iters=5000,
    compile=True,
    out_dir="out",
    seed=None,
    tie_mode="tied",
)
CHOICES = dict(tie_mode=("untied", "tied", "small_init"))


def parse(*argv):
    return parse_config(DEFAULTS, list(argv), CHOICES)


def error_of(*argv):
    with pytest.raises(UserError) as info:
        parse(*argv)
    return str(info.value)


# -----------------------------------------------------------------------------
# command-line values

def test_defaults_are_returned_as_a_new_dict():
    config = parse("--max_iters=10")
    assert config["max_iters"] == 10
    assert DEFAULTS["max_iters"] == 5000
    assert parse() == DEFAULTS and parse() is not DEFAULTS


def test_float_key_accepts_int_and_exponent():
    assert parse("--learning_rate=3")["learning_rate"] == 3.0
    assert type(parse("--learning_rate=3")["learning_rate"]) is float
    assert parse("--learning_rate=6e-4")["learning_rate"] == 6e-4


@pytest.mark.parametrize("text, expected", [("true", True), ("False", False), ("1", True), ("0", False),
                                            ("YES", True), ("no", False)])
def test_bool_words(text, expected):
    assert parse(f"--compile={text}")["compile"] is expected


def test_bare_flag_means_true_for_bool_only():
    assert parse("--compile=false", "--compile")["compile"] is True
    assert "--max_iters needs a value" in error_of("--max_iters")


def test_int_forms():
    assert parse("--max_iters=1_000")["max_iters"] == 1000
    value = parse("--max_iters=1e3")["max_iters"]
    assert value == 1000 and type(value) is int


@pytest.mark.parametrize("argv, message", [
    ("--max_iters=1.5", "--max_iters expects an integer, got '1.5'"),
    ("--max_iters=None", "--max_iters expects an integer, got 'None'"),
    ("--learning_rate=fast", "--learning_rate expects a number, got 'fast'"),
    ("--compile=maybe", "--compile expects a boolean (true/false), got 'maybe'"),
])
def test_wrong_type_names_key_and_type(argv, message):
    assert error_of(argv) == message


def test_none_default_takes_literal_text_or_none():
    assert parse("--seed=1337")["seed"] == 1337
    assert parse("--seed=hello")["seed"] == "hello"
    assert parse("--seed='42'")["seed"] == "42"
    assert parse("--seed=1337", "--seed=None")["seed"] is None


def test_value_may_contain_equals_sign():
    assert parse("--out_dir=a=b=c")["out_dir"] == "a=b=c"
    assert parse("--out_dir=")["out_dir"] == ""


def test_unknown_key_is_named_with_suggestion_and_help_hint():
    message = error_of("--max_iter=10")
    assert "--max_iter" in message and "did you mean --max_iters?" in message and "--help" in message
    assert "did you mean" not in error_of("--zzzz=1")


def test_choices_list_allowed_values():
    assert parse("--tie_mode=untied")["tie_mode"] == "untied"
    assert error_of("--tie_mode=foo") == "--tie_mode='foo' is not allowed; choose one of: untied, tied, small_init"


@pytest.mark.parametrize("argv", [["-x"], ["-max_iters=3"], ["--"], ["--max_iters=3", "config.py"]])
def test_malformed_or_misplaced_arguments(argv):
    with pytest.raises(UserError):
        parse(*argv)


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_lists_keys_and_exits_zero(flag, capsys):
    with pytest.raises(SystemExit) as info:
        parse("--max_iters=oops", flag)
    assert info.value.code == 0
    out = capsys.readouterr().out
    for key in DEFAULTS:
        assert f"--{key}=" in out
    assert "--max_iters=5000" in out and "untied, tied, small_init" in out


# -----------------------------------------------------------------------------
# config files

def write(path, text):
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return str(path)


def test_config_file_then_overrides(tmp_path):
    config_file = write(tmp_path / "c.py", """
        import math
        from os import path as _p
        _scratch = 3
        learning_rate = 1           # an int for a float key
        max_iters = 2 * 1000
        seed = math.floor(7.5)
    """)
    config = parse(config_file, "--max_iters=7")
    assert config["learning_rate"] == 1.0 and type(config["learning_rate"]) is float
    assert config["max_iters"] == 7  # the command line wins over the file
    assert config["seed"] == 7


def test_config_file_misspelt_key(tmp_path):
    config_file = write(tmp_path / "x.py", "lerning_rate = 1e-3\n")
    message = error_of(config_file)
    assert message.startswith(f"unknown key 'lerning_rate' in {config_file}; did you mean 'learning_rate'?")


def test_config_file_wrong_type_and_choice(tmp_path):
    assert "max_iters in" in error_of(write(tmp_path / "a.py", "max_iters = 1.5\n"))
    assert "expects an integer" in error_of(write(tmp_path / "b.py", "max_iters = None\n"))
    assert "choose one of" in error_of(write(tmp_path / "c.py", "tie_mode = 'foo'\n"))


def test_config_file_problems_are_user_errors(tmp_path):
    assert "not found" in error_of(str(tmp_path / "missing.py"))
    assert "notes.txt" in error_of(str(tmp_path / "notes.txt"))
    message = error_of(write(tmp_path / "broken.py", "max_iters = (\n"))
    assert "broken.py line" in message
    message = error_of(write(tmp_path / "fails.py", "x = 1\nmax_iters = undefined_name\n"))
    assert "fails.py line 2" in message and "NameError" in message


# -----------------------------------------------------------------------------
# run_cli

SCRIPT = """
import sys
sys.path.insert(0, {root!r})
from common import UserError, run_cli

def main(argv):
    if argv == ["user"]:
        raise UserError("bad value\\nfor --x")
    if argv == ["interrupt"]:
        raise KeyboardInterrupt
    print("ok", argv)

if __name__ == "__main__":
    run_cli(main)
"""


@pytest.mark.parametrize("arg, code, stderr", [("user", 2, "error: bad value for --x\n"),
                                               ("interrupt", 130, "interrupted\n"),
                                               ("fine", 0, "")])
def test_run_cli_exit_codes_without_traceback(tmp_path, arg, code, stderr):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    script = tmp_path / "script.py"
    script.write_text(SCRIPT.format(root=root))
    result = subprocess.run([sys.executable, str(script), arg], capture_output=True, text=True, timeout=60)
    assert result.returncode == code
    assert result.stderr == stderr


def test_run_cli_lets_bugs_through(monkeypatch):
    def main(argv):
        raise ZeroDivisionError
    monkeypatch.setattr(sys, "argv", ["script.py"])
    with pytest.raises(ZeroDivisionError):
        run_cli(main)


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
    assert common.out_of_memory_reason(refused_allocation()) == "could not allocate 1.0 PiB"
    with pytest.raises(MemoryError) as numpy_error:
        np.empty(2 ** 47)  # "Unable to allocate 1.00 PiB for an array with shape ..."
    assert common.out_of_memory_reason(numpy_error.value).startswith("could not allocate 1")
    # The messages of the allocators that this machine lacks, as torch words them.
    cuda = torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total capacity of "
                                  "79.19 GiB of which 3.12 GiB is free.")
    assert common.out_of_memory_reason(cuda) == "could not allocate 20.00 GiB"
    assert torch.cuda.OutOfMemoryError is torch.OutOfMemoryError
    mps = RuntimeError("MPS backend out of memory (MPS allocated: 1.20 GB, other allocations: 2.00 MB, max allowed: "
                       "18.13 GB). Tried to allocate 256.00 MiB on private pool.")
    assert common.out_of_memory_reason(mps) == "could not allocate 256.00 MiB"
    windows = RuntimeError("DefaultCPUAllocator: not enough memory: you tried to allocate 5368709120 bytes.")
    assert common.out_of_memory_reason(windows) == "could not allocate 5.0 GiB"
    assert common.out_of_memory_reason(MemoryError()) == "an allocation failed"
    for other in (RuntimeError("size mismatch for lm_head.weight"), ValueError("out of memory"), KeyError("x"),
                  UserError("--batch_size must be a positive integer")):
        assert common.out_of_memory_reason(other) is None


def test_out_of_memory_becomes_a_user_error_with_the_callers_advice():
    with pytest.raises(UserError) as info:
        with common.out_of_memory_is_user_error(lambda: "--batch_size=12; use a smaller --batch_size"):
            raise refused_allocation()
    assert str(info.value) == "out of memory (could not allocate 1.0 PiB); --batch_size=12; use a smaller --batch_size"
    assert info.value.__cause__ is None and info.value.__suppress_context__
    with pytest.raises(ZeroDivisionError):  # anything else passes through untouched
        with common.out_of_memory_is_user_error("never shown"):
            1 / 0


def test_memory_shortfall_and_format_bytes(monkeypatch):
    assert [common.format_bytes(n) for n in (100, 1536, 25 * 2 ** 30, 3 * 2 ** 50, 5 * 2 ** 60)] == [
        "100 bytes", "1.5 KiB", "25.0 GiB", "3.0 PiB", "5120.0 PiB"]
    total = common.device_memory("cpu")
    assert total and total > 2 ** 28  # a machine that runs these tests has more than 256 MiB
    assert common.memory_shortfall(total, "cpu") is None
    assert common.memory_shortfall(total + 1, "cpu") == (
        f"at least {common.format_bytes(total + 1)}, more than the {common.format_bytes(total)} of RAM and swap on cpu")
    assert common.memory_shortfall(2 ** 70, "mps") is None  # unknown: never refuse
    monkeypatch.setattr(common, "device_memory", lambda device: 80 * 2 ** 30)
    assert common.memory_shortfall(2 ** 40, "cuda:1") == "at least 1.0 TiB, more than the 80.0 GiB of memory on cuda:1"


@pytest.mark.parametrize("seed, ok", [(0, True), (-1, True), (2 ** 63 - 1, True), (-2 ** 63, True), (2 ** 63, False),
                                      (2 ** 64, False), (-2 ** 63 - 1, False)])
def test_check_seed_allows_what_torch_takes_with_room_for_offsets(seed, ok):
    import torch
    if ok:
        common.check_seed(seed)
        torch.Generator().manual_seed(seed + 10_000)  # train.py's evaluation generator: still a seed torch takes
    else:
        with pytest.raises(UserError, match=r"--seed must be an integer from -2\*\*63 to 2\*\*63 - 1, got "):
            common.check_seed(seed)


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


# -----------------------------------------------------------------------------
# device and dtype

def test_pick_device():
    import torch
    assert pick_device("auto") in ("cuda", "mps", "cpu")
    assert pick_device("cpu") == "cpu"
    with pytest.raises(UserError, match="not a device"):
        pick_device("gpu")
    if not torch.cuda.is_available():
        with pytest.raises(UserError, match="CUDA is not available"):
            pick_device("cuda")


def test_pick_dtype(monkeypatch):
    monkeypatch.setattr(common, "cpu_has_native_bf16", lambda: True)
    assert pick_dtype("auto", "cpu") == "bfloat16"
    assert pick_dtype("auto", "mps") == "float32"
    monkeypatch.setattr(common, "cpu_has_native_bf16", lambda: False)
    assert pick_dtype("auto", "cpu") == "float32"
    assert pick_dtype("float32", "cpu") == "float32"
    assert pick_dtype("bfloat16", "cpu") == "bfloat16"
    with pytest.raises(UserError, match="float16 is not supported on cpu"):
        pick_dtype("float16", "cpu")
    with pytest.raises(UserError, match="choose one of: auto, float32, bfloat16, float16"):
        pick_dtype("fp8", "cpu")


def test_a_closed_pipe_ends_the_script_without_a_traceback(tmp_path):
    # `python init_loss.py --json | head -1`: the reader leaves early. The script writes far more
    # than a pipe buffer holds, so it must meet the closed pipe.
    script = tmp_path / "chatty.py"
    script.write_text(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {os.path.dirname(os.path.dirname(os.path.abspath(__file__)))!r})
        from common import run_cli
        def main(argv):
            for i in range(1_000_000):
                print("{{\\"row\\": %d}}" % i)
        run_cli(main)
    """))
    process = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = process.stdout.readline()
    process.stdout.close()
    stderr = process.communicate(timeout=120)[1].decode()
    assert first.startswith(b"{")
    assert process.returncode == 1
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr


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
    monkeypatch.setattr(common, "cpu_has_native_bf16", lambda: False)
    assert pick_dtype("bfloat16", "cpu") == "bfloat16"
    warning = capsys.readouterr().err.splitlines()
    assert len(warning) == 1 and warning[0].startswith("warning: --dtype=bfloat16") and "float32" in warning[0]
    assert pick_dtype("bfloat16", "cpu", warn=False) == "bfloat16"
    assert pick_dtype("auto", "cpu") == "float32"
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(common, "cpu_has_native_bf16", lambda: True)
    assert pick_dtype("bfloat16", "cpu") == "bfloat16"
    assert capsys.readouterr().err == ""


AVX2_ONLY = dict(ONEDNN_MAX_CPU_ISA="AVX2", ATEN_CPU_CAPABILITY="avx2")


def test_an_avx2_cap_makes_auto_pick_float32_in_a_fresh_process():
    # The settings that turn any AVX-512 machine into an AVX2-only one for torch (issue: --dtype=auto
    # used to read avx512_bf16 from /proc/cpuinfo and run emulated bf16 here).
    code = "import common; print(common.cpu_has_native_bf16(), common.pick_dtype('auto', 'cpu'))"
    result = subprocess.run([sys.executable, "-c", code], cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                            env=dict(os.environ, **AVX2_ONLY), capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "float32"]
