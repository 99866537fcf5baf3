"""DDP on the CPU: two gloo ranks under torchrun must end with identical weights, whatever the run changes
between them (a tied matrix under Muon, an untie midway, pit's orthonormal U)."""

import csv
import math
import re
import shutil
import signal

import pytest
import torch

import train
from conftest import tiny_train_args, train_with_ddp

# Muon in the tied run (each rank takes the same Newton-Schulz step on the all-reduced gradients); AdamW in the
# untie and pit runs.
RUNS = dict(
    # lr_decay_iters=8 is max_iters' schedule, written out so that the resume test's 4 + 4 steps follow it too
    tied_muon=dict(max_iters=8, eval_interval=4, gradient_accumulation_steps=2, optimizer='muon', lr_decay_iters=8,
                   seed=1338, log_interval=1),
    untie=dict(max_iters=8, eval_interval=4, untie_at=0.5, gradient_accumulation_steps=2),
    pit=dict(max_iters=6, eval_interval=3, tie_mode='pit', gradient_accumulation_steps=2, input_grad_scale=2.0),
)


@pytest.fixture
def ddp(tiny_data, tmp_path, warm):
    """ddp(name) -> (out_dir, rank 0's state_dict, rank 1's) of RUNS[name] trained by a torchrun of its own"""
    def train_run(name):
        out_dir = tmp_path / name
        return (out_dir, *train_with_ddp(warm, tmp_path, tiny_train_args(tiny_data, str(out_dir), **RUNS[name])))
    return train_run


@pytest.fixture(scope='module')
def tied_muon(tiny_data, tmp_path_factory, warm):
    """RUNS['tied_muon'] by a torchrun of its own, with each rank's record (conftest.train_with_ddp): (out_dir, the
    ranks' state_dicts, their records). Shared by the two tests below, which an xdist_group keeps in one worker: the
    resume test's uninterrupted run is this one."""
    folder = tmp_path_factory.mktemp('tied_muon')
    states, records = train_with_ddp(warm, folder, tiny_train_args(tiny_data, str(folder / 'out'), **RUNS['tied_muon']),
                                     record=True)
    return folder / 'out', states, records


def assert_ranks_identical(rank0, rank1):
    for name in rank0:
        assert torch.equal(rank0[name], rank1[name]), name


@pytest.mark.slow
@pytest.mark.xdist_group('ddp_tied_muon')
def test_ddp_two_cpu_processes_end_identical_and_tied(tied_muon):
    out_dir, (rank0, rank1), _ = tied_muon
    assert_ranks_identical(rank0, rank1)
    assert rank0['lm_head.weight'].data_ptr() == rank0['token_embedding_table.weight'].data_ptr()
    ckpt = torch.load(out_dir / 'ckpt.pt', weights_only=True)  # written by rank 0 alone
    assert torch.equal(ckpt['model']['lm_head.weight'], rank0['lm_head.weight'])
    assert 'muon' in ckpt['optimizer']  # Muon's momentum saved beside AdamW's


@pytest.mark.slow
def test_untie_at_under_ddp_keeps_the_ranks_identical(ddp):
    out_dir, rank0, rank1 = ddp('untie')
    assert_ranks_identical(rank0, rank1)
    # untied at 4, then 4 steps apart: the head's gradient was all-reduced too, or the ranks would differ
    assert rank0['lm_head.weight'].data_ptr() != rank0['token_embedding_table.weight'].data_ptr()
    assert not torch.equal(rank0['lm_head.weight'], rank0['token_embedding_table.weight'])
    ckpt = torch.load(out_dir / 'ckpt.pt', weights_only=True)
    assert ckpt['head_untied'] and torch.equal(ckpt['model']['lm_head.weight'], rank0['lm_head.weight'])


@pytest.mark.slow
def test_pit_under_ddp_keeps_the_ranks_identical_and_u_orthonormal(ddp):
    out_dir, rank0, rank1 = ddp('pit')
    assert_ranks_identical(rank0, rank1)
    U = rank0['token_embedding_table.weight']
    gram = U.t() @ U if U.size(0) > U.size(1) else U @ U.t()
    assert torch.allclose(gram, torch.eye(gram.size(0)), atol=1e-4)
    with open(out_dir / 'metrics.csv', newline='') as f:
        rows = list(csv.DictReader(f))
    assert all(math.isfinite(float(r['grad_in'])) for r in rows[:-1])


@pytest.mark.slow
@pytest.mark.xdist_group('ddp_tied_muon')
@pytest.mark.parametrize('signum', [signal.SIGINT, signal.SIGKILL], ids=['ctrl_c', 'kill'])
def test_a_ddp_run_stopped_resumes_exactly_on_every_rank_with_the_printed_command(signum, tied_muon, tiny_data,
                                                                                   tmp_path, warm):
    """Two ranks, float32, Muon, seed 1338, accumulation 2: 8 steps in one go (the tied_muon run), against the same
    run stopped by a terminal's Ctrl-C (torchrun and both ranks signalled: every rank stops at one iteration, rank 0
    saves) or killed after its checkpoint of iteration 4, then resumed by `--init_from=resume --out_dir=X` alone.
    Every rank draws one stream and keeps its share (train.get_batch), so the checkpoint's generator is every
    rank's; the weights and each step's windows must be the uninterrupted run's."""
    from conftest import TINY_TRAIN
    _, ranks, records = tied_muon
    out_dir = tmp_path / 'out'
    (tmp_path / 'first').mkdir()
    when = (lambda rows: len(rows) >= 3) if signum == signal.SIGINT else (lambda rows: len(rows) >= 6)
    code, printed = train_with_ddp(warm, tmp_path / 'first', tiny_train_args(tiny_data, str(out_dir),
                                                                             **RUNS['tied_muon']), stop=(signum, when))
    assert code != 0, printed[-2000:]
    saved = torch.load(out_dir / 'ckpt.pt', weights_only=True)
    assert saved['world_size'] == 2 and 0 < saved['iter_num'] < 8
    if signum == signal.SIGINT:  # every rank stopped where rank 0 saved, and the line says how to go on
        assert re.search(rf"continue with --init_from=resume --out_dir={re.escape(str(out_dir))}\b", printed), printed
    if signum == signal.SIGKILL:  # the same checkpoint on one process: the same windows, said in a line
        shutil.copytree(out_dir, tmp_path / 'one')
        one = train.train(train.parse_train_args(['--init_from=resume', f'--out_dir={tmp_path / "one"}']))
        assert one['data_fingerprint'] == torch.load(tied_muon[0] / 'ckpt.pt', weights_only=True)['data_fingerprint']
        for name, tensor in one['model'].state_dict().items():  # the sums' order differs: not bit for bit
            assert torch.allclose(tensor, ranks[0][name], rtol=0, atol=1e-4), name
    again, again_records = train_with_ddp(warm, tmp_path, ['--init_from=resume', f'--out_dir={out_dir}'], record=True)
    for rank in (0, 1):
        for name in ranks[rank]:
            assert torch.allclose(again[rank][name], ranks[rank][name], rtol=0, atol=1e-6), (rank, name)
        assert again_records[rank]['starts'] == records[rank]['starts'][saved['iter_num']:], rank
    assert records[0]['starts'] == records[1]['starts']  # one stream, each rank its share of every draw
    tokens_per_iter = 2 * TINY_TRAIN['batch_size'] * TINY_TRAIN['block_size']
    assert [record['tokens'] for record in records] == [8 * tokens_per_iter // 2] * 2
