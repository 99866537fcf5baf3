"""The CUDA branches of a run, on the device this machine has: CUDA where it is there (autocast in bfloat16, a
compiled model, the CUDA RNG state in the checkpoint, the GPU's own peak memory and MFU in bench.py), the CPU
elsewhere, where the same test checks the same run. Marked cuda_branch (conftest's docstring lists the others):
`python -m pytest -m cuda_branch tests/` runs them alone."""

import csv
import math
import re

import pytest
import torch

import sample
import train
from conftest import run_in_process, tiny_train_args
from lib.throughput import GPU_PEAK_FLOPS

pytestmark = pytest.mark.cuda_branch

CUDA = torch.cuda.is_available()


# On CUDA the GPU's atomic adds (the embedding's backward) may reorder a sum, so the runs are not compared bit for
# bit; measured on an H100 (torch 2.11, bfloat16, compiled), the resumed and the unbroken run logged the same losses
# twice (every difference 0.0), while a resume that left the CUDA generator unrestored moved the logged losses by up
# to 0.0013 and the validation loss by 0.0006: below the 4 decimals of metrics.csv is the tolerance that tells them apart.
CUDA_RESUME_TOLERANCE = 1e-4


def step_losses(out_dir):
    with open(f'{out_dir}/metrics.csv', newline='') as f:
        return {int(row['iter']): float(row['step_loss']) for row in csv.DictReader(f) if row['step_loss']}


def test_a_run_on_the_device_trains_resumes_as_if_unbroken_and_samples(tiny_data, tmp_path, capsys):
    # Everything left to 'auto', as a user leaves it: on CUDA that is bfloat16 (or float16) autocast and
    # torch.compile; on a CPU, eager and the CPU's dtype. Dropout on, so that the steps after the resume depend on
    # the restored state of the generator that draws its masks: the CUDA generator on CUDA, the CPU's elsewhere.
    out_dir, straight_dir = str(tmp_path / 'run'), str(tmp_path / 'straight')
    # lr_decay_iters pins the schedule to 30 iterations for the first 15 too.
    auto = dict(device='auto', dtype='auto', compile='auto', max_iters=30, eval_interval=15, log_interval=5,
                dropout=0.1, lr_decay_iters=30)
    first = train.train(train.parse_train_args(tiny_train_args(tiny_data, out_dir, **dict(auto, max_iters=15))))
    header = capsys.readouterr().out
    assert f"device {'cuda' if CUDA else 'cpu'}, dtype " in header
    assert ("compile True" in header) == CUDA
    resumed = train.train(train.parse_train_args(tiny_train_args(tiny_data, out_dir, init_from='resume', **auto)))
    assert first['iters'] == 15 and resumed['iters'] == 30
    losses = step_losses(out_dir)
    assert list(losses) == list(range(0, 30, 5))  # none twice, none lost across the resume
    assert all(math.isfinite(loss) for loss in losses.values()) and losses[25] < losses[0]
    assert math.isfinite(resumed['val_loss']) and resumed['val_loss'] < math.log(53)  # below a uniform guess

    # The same 30 iterations unbroken: the resume restored the weights, the optimizer, the data order and the RNGs.
    straight = train.train(train.parse_train_args(tiny_train_args(tiny_data, straight_dir, **auto)))
    unbroken = step_losses(straight_dir)
    assert list(unbroken) == list(losses)
    if CUDA:
        apart = {i: abs(losses[i] - unbroken[i]) for i in losses}
        assert max(apart.values()) < CUDA_RESUME_TOLERANCE, apart
        assert abs(resumed['val_loss'] - straight['val_loss']) < CUDA_RESUME_TOLERANCE
    else:  # one process, one device: the same arithmetic
        assert losses == unbroken and resumed['val_loss'] == straight['val_loss']
        for name, value in straight['model'].state_dict().items():
            assert torch.equal(resumed['model'].state_dict()[name], value), name

    texts = sample.generate_samples(dict(sample.DEFAULTS, out_dir=out_dir, start='All:', num_samples=2,
                                         max_new_tokens=20))
    assert len(texts) == 2 and all(text.startswith('All:') and len(text) == 24 for text in texts)


def test_bench_times_a_step_on_the_device():
    # One eager row: the CUDA branch synchronises, reads the allocator's peak and the GPU's datasheet peak
    # for MFU; the compiled step is the run's test above.
    result = run_in_process('bench.py', '--device=auto', '--compile=false', '--n_layer=1', '--n_head=2', '--n_embd=32',
                            '--block_size=16', '--batch_size=4', '--vocab_size=50', '--bench_warmup=1',
                            '--bench_iters=2', '--rounds=1')
    assert result.returncode == 0, result.stderr
    # the first row is train.py's step: on CUDA its head's matmul is padded (--pad_vocab=auto), and its label says so
    row = re.search(r'^tied (?:\+ padded vocab )?(?P<dtype>\w+) eager\s+[\d,]+\s+(?P<ms>[\d.]+)\s.*\s(?P<mfu>[\d.]+%|n/a)\s+-?\d+\s+1\.000$',
                    result.stdout, re.M)
    assert row, result.stdout
    assert float(row['ms']) > 0
    if CUDA:  # a GPU whose datasheet peak is known gets an MFU
        assert row['dtype'] in ('bfloat16', 'float16')
        assert (row['mfu'] != 'n/a') == any(name in torch.cuda.get_device_name(0) for name in GPU_PEAK_FLOPS)
