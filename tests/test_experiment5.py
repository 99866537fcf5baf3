"""What experiment 5 (docs/experiment5.md) needs from train.py and ablate.py: evaluation batches that do not depend on
the seed, best.pt kept beside ckpt.pt and scored on the whole validation split, the MODE_igsK rows of
--input_grad_scale, the early grad_out / grad_in ratio, and old runs summarised with what they lack."""

import csv
import json
import math
import os
import shutil
from contextlib import nullcontext

import pytest
import torch

import ablate
import train
from conftest import assert_one_line_error, run_in_process, tiny_train_args, without_matplotlib
from lab import ablation_grid, ablation_report, run_results
from lab.run_results import load_best
from lib import run_files
from lab.ablation_grid import EVAL_SEED_OFFSET, recorded_eval_seed
from train import estimate_loss
from lib.prepared_data import load_splits
from model import GPT, GPTConfig


# one torch thread (conftest.py); one xdist worker for the module, whose fixtures are then made once (pytest.ini)
pytestmark = [pytest.mark.usefixtures('one_torch_thread'), pytest.mark.xdist_group('experiment5')]


def run_ablation(data_dir, out_dir, *extra, figures=False, **overrides):
    """ablate.py in this process; figures=False: as without matplotlib (conftest.without_matplotlib)."""
    args = tiny_train_args(data_dir, out_dir, **dict(dict(max_iters=30, eval_interval=5, log_interval=1), **overrides))
    args += ['--jobs=1', *extra]
    with nullcontext() if figures else without_matplotlib():
        return ablate.ablate(ablate.parse_args(args), args)


def read_csv(path):
    with open(path, newline='') as f:
        return list(csv.DictReader(f))


def test_evaluation_batches_depend_on_eval_seed_and_not_on_seed(tiny_data):
    cfg = train.parse_train_args(tiny_train_args(tiny_data, 'unused', block_size=16))
    splits, meta = load_splits(cfg)
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=meta['vocab_size'], block_size=16, n_layer=1, n_head=2, n_embd=32))
    losses = {}
    for seed, eval_seed in ((1, 11337), (2, 11337), (1, 5)):
        losses[seed, eval_seed], _ = estimate_loss(model, splits, dict(cfg, seed=seed, eval_seed=eval_seed),
                                                   nullcontext(), 'cpu')
    assert losses[1, 11337] == losses[2, 11337]          # another seed, the same batches: the same numbers
    assert losses[1, 5]['val'] != losses[1, 11337]['val']  # another eval_seed: other batches
    # The default is the seed a default-seed run always used, so train.py's own curves did not move.
    assert train.DEFAULTS['eval_seed'] == train.DEFAULTS['seed'] + EVAL_SEED_OFFSET
    assert recorded_eval_seed({'seed': 1338}) == 1338 + EVAL_SEED_OFFSET  # a run from before the key
    assert recorded_eval_seed({'seed': 1338, 'eval_seed': 7}) == 7


def test_a_bad_eval_seed_is_one_line():
    assert_one_line_error(run_in_process('train.py', '--eval_seed=' + str(2 ** 63)), '--eval_seed must be an integer')


def test_best_pt_holds_the_weights_of_the_lowest_validation_loss(tiny_data, tmp_path):
    # 40 ordinary iterations, then a resume with a learning rate far too high: the validation loss rises, so
    # the best point is not the last, on any CPU's arithmetic, and best.pt must survive the resume untouched.
    args = tiny_train_args(tiny_data, str(tmp_path), max_iters=40, eval_interval=5)
    train.train(train.parse_train_args(args))
    best_path = str(tmp_path / run_files.BEST_FILE)
    before = open(best_path, 'rb').read()
    cfg = train.parse_train_args(args + ['--init_from=resume', '--max_iters=60', '--learning_rate=0.3',
                                         '--decay_lr=false'])
    summary = train.train(cfg)
    evals = [r for r in read_csv(tmp_path / 'metrics.csv') if r['val_loss']]
    best_row = min(evals, key=lambda r: float(r['val_loss']))
    assert int(best_row['iter']) <= 40 and float(evals[-1]['val_loss']) > float(best_row['val_loss'])
    assert open(best_path, 'rb').read() == before
    model, saved = load_best(best_path)
    assert saved['iter_num'] == int(best_row['iter'])
    assert saved['val_loss'] == pytest.approx(summary['best_val_loss'])
    splits, _ = load_splits(cfg)
    losses, _ = estimate_loss(model, splits, cfg, nullcontext(), 'cpu')
    assert f"{losses['val']:.4f}" == best_row['val_loss']    # the very weights that scored it


def test_scaled_rows_parse_train_and_are_labelled():
    Row = ablation_grid.Row
    assert ablation_grid.parse_row('tied_igs2') == Row('tied', input_grad_scale=2.0)
    assert ablation_grid.parse_row('pit_igs0.5') == Row('pit', input_grad_scale=0.5)
    assert ablation_grid.parse_row('tied_untie') == Row('tied', unties=True)
    for bad in ('tied_igs0', 'tied_igs-1', 'tied_igsx', 'tied_igs', 'nope_igs2', 'tied_igsinf'):
        assert ablation_grid.parse_row(bad) is None, bad
    assert ablation_grid.row_label('tied_igs4', 2 / 3) == 'tied, input grad ×4'
    cfg = ablate.parse_args(['--modes=tied,tied_igs2', '--seeds=2', '--input_grad_scale=3'])
    scales = {(mode, seed): run_cfg['input_grad_scale'] for mode, seed, run_cfg in ablate.plan_runs(cfg)}
    assert scales == {('tied', 1337): 3.0, ('tied', 1338): 3.0, ('tied_igs2', 1337): 2.0, ('tied_igs2', 1338): 2.0}


def test_a_bad_scaled_row_is_one_line_naming_the_form():
    err = assert_one_line_error(run_in_process('ablate.py', '--modes=tied,tied_igs0'), "'tied_igs0'")
    assert 'MODE_igsK' in err


def test_the_early_gradient_ratio_sums_the_first_fifth():
    rows = [dict(iter=i, grad_in=1.0 + i, grad_out=2.0 * (1.0 + i) if i < 20 else 100.0) for i in range(100)]
    for r in rows:
        r.update(step_loss=1.0, train_loss=None, val_loss=None, copy_prob=None, repeat_rate=None, grad_norm=None,
                 tokens_per_sec=1.0)
    result = dict(summary=dict(params=1, val_loss=1.0, best_val_loss=1.0))
    cfg = dict(max_iters=100, n_layer=1, n_head=1, n_embd=4, block_size=4, dropout=0.0, bias=False, init_std=0.02,
               tie_mode='tied', emb_scale=False, zero_init_residual=False, shuffle_groups=4, gelu_approx='none',
               input_grad_scale=1.0, vocab_size=None)
    numbers = run_results.run_numbers(rows, result, 'tied', cfg, vocab_size=8)
    assert numbers['grad_ratio_early'] == pytest.approx(2.0)   # iterations 0-19 only: the 100s come later
    rows = [dict(r, grad_in=None, grad_out=None) for r in rows]  # a run from before the probe
    assert run_results.run_numbers(rows, result, 'tied', cfg, vocab_size=8)['grad_ratio_early'] is None


@pytest.fixture(scope='module')
def grid(tiny_data, tmp_path_factory):
    out_dir = str(tmp_path_factory.mktemp('exp5'))
    done = run_ablation(tiny_data, out_dir, '--modes=untied,tied,tied_igs4', '--seeds=2', figures=True)
    return out_dir, done


def test_the_grid_scores_best_pt_on_the_whole_split_and_compares_it(grid, tiny_data):
    out_dir, done = grid
    info = done['info']
    assert info['eval_seeds'] == [train.DEFAULTS['eval_seed']] and info['runs_without_best'] == 0
    for mode in ('untied', 'tied', 'tied_igs4'):
        for k, seed in enumerate((1337, 1338)):
            run_dir = os.path.join(out_dir, f'{mode}-seed{seed}')
            model, _ = load_best(os.path.join(run_dir, run_files.BEST_FILE))
            val, bucket, _ = run_results.BucketData(dict(dataset='tiny', data_dir=tiny_data, device='cpu')).get()
            sums, counts = run_results.loss_by_frequency(model, val, bucket, model.config.block_size, 'cpu')
            assert info['modes'][mode]['best_val_loss_all']['per_seed'][k] == pytest.approx(sum(sums) / sum(counts))
            assert json.load(open(os.path.join(run_dir, run_results.BEST_BUCKET_FILE)))['tokens'] == counts
    diff = info['versus_untied']['tied']['best_val_loss_all']
    tied, untied = (info['modes'][m]['best_val_loss_all']['per_seed'] for m in ('tied', 'untied'))
    assert diff[0] == pytest.approx(sum(tied) / 2 - sum(untied) / 2)
    table = open(os.path.join(out_dir, 'summary.md')).read()
    assert 'At the best point' in table and 'tied, input grad ×4' in table
    assert 'Every run was evaluated on the same fixed batches (eval_seed 11337)' in table


def test_a_best_point_that_is_the_final_checkpoint_is_scored_once(grid, tiny_data, tmp_path, monkeypatch):
    out_dir, _ = grid
    run_dir = str(tmp_path / 'run')
    shutil.copytree(os.path.join(out_dir, 'untied-seed1337'), run_dir)  # copy2: the cache keys' mtimes kept
    cfg = dict(dataset='tiny', data_dir=tiny_data, device='cpu')
    real = run_results.loss_by_frequency
    final = run_results.bucket_numbers(run_dir, run_results.BucketData(cfg), cfg)
    best_path = os.path.join(run_dir, run_files.BEST_FILE)
    best = torch.load(best_path, weights_only=True)
    best['model'] = torch.load(os.path.join(run_dir, 'ckpt.pt'), weights_only=True)['model']
    torch.save(best, best_path)  # the lowest validation loss at the last evaluation

    def scored(*args):
        raise AssertionError('best.pt was scored although its weights are the checkpoint\'s')
    monkeypatch.setattr(run_results, 'loss_by_frequency', scored)
    numbers = run_results.bucket_numbers(run_dir, run_results.BucketData(cfg), cfg, best=True)
    assert numbers == {'best_' + key: value for key, value in final.items()}
    monkeypatch.undo()

    best['model']['lm_head.weight'] = best['model']['lm_head.weight'] * 1.01  # one tensor apart: scored on its own
    torch.save(best, best_path)
    calls = []
    monkeypatch.setattr(run_results, 'loss_by_frequency', lambda *a: calls.append(1) or real(*a))
    numbers = run_results.bucket_numbers(run_dir, run_results.BucketData(cfg), cfg, best=True)
    assert calls == [1] and numbers['best_val_loss_all'] != pytest.approx(final['val_loss_all'], abs=1e-7)


def test_the_input_gradient_scale_turns_the_ratio_and_the_figure_shows_it(grid):
    out_dir, done = grid
    ratios = {mode: done['info']['modes'][mode]['grad_ratio_early']['per_seed'] for mode in ('tied', 'tied_igs4')}
    # The input part is 4 times larger under k = 4 on the first step, where the weights are the same; the
    # ratio over the early window falls with it (by less than 4: the runs drift apart after the first step).
    assert all(a > b for a, b in zip(ratios['tied'], ratios['tied_igs4']))
    first = {mode: read_csv(os.path.join(out_dir, f'{mode}-seed1337', 'metrics.csv'))[0] for mode in ('tied', 'tied_igs4')}
    assert float(first['tied_igs4']['grad_in']) == pytest.approx(4 * float(first['tied']['grad_in']), rel=1e-3)
    assert float(first['tied_igs4']['grad_out']) == pytest.approx(float(first['tied']['grad_out']), rel=1e-3)
    if done['figure'] is not None:
        with open(os.path.join(out_dir, 'grad_sources.png'), 'rb') as f:
            assert f.read(8) == b'\x89PNG\r\n\x1a\n'
    # Claim 12's table: the scaled row against tied, seed set against seed set.
    diff, low, high = done['info']['versus_tied']['tied_igs4']['grad_ratio_early']
    assert diff == pytest.approx(sum(ratios['tied_igs4']) / 2 - sum(ratios['tied']) / 2) and low <= diff <= high
    assert 'untied' not in done['info']['versus_tied']
    assert 'Difference from tied (mode minus tied' in open(os.path.join(out_dir, 'summary.md')).read()
    lines = ablation_report.gradient_source_lines(done['info'])
    assert any(line.startswith('- tied, input grad ×4: ') for line in lines)


def test_runs_from_before_eval_seed_and_best_pt_are_summarised_with_what_they_lack(tiny_data, tmp_path):
    out_dir = str(tmp_path)
    run_ablation(tiny_data, out_dir, '--modes=tied,untied', '--seeds=2')
    for mode in ('tied', 'untied'):
        for seed in (1337, 1338):  # as written before eval_seed and best.pt
            run_dir = tmp_path / f'{mode}-seed{seed}'
            result = json.load(open(run_dir / 'result.json'))
            del result['config']['eval_seed']
            (run_dir / 'result.json').write_text(json.dumps(result))
            os.remove(run_dir / run_files.BEST_FILE)
    done = run_ablation(tiny_data, out_dir, '--modes=tied,untied', '--seeds=2')
    assert not done['trained'] and len(done['skipped']) == 4
    info = done['info']
    assert info['eval_seeds'] == [1337 + EVAL_SEED_OFFSET, 1338 + EVAL_SEED_OFFSET] and info['runs_without_best'] == 4
    assert info['modes']['tied']['best_val_loss_all']['per_seed'] == [None, None]
    assert info['modes']['tied']['val_loss_all']['mean'] is not None  # the final checkpoint is still scored
    table = open(tmp_path / 'summary.md').read()
    assert 'batches of 2 different seeds' in table and '4 run(s) have no best.pt' in table
    # An interrupted run is another matter: continuing it on other batches would mix them within the run.
    shutil.copy(tmp_path / 'tied-seed1338' / 'ckpt.pt', tmp_path / 'ckpt.pt')
    cfg = ablate.parse_args(tiny_train_args(tiny_data, out_dir, max_iters=30, eval_interval=5, log_interval=1)
                            + ['--modes=tied', '--seeds=2'])
    (_, _, run_cfg) = ablate.plan_runs(cfg)[1]
    old = {k: v for k, v in ablation_grid.recorded_config(run_cfg).items() if k != 'eval_seed'}
    with pytest.raises(ablate.UserError, match=f'eval_seed={1338 + EVAL_SEED_OFFSET}.*eval_seed=11337'):
        ablate.check_same_config(ablation_grid.recorded_config(run_cfg), old, 'ckpt.pt', 'tied-seed1338')
    assert not math.isnan(info['modes']['tied']['final_val_loss']['mean'])
