"""ablate.py on the tiny corpus: every mode on the same batches, the outputs, skipping finished runs,
resuming an interrupted one exactly, refusing to mix settings, and its command-line errors."""

import csv
import json
import os
import subprocess
import sys

import pytest
import torch

import ablate
from conftest import REPO_ROOT, tiny_train_args
from model import TIE_MODES

PNG_MAGIC = b'\x89PNG\r\n\x1a\n'


@pytest.fixture(scope='module', autouse=True)
def one_thread():
    # Tiny models gain nothing from a second thread, and on a shared 2-core machine torch's threads
    # wait on each other: these tests took 100 s with 2 threads and 17 s with 1.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def run_ablation(data_dir, out_dir, *extra, **overrides):
    args = tiny_train_args(data_dir, out_dir, **dict(dict(max_iters=20, eval_interval=10, log_interval=1), **overrides))
    args += list(extra)
    return ablate.ablate(ablate.parse_args(args), args)


def read_csv(path):
    with open(path, newline='') as f:
        return list(csv.DictReader(f))


def run_files(out_dir):
    """{path: mtime} of every file inside the runs' folders."""
    return {os.path.join(d, name): os.stat(os.path.join(d, name)).st_mtime_ns
            for d, _, names in os.walk(out_dir) if d != out_dir for name in names}


@pytest.fixture(scope='module')
def every_mode(tiny_data, tmp_path_factory):
    out_dir = str(tmp_path_factory.mktemp('ablation'))
    done = run_ablation(tiny_data, out_dir, '--seeds=2')
    return out_dir, done


def test_every_mode_and_seed_is_trained_and_summarised(every_mode):
    out_dir, done = every_mode
    assert done['trained'] == [(m, s) for m in TIE_MODES for s in (1337, 1338)]
    rows = read_csv(os.path.join(out_dir, 'ablation.csv'))
    assert list(rows[0]) == list(ablate.CSV_FIELDS)
    assert {r['mode'] for r in rows} == set(TIE_MODES)
    for mode in TIE_MODES:
        for seed in ('1337', '1338'):
            assert [int(r['iter']) for r in rows if r['mode'] == mode and r['seed'] == seed] == list(range(21))
    summary = json.load(open(os.path.join(out_dir, 'summary.json')))
    assert list(summary['modes']) == list(TIE_MODES)
    assert summary['seeds'] == [1337, 1338]
    for mode, cells in summary['modes'].items():
        assert len(cells['init_step_loss']['per_seed']) == 2 and cells['init_step_loss']['std'] is not None
        assert cells['final_val_loss']['mean'] < cells['init_val_loss']['mean'], mode
    assert summary['modes']['untied']['params']['mean'] > summary['modes']['tied']['params']['mean']
    table = open(os.path.join(out_dir, 'summary.md')).read()
    for mode in TIE_MODES:
        assert f'| {mode} |' in table
    assert ' ± ' in table and 'Command: `python ablate.py ' in table and 'torch' in table


def test_all_modes_saw_the_same_batches(every_mode):
    out_dir, _ = every_mode
    rows = read_csv(os.path.join(out_dir, 'ablation.csv'))
    for seed in ('1337', '1338'):
        sequences = {mode: [r['data_fingerprint'] for r in rows if r['mode'] == mode and r['seed'] == seed]
                     for mode in TIE_MODES}
        assert len(set(map(tuple, sequences.values()))) == 1, seed
        # The fingerprint moves with every batch (the row after the last iteration repeats the last one).
        assert len(set(sequences['tied'])) == 20
    first = [r['data_fingerprint'] for r in rows if r['mode'] == 'tied' and r['seed'] == '1337']
    second = [r['data_fingerprint'] for r in rows if r['mode'] == 'tied' and r['seed'] == '1338']
    assert first[1:] != second[1:]  # another seed, another data order


def test_the_figure_is_a_png(every_mode):
    pytest.importorskip('matplotlib')
    out_dir, _ = every_mode
    with open(os.path.join(out_dir, 'loss_curves.png'), 'rb') as f:
        data = f.read()
    assert data.startswith(PNG_MAGIC)
    assert 10_000 < len(data) < 200_000


def test_quick_preset_and_command_line_keys_win_over_it(tiny_data, tmp_path):
    args = ['--quick', '--dataset=tiny', f'--data_dir={tiny_data}', f'--out_dir={tmp_path}', '--device=cpu',
            '--progress=false', '--modes=tied,shuffle', '--max_iters=12']
    cfg = ablate.parse_args(args)
    assert cfg['max_iters'] == 12 and cfg['n_embd'] == ablate.QUICK['n_embd'] and cfg['out_dir'] == str(tmp_path)
    done = ablate.ablate(cfg, args)
    assert done['trained'] == [('tied', 1337), ('shuffle', 1337)]
    assert json.load(open(tmp_path / 'summary.json'))['config']['n_layer'] == ablate.QUICK['n_layer']


def test_rerun_skips_finished_runs_and_a_new_mode_trains_alone(tiny_data, tmp_path, monkeypatch, capsys):
    out_dir = str(tmp_path)
    run_ablation(tiny_data, out_dir, '--modes=tied,untied')
    before = run_files(out_dir)
    # Without matplotlib the tables are still written, with a hint; nothing is trained again.
    monkeypatch.setitem(sys.modules, 'matplotlib', None)
    done = run_ablation(tiny_data, out_dir, '--modes=tied,untied')
    assert done['skipped'] == [('tied', 1337), ('untied', 1337)] and not done['trained'] and not done['resumed']
    assert run_files(out_dir) == before
    out = capsys.readouterr().out
    assert 'skipped' in out and 'pip install matplotlib' in out
    monkeypatch.undo()

    done = run_ablation(tiny_data, out_dir, '--modes=tied,untied,shuffle')
    assert done['trained'] == [('shuffle', 1337)] and done['skipped'] == [('tied', 1337), ('untied', 1337)]
    assert {k: v for k, v in run_files(out_dir).items() if k in before} == before
    assert {r['mode'] for r in read_csv(os.path.join(out_dir, 'ablation.csv'))} == {'tied', 'untied', 'shuffle'}
    assert list(json.load(open(os.path.join(out_dir, 'summary.json')))['modes']) == ['tied', 'untied', 'shuffle']


class StopAfter:
    """A progress bar that stands in for Ctrl-C: it stops the ablation after n iterations."""

    def __init__(self, n):
        self.n = n

    def update(self, k=1):
        self.n -= k
        if self.n < 0:
            raise KeyboardInterrupt

    def set_description(self, *args, **kwargs):
        pass

    def set_postfix(self, *args, **kwargs):
        pass


def test_an_interrupted_run_resumes_from_its_checkpoint_exactly(tiny_data, tmp_path):
    budget = dict(max_iters=12, eval_interval=6)
    straight = run_ablation(tiny_data, str(tmp_path / 'straight'), '--modes=shuffle', **budget)
    args = tiny_train_args(tiny_data, str(tmp_path / 'stopped'), log_interval=1, **budget) + ['--modes=shuffle']
    cfg = ablate.parse_args(args)
    # Stopped during iteration 9: the last checkpoint is the one at iteration 6.
    with pytest.raises(KeyboardInterrupt):
        ablate.run_all(cfg, ablate.plan_runs(cfg), StopAfter(9))
    assert not os.path.exists(tmp_path / 'stopped' / 'shuffle-seed1337' / 'result.json')
    resumed = ablate.ablate(cfg, args)
    assert resumed['resumed'] == [('shuffle', 1337)] and not resumed['trained']
    a = straight['info']['modes']['shuffle']
    b = resumed['info']['modes']['shuffle']
    assert b['final_val_loss'] == a['final_val_loss'] and b['train_loss_1'] == a['train_loss_1']
    rows_a = read_csv(tmp_path / 'straight' / 'ablation.csv')
    rows_b = read_csv(tmp_path / 'stopped' / 'ablation.csv')
    key = ('iter', 'step_loss', 'val_loss', 'data_fingerprint')
    assert [[r[k] for k in key] for r in rows_b] == [[r[k] for k in key] for r in rows_a]


def test_settings_that_differ_from_a_finished_run_are_refused(tiny_data, tmp_path):
    run_ablation(tiny_data, str(tmp_path), '--modes=tied')
    with pytest.raises(ablate.UserError, match='learning_rate=0.003.*learning_rate=0.001'):
        run_ablation(tiny_data, str(tmp_path), '--modes=tied', learning_rate=1e-3)


def test_a_bad_mode_gives_one_line_listing_the_modes_and_exit_2():
    result = subprocess.run([sys.executable, 'ablate.py', '--modes=tied,tide'], cwd=REPO_ROOT, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 2
    assert 'Traceback' not in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert result.stderr.startswith('error: ') and "'tide'" in result.stderr
    assert ', '.join(TIE_MODES) in result.stderr


@pytest.mark.parametrize('args, culprit', [
    (['--modes=,'], 'no modes'),
    (['--tie_mode=tied'], '--modes'),
    (['--init_from=resume'], 're-run the same command'),
    (['--seeds=0'], '--seeds'),
    (['--max_iters=0'], '--max_iters'),
])
def test_other_bad_options_are_user_errors(args, culprit):
    with pytest.raises(ablate.UserError, match=culprit):
        ablate.parse_args(args)
