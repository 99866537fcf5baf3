"""bench.py end to end on a tiny shape: the --compare table is self-consistent and holds the
rows the speed comparison needs, and a torch.compile that cannot build is one clear line."""

import re

import pytest
import torch
from torch._inductor.exc import InductorError, InvalidCxxCompiler

from conftest import ENV, assert_one_line_error, run, run_in_process, tiny_train_args

TINY = ['--n_layer=1', '--n_head=2', '--n_embd=32', '--block_size=16', '--batch_size=4', '--vocab_size=50',
        '--bench_warmup=1', '--device=cpu']
ROW = re.compile(r'^(?P<name>.+?)\s+(?P<params>[\d,]+)\s+(?P<median>[\d.]+)\s+(?P<min>[\d.]+)\s+(?P<max>[\d.]+)\s+'
                 r'(?P<tokens>[\d,]+)\s+[\d.]+\s+[\d.]+\s+(?P<mfu>[\d.]+(?:e-\d+)?%|n/a)\s+-?\d+\s+(?P<ratio>[\d.]+)$')
# The settings that make torch treat any AVX-512 machine as an AVX2-only one (bf16 only emulated).
AVX2_ONLY = dict(ENV, ONEDNN_MAX_CPU_ISA='AVX2', ATEN_CPU_CAPABILITY='avx2')


def number(text):
    return float(text.replace(',', ''))


@pytest.mark.parametrize('env', [ENV, AVX2_ONLY], ids=['this-cpu', 'avx2-only'])
def test_compare_table_is_consistent_and_has_the_reference_row(env):
    # This CPU's table through bench.py's run_cli in this process (bench.py runs as a process in the tests of
    # one-line errors below); the AVX2 cap must be in place before torch loads, so that one is a process.
    args = (*TINY, '--compare', '--compare_compile=false', '--compare_modes=tied,proj', '--bench_iters=6', '--rounds=3')
    result = run_in_process('bench.py', *args) if env is ENV else run('bench.py', *args, env=env)
    assert result.returncode == 0, result.stderr
    rows = {m['name']: m for m in map(ROW.match, result.stdout.splitlines()) if m}
    names = list(rows)
    assert names[0].startswith('tied ') and names[0].endswith(' eager (train.py)')
    assert 'reference: float32 eager loop-AdamW' in names and 'proj' in names
    assert not any('compile' in name for name in names)
    # bf16 rows exactly where bf16 is native; where it is emulated, one note says why they are missing
    emulated = 'only emulates bf16' in result.stderr
    assert emulated or env is ENV
    if emulated:
        assert names[0] == 'tied float32 eager (train.py)' and not any('bfloat16' in name for name in names)
        assert 'peak bfloat16' not in result.stdout
    else:
        assert {'tied float32 eager', 'tied bfloat16 eager'} - {names[0].removesuffix(' (train.py)')} <= set(names)
    assert all(row['mfu'] == 'n/a' or 0 < float(row['mfu'][:-1]) <= 100 for row in rows.values())
    peaks = [float(p) for p in re.findall(r'^peak \w+: ([\d.e+-]+) TFLOP/s', result.stdout, re.M)]
    assert peaks and all(p > 0 for p in peaks)
    tokens_per_iter = 4 * 16
    first = rows[names[0]]
    assert number(first['ratio']) == 1.0
    for row in rows.values():
        median = number(row['median'])
        assert number(row['min']) <= median <= number(row['max'])
        assert number(row['tokens']) == pytest.approx(tokens_per_iter / (median / 1000), rel=0.01)
        assert number(row['ratio']) == pytest.approx(number(row['tokens']) / number(first['tokens']), abs=0.002)
    assert number(rows['proj']['params']) - number(first['params']) == 32 * 32  # proj's d x d matrix
    probed = [name for name in names if name.startswith('tied + probes ')]  # train.py's logged step
    assert len(probed) == 1 and number(rows[probed[0]]['params']) == number(first['params'])
    # --pad_vocab's other setting (padded here, as on a CPU train.py is not): a wider matmul, no parameter more
    padded = [name for name in names if name.startswith('tied + padded vocab ')]
    assert len(padded) == 1 and number(rows[padded[0]]['params']) == number(first['params'])
    # the closing line is the reference row's ratio turned round
    speedup = float(re.search(r"train.py's step is ([\d.]+)x the reference step", result.stdout).group(1))
    assert speedup == pytest.approx(1 / number(rows['reference: float32 eager loop-AdamW']['ratio']), rel=0.02)


def test_bad_input_is_one_line():
    line = assert_one_line_error(run_in_process('bench.py', *TINY, '--rounds=0'))
    assert line == 'error: --rounds must be a positive integer, got 0'


@pytest.mark.slow
def test_a_compile_that_cannot_build_is_one_line_in_bench_and_train(tmp_path, tiny_data, monkeypatch):
    # train.py as a user meets it: no C++ compiler, so inductor cannot build its CPU kernels (a process of its
    # own, 13 s on a Zen 3: tracing and lowering come first).
    env = dict(ENV, CXX=str(tmp_path / 'no-such-compiler'), TORCHINDUCTOR_CACHE_DIR=str(tmp_path / 'cache'))
    line = assert_one_line_error(run('train.py', *tiny_train_args(tiny_data, str(tmp_path / 'out'), compile='true',
                                                                   max_iters=2), env=env))
    assert line.startswith('error: torch.compile failed here (InductorError: InvalidCxxCompiler: No working C++')
    assert line.endswith('; use --compile=false')
    # bench.py's own catch, in this process: the compiled model's first call raises what inductor raised there.
    def compiled_without_a_compiler(model):
        def first_call(*args, **kwargs):
            raise InductorError(InvalidCxxCompiler(), None)
        return first_call
    monkeypatch.setattr(torch, 'compile', compiled_without_a_compiler)
    line = assert_one_line_error(run_in_process('bench.py', *TINY, '--compile=true', '--bench_iters=2'))
    assert line.startswith('error: torch.compile failed here (InductorError: InvalidCxxCompiler: No working C++')
    assert line.endswith('; use --compile=false')
