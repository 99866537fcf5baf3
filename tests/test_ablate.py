"""ablate.py on the tiny corpus: every mode on the same batches, the outputs, skipping finished runs,
resuming an interrupted one exactly, refusing to mix settings, and its command-line errors."""

import contextlib
import csv
import json
import math
import os
import platform
import statistics
import subprocess
import sys

import pytest
import torch

import ablate
from lab import ablation_figure, ablation_grid, ablation_report, run_results
import train
from conftest import REPO_ROOT, assert_one_line_error, run_in_process, tiny_train_args, without_matplotlib
from model import TIE_MODES

# The four metrics.csv columns of the copy probe, which runs made before it lack.
PROBE_FIELDS = ('copy_prob', 'repeat_rate', 'self_margin', 'grad_norm')
SEEDS = (1337, 1338)
UNTIE_ITER = round(2 / 3 * 20)  # the tied_untie row of run_ablation's 20 iterations

PNG_MAGIC = b'\x89PNG\r\n\x1a\n'


# one torch thread (conftest.py); one xdist worker for the module, whose fixtures are then made once (pytest.ini)
pytestmark = [pytest.mark.usefixtures('one_torch_thread'), pytest.mark.xdist_group('ablate')]


def ablation_args(data_dir, out_dir, *extra, **overrides):
    # --jobs=1: in this process, with one_torch_thread's single thread (test_ablate_jobs.py runs the workers)
    args = tiny_train_args(data_dir, out_dir, **dict(dict(max_iters=20, eval_interval=10, log_interval=1), **overrides))
    return args + ['--jobs=1'] + list(extra)


def run_ablation(data_dir, out_dir, *extra, figures=False, **overrides):
    """ablate.py in this process. figures=False: as without matplotlib (its figures' tests ask for them, and the
    tests that draw curves of missing or non-finite values); drawing the two figures cost more than training."""
    args = ablation_args(data_dir, out_dir, *extra, **overrides)
    with contextlib.nullcontext() if figures else without_matplotlib():
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
    done = run_ablation(tiny_data, out_dir, '--seeds=2', figures=True)
    return out_dir, done


def test_every_mode_and_seed_is_trained_and_summarised(every_mode):
    out_dir, done = every_mode
    assert ablation_grid.MODES == (*TIE_MODES, 'tied_untie')  # the untie row comes after the tie modes
    assert done['trained'] == [(m, s) for m in ablation_grid.MODES for s in (1337, 1338)]
    rows = read_csv(os.path.join(out_dir, 'ablation.csv'))
    assert list(rows[0]) == list(ablation_report.CSV_FIELDS)
    assert {r['mode'] for r in rows} == set(ablation_grid.MODES)
    for mode in ablation_grid.MODES:
        for seed in ('1337', '1338'):
            assert [int(r['iter']) for r in rows if r['mode'] == mode and r['seed'] == seed] == list(range(21))
    summary = json.load(open(os.path.join(out_dir, 'summary.json')))
    assert list(summary['modes']) == list(ablation_grid.MODES)
    assert summary['seeds'] == [1337, 1338]
    for mode, cells in summary['modes'].items():
        assert len(cells['init_step_loss']['per_seed']) == 2 and cells['init_step_loss']['std'] is not None
        assert cells['final_val_loss']['mean'] < cells['init_val_loss']['mean'], mode
    assert summary['modes']['untied']['params']['mean'] > summary['modes']['tied']['params']['mean']
    table = open(os.path.join(out_dir, 'summary.md')).read()
    for mode in TIE_MODES:
        assert f'| {mode} |' in table
    assert ' ± ' in table and 'Command: `python ablate.py ' in table and 'torch' in table
    # The untie row is named by what it does, in the table, the figure's legend and summary.json.
    assert '| tied, untied at 2/3 |' in table and '| tied_untie |' not in table
    assert summary['labels']['tied_untie'] == 'tied, untied at 2/3' and summary['labels']['tied'] == 'tied'
    assert summary['untie_iter'] == UNTIE_ITER and f'until iteration {UNTIE_ITER} = round(2/3 x 20)' in table


def test_all_modes_saw_the_same_batches(every_mode):
    out_dir, _ = every_mode
    rows = read_csv(os.path.join(out_dir, 'ablation.csv'))
    for seed in ('1337', '1338'):
        sequences = {mode: [r['data_fingerprint'] for r in rows if r['mode'] == mode and r['seed'] == seed]
                     for mode in ablation_grid.MODES}
        assert len(set(map(tuple, sequences.values()))) == 1, seed
        # The fingerprint moves with every batch (the row after the last iteration repeats the last one).
        assert len(set(sequences['tied'])) == 20
    first = [r['data_fingerprint'] for r in rows if r['mode'] == 'tied' and r['seed'] == '1337']
    second = [r['data_fingerprint'] for r in rows if r['mode'] == 'tied' and r['seed'] == '1338']
    assert first[1:] != second[1:]  # another seed, another data order


def test_the_figure_is_a_png(every_mode):
    out_dir, _ = every_mode
    with open(os.path.join(out_dir, 'loss_curves.png'), 'rb') as f:
        data = f.read()
    assert data.startswith(PNG_MAGIC)
    assert 10_000 < len(data) < 300_000  # 1500 x 430 pixels at 90 dpi, not a poster (the seed bands add ~10 %)


def checkpoint(out_dir, mode, seed):
    return torch.load(os.path.join(out_dir, f'{mode}-seed{seed}', 'ckpt.pt'), map_location='cpu', weights_only=True)


def test_the_untie_row_ends_untied_and_the_tied_row_tied(every_mode):
    out_dir, _ = every_mode
    for seed in SEEDS:
        untied_late, tied = checkpoint(out_dir, 'tied_untie', seed), checkpoint(out_dir, 'tied', seed)
        assert untied_late['head_untied'] is True and tied['head_untied'] is False
        emb, head = untied_late['model']['token_embedding_table.weight'], untied_late['model']['lm_head.weight']
        assert emb.data_ptr() != head.data_ptr() and not torch.equal(emb, head)
        emb, head = tied['model']['token_embedding_table.weight'], tied['model']['lm_head.weight']
        assert emb.data_ptr() == head.data_ptr()  # one tensor, saved once
        # The same run as tied, batch for batch, up to the untie (which leaves the logits as they were,
        # so the step at the untie iteration still agrees); apart after it.
        steps = {mode: {int(r['iter']): r['step_loss']
                        for r in read_csv(os.path.join(out_dir, f'{mode}-seed{seed}', 'metrics.csv'))}
                 for mode in ('tied', 'tied_untie')}
        upto = range(UNTIE_ITER + 1)
        assert [steps['tied_untie'][i] for i in upto] == [steps['tied'][i] for i in upto]
        assert any(steps['tied_untie'][i] != steps['tied'][i] for i in range(UNTIE_ITER + 1, 20))


def test_only_the_untie_row_is_given_untie_at(every_mode):
    out_dir, _ = every_mode
    for mode in ablation_grid.MODES:
        for seed in SEEDS:
            config = json.load(open(os.path.join(out_dir, f'{mode}-seed{seed}', 'result.json')))['config']
            assert config['untie_at'] == (2 / 3 if mode == 'tied_untie' else None), mode
            assert config['tie_mode'] == ('tied' if mode == 'tied_untie' else mode)
            assert checkpoint(out_dir, mode, seed)['head_untied'] is (mode == 'tied_untie'), mode


def test_the_copy_columns_are_those_of_the_runs_metrics(every_mode):
    out_dir, done = every_mode
    summary = json.load(open(os.path.join(out_dir, 'summary.json')))
    repeat_rates = []
    for mode in ablation_grid.MODES:
        start, end, unlearned = [], [], []
        for seed in SEEDS:
            rows = read_csv(os.path.join(out_dir, f'{mode}-seed{seed}', 'metrics.csv'))
            evals = [r for r in rows if r['copy_prob']]
            assert [int(r['iter']) for r in evals] == [0, 10, 20]
            start.append(float(evals[0]['copy_prob']))
            end.append(float(evals[-1]['copy_prob']))
            unlearned.append(next((int(r['iter']) for r in evals
                                   if float(r['copy_prob']) < 2 * float(r['repeat_rate'])), None))
            repeat_rates += [float(r['repeat_rate']) for r in evals]
        cells = summary['modes'][mode]
        assert cells['init_copy_prob']['per_seed'] == start
        assert cells['final_copy_prob']['per_seed'] == end
        assert cells['init_copy_prob']['mean'] == pytest.approx(statistics.fmean(start))
        assert cells['final_copy_prob']['std'] == pytest.approx(statistics.stdev(end))
        assert cells['unlearned_copy_iter']['per_seed'] == unlearned
        reached = [u for u in unlearned if u is not None]
        assert cells['unlearned_copy_iter']['mean'] == (pytest.approx(statistics.fmean(reached)) if reached else None)
        assert cells['unlearned_copy_iter']['seeds_reached'] == len(reached)
        assert cells['unlearned_copy_iter']['seeds_probed'] == 2
    assert summary['repeat_rate'] == pytest.approx(statistics.fmean(repeat_rates))
    table = open(os.path.join(out_dir, 'summary.md')).read()
    assert '| copy_prob at start | unlearned copy by | copy_prob at end |' in table
    row = next(line for line in table.splitlines() if line.startswith('| tied |')).split(' | ')
    start = summary['modes']['tied']['init_copy_prob']
    assert row[len(ablation_report.COLUMNS) - 3] == f"{start['mean']:.3g} ± {start['std']:.3g}"
    # ablation.csv carries the probe: at the evaluations, and the gradient norm at the steps.
    for r in read_csv(os.path.join(out_dir, 'ablation.csv')):
        assert bool(r['copy_prob']) == bool(r['repeat_rate']) == bool(r['val_loss'])
        assert bool(r['grad_norm']) == (int(r['iter']) < 20)


def test_unlearned_copy_iter_is_the_first_evaluation_below_twice_the_repeat_rate():
    def rows(*evals):  # (iter, copy_prob, repeat_rate), with a step row without the probe between each
        out = []
        for it, copy, repeat in evals:
            out += [dict(iter=it, copy_prob=copy, repeat_rate=repeat),
                    dict(iter=it + 1, copy_prob=None, repeat_rate=None)]
        return out
    assert run_results.unlearned_copy_iter(rows((0, 0.9, 0.03), (10, 0.3, 0.03), (20, 0.059, 0.03), (30, 0.02, 0.03))) == 20
    # 0.06 is twice 0.03, not below it
    assert run_results.unlearned_copy_iter(rows((0, 0.9, 0.03), (10, 0.06, 0.03), (20, 0.07, 0.03))) is None
    assert run_results.unlearned_copy_iter(rows((0, 0.01, 0.03), (10, 0.02, 0.03))) == 0  # below from the start: 0, not None
    assert run_results.unlearned_copy_iter(rows((20, 0.01, 0.03), (0, 0.9, 0.03), (10, 0.05, 0.03))) == 10  # in any order
    assert run_results.unlearned_copy_iter(rows((0, 0.9, 0.0), (10, 1e-6, 0.0))) is None  # a text that never repeats
    assert run_results.unlearned_copy_iter([dict(iter=0), dict(iter=10)]) is None  # a metrics.csv from before the probe
    assert run_results.unlearned_copy_iter([]) is None


def test_the_figure_has_a_copy_prob_panel(every_mode, tiny_data, tmp_path, monkeypatch):
    import matplotlib.figure
    out_dir, done = every_mode
    figures, savefig = [], matplotlib.figure.Figure.savefig
    monkeypatch.setattr(matplotlib.figure.Figure, 'savefig',
                        lambda fig, *a, **k: (figures.append(fig), savefig(fig, *a, **k)))
    cfg = ablate.parse_args(ablation_args(tiny_data, out_dir, '--seeds=2'))
    _, info, curves = ablation_report.summarize(cfg, ablate.plan_runs(cfg), done['info']['vocab_size'], [])
    assert ablation_figure.plot(str(tmp_path / 'curves.png'), curves, info)
    (fig,) = figures
    assert len(fig.axes) == 3
    ax = fig.axes[2]
    assert ax.get_yscale() == 'log'
    assert ax.get_legend_handles_labels()[1] == [info['labels'][m] for m in ablation_grid.MODES]
    reference = [line.get_ydata()[0] for line in ax.get_lines() if line.get_label() == '_repeat rate of the text']
    assert reference == [pytest.approx(info['repeat_rate'])]
    assert (tmp_path / 'curves.png').read_bytes().startswith(PNG_MAGIC)
    # The spread over seeds: one shaded band per mode in each panel, spanning exactly the seeds' lowest and
    # highest validation loss at every evaluation.
    for ax in fig.axes:
        assert len(ax.collections) == len(ablation_grid.MODES)
    band = fig.axes[1].collections[0].get_paths()[0].vertices
    seeds_val = {}
    for rows in curves[ablation_grid.MODES[0]]:
        for r in rows:
            if r['val_loss'] is not None:
                seeds_val.setdefault(r['iter'] + 1, []).append(r['val_loss'])
    for x, values in seeds_val.items():
        ys = band[band[:, 0] == x][:, 1]
        assert min(ys) == pytest.approx(min(values)) and max(ys) == pytest.approx(max(values))
    assert any(max(v) - min(v) > 1e-4 for v in seeds_val.values())  # the seeds do differ: a band, not a line


def test_a_rerun_skips_the_untie_row_and_another_untie_at_refuses_it_only(every_mode, tiny_data):
    out_dir, _ = every_mode
    before = run_files(out_dir)
    bar = StopAfter(10 ** 9)  # a bar that does nothing; run_all alone, so the summaries stay as they are
    cfg = ablate.parse_args(ablation_args(tiny_data, out_dir, '--seeds=2'))
    done = ablate.run_all(cfg, ablate.plan_runs(cfg), bar)
    assert done['skipped'] == [(m, s) for m in ablation_grid.MODES for s in SEEDS] and not done['trained']
    # --untie_at is no setting of the other rows: they are still the runs asked for.
    modes = '--modes=' + ','.join(TIE_MODES)
    cfg = ablate.parse_args(ablation_args(tiny_data, out_dir, '--seeds=2', '--untie_at=0.5', modes))
    assert cfg['untie_at'] == 0.5
    assert len(ablate.run_all(cfg, ablate.plan_runs(cfg), bar)['skipped']) == 2 * len(TIE_MODES)
    cfg = ablate.parse_args(ablation_args(tiny_data, out_dir, '--seeds=2', '--untie_at=0.5'))
    with pytest.raises(ablate.UserError, match=r'tied_untie-seed1337.*untie_at=0\.666.*untie_at=0\.5'):
        ablate.run_all(cfg, ablate.plan_runs(cfg), bar)
    assert run_files(out_dir) == before


def test_runs_from_before_the_untie_row_and_the_copy_probe_are_skipped_and_summarised(tiny_data, tmp_path):
    out_dir = str(tmp_path)
    run_ablation(tiny_data, out_dir, '--modes=tied,untied')
    for mode in ('tied', 'untied'):  # make them look as they were written before this version
        run_dir = tmp_path / f'{mode}-seed1337'
        result = json.load(open(run_dir / 'result.json'))
        del result['config']['untie_at']
        (run_dir / 'result.json').write_text(json.dumps(result))
        rows = read_csv(run_dir / 'metrics.csv')
        fields = [k for k in rows[0] if k not in PROBE_FIELDS]
        with open(run_dir / 'metrics.csv', 'w', newline='') as f:
            writer = csv.DictWriter(f, fieldnames=fields, extrasaction='ignore')
            writer.writeheader()
            writer.writerows(rows)
    done = run_ablation(tiny_data, out_dir, '--modes=tied,untied', figures=True)  # curves without the probes
    assert done['skipped'] == [('tied', 1337), ('untied', 1337)] and not done['trained']
    assert done['info']['repeat_rate'] is None
    for mode in ('tied', 'untied'):
        cells = done['info']['modes'][mode]
        assert cells['final_val_loss']['mean'] is not None
        for key in ('init_copy_prob', 'unlearned_copy_iter', 'final_copy_prob'):
            assert cells[key]['mean'] is None and cells[key]['per_seed'] == [None]
        assert cells['unlearned_copy_iter']['seeds_probed'] == 0
        # No grad_norm, no grad spikes: '–', not 0; the step losses are there, so their spikes are counted.
        assert cells['grad_spikes']['per_seed'] == [None] and cells['loss_spikes']['per_seed'] != [None]
    table = open(tmp_path / 'summary.md').read()
    row = next(line for line in table.splitlines() if line.startswith('| tied |')).split(' | ')
    assert row[-4:-1] == ['–', '–', '–'] and 'not measured' in table
    assert row[ablation_report.COLUMNS.index(('grad_spikes', 'grad_norm spikes', '{:.1f}')) + 1] == '–'
    assert all(r[k] == '' for r in read_csv(tmp_path / 'ablation.csv') for k in PROBE_FIELDS)
    # An interrupted run's checkpoint from before the untie row: its missing untie_at counts as None.
    cfg = ablate.parse_args(ablation_args(tiny_data, out_dir, '--modes=tied,tied_untie'))
    (_, _, tied), (_, _, untie) = ablate.plan_runs(cfg)
    old = {k: v for k, v in ablation_grid.recorded_config(tied).items() if k not in ('untie_at', 'gelu_approx')}
    ablate.check_same_config(ablation_grid.recorded_config(tied), old, 'ckpt.pt', 'tied-seed1337')
    with pytest.raises(ablate.UserError, match='untie_at=None.*untie_at=0.666'):
        ablate.check_same_config(ablation_grid.recorded_config(untie), old, 'ckpt.pt', 'tied_untie-seed1337')


def test_quick_preset_and_command_line_keys_win_over_it(tiny_data, tmp_path):
    args = ['--quick', '--dataset=tiny', f'--data_dir={tiny_data}', f'--out_dir={tmp_path}', '--device=cpu', '--jobs=1',
            '--progress=false', '--modes=tied,shuffle', '--max_iters=12']
    cfg = ablate.parse_args(args)
    assert cfg['max_iters'] == 12 and cfg['n_embd'] == ablate.QUICK['n_embd'] and cfg['out_dir'] == str(tmp_path)
    with without_matplotlib():
        done = ablate.ablate(cfg, args)
    assert done['trained'] == [('tied', 1337), ('shuffle', 1337)]
    assert json.load(open(tmp_path / 'summary.json'))['config']['n_layer'] == ablate.QUICK['n_layer']


def test_rerun_skips_finished_runs_and_a_new_mode_trains_alone(tiny_data, tmp_path, monkeypatch, capsys):
    out_dir = str(tmp_path)
    run_ablation(tiny_data, out_dir, '--modes=tied,untied')
    before = run_files(out_dir)
    capsys.readouterr()  # that run's own lines (run_ablation: no figures there either)
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
    args = tiny_train_args(tiny_data, str(tmp_path / 'stopped'), log_interval=1, **budget) + ['--modes=shuffle',
                                                                                             '--jobs=1']
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


def test_a_run_killed_before_its_first_checkpoint_starts_again_over_what_it_left(tiny_data, tmp_path):
    """train.py never starts afresh over a run's files; ablate.py's own run, killed before any checkpoint, left
    metrics.csv (and best.pt) that are its to replace: the run trains from scratch, as if never started."""
    budget = dict(max_iters=6, eval_interval=6)
    straight = run_ablation(tiny_data, str(tmp_path / 'straight'), '--modes=shuffle', **budget)
    run_dir = tmp_path / 'killed' / 'shuffle-seed1337'
    run_dir.mkdir(parents=True)
    (run_dir / 'metrics.csv').write_text('iter,step_loss\n0,9.9\n')
    (run_dir / 'best.pt').write_bytes(b'half-written')
    again = run_ablation(tiny_data, str(tmp_path / 'killed'), '--modes=shuffle', **budget)
    assert again['trained'] == [('shuffle', 1337)]
    assert again['info']['modes']['shuffle']['final_val_loss'] == straight['info']['modes']['shuffle']['final_val_loss']


def test_an_untie_row_interrupted_after_its_untie_resumes_exactly(tiny_data, tmp_path):
    # Untie at iteration round(2/3 * 12) = 8, checkpoints every 3: the one at iteration 9 has two matrices.
    budget = dict(max_iters=12, eval_interval=3)
    straight = run_ablation(tiny_data, str(tmp_path / 'straight'), '--modes=tied_untie', **budget)
    args = ablation_args(tiny_data, str(tmp_path / 'stopped'), '--modes=tied_untie', **budget)
    cfg = ablate.parse_args(args)
    with pytest.raises(KeyboardInterrupt):  # stopped during iteration 10
        ablate.run_all(cfg, ablate.plan_runs(cfg), StopAfter(10))
    assert checkpoint(tmp_path / 'stopped', 'tied_untie', 1337)['iter_num'] == 9
    assert checkpoint(tmp_path / 'stopped', 'tied_untie', 1337)['head_untied'] is True
    resumed = ablate.ablate(cfg, args)
    assert resumed['resumed'] == [('tied_untie', 1337)]
    final = [done['info']['modes']['tied_untie']['final_val_loss'] for done in (resumed, straight)]
    assert final[0] == final[1]
    key = ('iter', 'step_loss', 'val_loss', 'copy_prob', 'data_fingerprint')
    rows_a, rows_b = (read_csv(tmp_path / run / 'ablation.csv') for run in ('straight', 'stopped'))
    assert [[r[k] for k in key] for r in rows_b] == [[r[k] for k in key] for r in rows_a]


def test_settings_that_differ_from_a_finished_run_are_refused(tiny_data, tmp_path):
    run_ablation(tiny_data, str(tmp_path), '--modes=tied')
    with pytest.raises(ablate.UserError, match='learning_rate=0.003.*learning_rate=0.001'):
        run_ablation(tiny_data, str(tmp_path), '--modes=tied', learning_rate=1e-3)


def test_a_finished_run_on_data_prepared_again_from_another_text_is_refused(tmp_path):
    """Skipping a finished run reads its result, not its data: a dataset prepared again under the same name from
    another text (the same characters, so the same vocabulary) must not be summarised with it."""
    import prepare
    from conftest import tiny_corpus
    data, source = tmp_path / 'data', tmp_path / 'tiny.txt'
    data.mkdir()
    source.write_text(tiny_corpus(), encoding='utf-8')
    prepare.main([f'--input={source}', '--dataset=tiny', f'--out_dir={data}'])
    run_ablation(str(data), str(tmp_path / 'grid'), '--modes=tied', max_iters=4, eval_interval=2)
    source.write_text(tiny_corpus()[::-1], encoding='utf-8')
    prepare.main([f'--input={source}', '--dataset=tiny', f'--out_dir={data}'])
    with pytest.raises(ablate.UserError, match='result.json was trained on another text than .*prepared again'):
        run_ablation(str(data), str(tmp_path / 'grid'), '--modes=tied,untied', max_iters=4, eval_interval=2)


def test_a_bad_mode_gives_one_line_listing_the_modes_and_exit_2():
    result = subprocess.run([sys.executable, 'ablate.py', '--modes=tied,tide'], cwd=REPO_ROOT, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 2
    assert 'Traceback' not in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert result.stderr.startswith('error: ') and "'tide'" in result.stderr
    assert ', '.join(TIE_MODES) in result.stderr and 'tied_untie' in result.stderr


def test_a_bad_untie_at_is_train_pys_one_line_error():
    line = assert_one_line_error(run_in_process('ablate.py', '--modes=tied_untie', '--untie_at=1.5'), '--untie_at', '1.5')
    assert line == assert_one_line_error(run_in_process('train.py', '--untie_at=1.5'))


@pytest.mark.parametrize('value', ['1.5', '0', '1', '-0.2', 'abc', 'true', '2/3'])
def test_every_bad_untie_at_is_worded_as_train_py_words_it(value):
    with pytest.raises(ablate.UserError) as in_train:
        train.parse_train_args([f'--untie_at={value}'])
    with pytest.raises(ablate.UserError) as in_ablate:
        ablate.parse_args(['--modes=tied,tied_untie', f'--untie_at={value}'])
    assert str(in_ablate.value) == str(in_train.value)


def test_untie_at_that_would_never_untie_is_refused_where_the_row_is_asked_for():
    args = ['--untie_at=0.99', '--max_iters=20']
    with pytest.raises(ablate.UserError, match='iteration 20 of --max_iters=20.*never untie'):
        ablate.parse_args(args + ['--modes=tied,tied_untie'])
    assert ablate.parse_args(args + ['--modes=tied'])['untie_at'] == 0.99  # no untie row: nothing to refuse
    # 0.97 * 20 rounds to iteration 19, the last step: allowed
    assert ablate.parse_args(['--untie_at=0.97', '--max_iters=20', '--modes=tied_untie'])['untie_at'] == 0.97
    with pytest.raises(ablate.UserError, match='leave tied_untie out of --modes'):
        ablate.parse_args(['--untie_at=None'])


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


def test_welch_interval_is_the_textbook_one():
    # equal variances 2.5, five seeds a side: se = 1, Welch's df = 8, t(0.975, 8) = 2.306
    diff, low, high = ablation_report.welch_interval([1, 2, 3, 4, 5], [2, 3, 4, 5, 6])
    assert diff == pytest.approx(-1) and low == pytest.approx(-3.306) and high == pytest.approx(1.306)
    # unequal variances 2.5 and 0.025: df = (0.5 + 0.005)^2 / (0.5^2/4 + 0.005^2/4) = 4.080, between 4 and 5
    a, b = [1, 2, 3, 4, 5], [3.0, 3.2, 2.8, 3.1, 2.9]
    diff, low, high = ablation_report.welch_interval(a, b)
    t = 2.776 + 0.0800 * (2.571 - 2.776)
    assert diff == pytest.approx(0.0, abs=1e-12) and high == pytest.approx(t * 0.505 ** 0.5, rel=1e-4)
    assert ablation_report.welch_interval([1.0, 1.1, 0.9], [2.0, 2.1, 1.9])[2] < 0      # clearly apart: excludes zero
    diff, low, high = ablation_report.welch_interval([1.0], [2.0, 2.1])               # one seed: no interval
    assert diff == pytest.approx(-1.05) and low is None and high is None
    assert ablation_report.t_975(100) == pytest.approx(1.984, abs=0.002)


def test_mean_interval_is_students_t_with_n_minus_1_degrees_of_freedom():
    # Claims 10-11's intervals of a mean over seeds, by hand. Two values 0 and 1: mean 0.5, s = sqrt(1/2), se = 1/2,
    # one degree of freedom: t = 12.706, so 0.5 -/+ 6.353 (t at two degrees, 4.303, would give -/+ 2.152).
    assert ablation_report.mean_interval([0.0, 1.0]) == pytest.approx((0.5, 0.5 - 6.353, 0.5 + 6.353))
    # five seeds 1, 2, 3, 4, 6: mean 3.2, s^2 = 14.8 / 4 = 3.7, se = sqrt(3.7 / 5) = 0.86023, t(0.975, 4) = 2.776
    half = 2.776 * (3.7 / 5) ** 0.5
    assert ablation_report.mean_interval([1, 2, 3, 4, 6]) == pytest.approx((3.2, 3.2 - half, 3.2 + half))
    assert half == pytest.approx(2.3880, abs=1e-4)
    # as the summary prints it: claim 10's "head minus embedding" over seeds
    cells = dict(cka_head=dict(per_seed=[0.9, 0.8, 0.7]), cka_emb=dict(per_seed=[0.1, 0.1, 0.1]))
    assert ablation_report.head_minus_embedding(cells) == f"+0.700 [{0.7 - 4.303 * 0.1 / 3 ** 0.5:+.3f}, " \
                                                          f"{0.7 + 4.303 * 0.1 / 3 ** 0.5:+.3f}]"


def assert_seed_differences(differences, mine, theirs):
    """Each (difference, low, high) is mean(mine) - mean(theirs) over the seeds, inside its interval."""
    for key, (diff, low, high) in differences.items():
        assert diff == pytest.approx(statistics.fmean(mine[key]['per_seed']) - statistics.fmean(theirs[key]['per_seed']))
        assert low < diff < high or low == diff == high


def test_the_summary_compares_every_mode_with_untied(every_mode):
    out_dir, done = every_mode
    with open(os.path.join(out_dir, 'summary.json')) as f:
        info = json.load(f)
    assert set(info['versus_untied']) == set(info['modes']) - {'untied'}
    for mode, cells in info['versus_untied'].items():
        assert_seed_differences(cells, info['modes'][mode], info['modes']['untied'])
    with open(os.path.join(out_dir, 'summary.md')) as f:
        assert 'Difference from untied' in f.read()


def test_the_summary_says_in_what_precision_the_runs_trained_from_their_logs(every_mode, tmp_path):
    # --dtype=auto trains in bf16 on a CPU with native bf16 and in float32 elsewhere: a grid resumed on another
    # kind of CPU holds both, and only the runs' own logs say which.
    out_dir, _ = every_mode
    info = json.load(open(os.path.join(out_dir, 'summary.json')))
    assert info['config']['dtype'] == 'float32'  # the tiny runs' (conftest.tiny_train_args)
    assert info['trained_on'] == "every run on cpu in float32"
    assert "Trained: every run on cpu in float32" in open(os.path.join(out_dir, 'summary.md')).read()
    header = open(os.path.join(out_dir, 'tied-seed1337', 'train.log')).readline()
    runs = []
    for k, log in enumerate((header, header.replace(' in float32 ', ' in bfloat16 ') + header, None)):
        run_dir = tmp_path / f'run{k}'
        run_dir.mkdir()
        if log is not None:
            (run_dir / 'train.log').write_text(log + 'tied seed 1337: val loss 5.0\n')
        runs.append(('tied', 1337 + k, dict(out_dir=str(run_dir))))
    assert ablation_report.trained_on(runs) == ("on cpu in bfloat16: 1 of 3 runs; on cpu in float32: 2 of 3 runs; "
                                                "unrecorded: 1 of 3 runs")


def test_versus_compares_two_ablations_mode_by_mode_and_names_what_differs(every_mode, tiny_data, tmp_path):
    other_dir, _ = every_mode
    out_dir = str(tmp_path / 'scaled')
    done = run_ablation(tiny_data, out_dir, '--modes=tied,untied', '--seeds=2', f'--versus={other_dir}',
                        emb_scale=True)
    this = json.load(open(os.path.join(out_dir, 'summary.json')))
    other = json.load(open(os.path.join(other_dir, 'summary.json')))
    versus = this['versus_other']
    assert versus['out_dir'] == other_dir and done['info']['versus_other']['differs'] == versus['differs']
    assert versus['differs'] == {'emb_scale': [True, False]}  # modes, seeds and versus are not settings
    assert set(versus['modes']) == {'tied', 'untied'}
    for mode, cells in versus['modes'].items():
        assert 'final_val_loss' in cells and 'val_loss_ge1000' in cells
        assert_seed_differences(cells, this['modes'][mode], other['modes'][mode])
    # emb_scale multiplies a tied model's self term by sqrt(d): it starts higher than without it
    assert versus['modes']['tied']['init_step_loss'][0] > 0
    table = open(os.path.join(out_dir, 'summary.md')).read()
    assert f"This ablation minus `{other_dir}`" in table and "emb_scale=True here, False there" in table

    # A --versus that cannot be read, or shares no mode, is one line before anything is trained.
    result = run_in_process('ablate.py', '--quick', f'--data_dir={tiny_data}', '--dataset=tiny',
                            f'--out_dir={tmp_path}/new', f'--versus={tmp_path}/nowhere')
    assert_one_line_error(result, '--versus=', 'summary.json')
    assert not os.path.exists(tmp_path / 'new')
    only_shuffle = str(tmp_path / 'shuffle')
    run_ablation(tiny_data, only_shuffle, '--modes=shuffle', max_iters=2, eval_interval=2)
    with pytest.raises(ablate.UserError, match='no mode in common with --modes=tied'):
        ablate.parse_args(['--modes=tied', f'--versus={only_shuffle}'])


def test_spikes_are_counted_once_each_and_never_on_a_smooth_curve():
    smooth = [10 * 0.99 ** i + 0.01 * (i % 3) for i in range(300)]  # decaying, with a little wobble
    assert run_results.count_spikes(smooth, run_results.loss_spike) == 0
    assert run_results.count_spikes(smooth, run_results.grad_spike) == 0
    one = list(smooth)
    one[150] = 40.0
    assert run_results.count_spikes(one, run_results.loss_spike) == 1 and run_results.count_spikes(one, run_results.grad_spike) == 1
    two_steps = list(one)
    two_steps[151] = 40.0  # a loss that stays up for a second step is still one spike
    assert run_results.count_spikes(two_steps, run_results.loss_spike) == 1
    apart = list(one)
    apart[250] = 40.0
    assert run_results.count_spikes(apart, run_results.grad_spike) == 2
    # grad_norm: 4 x the median of the window is the line (3.9 x is not a spike, 4.1 x is)
    flat = [1.0] * 50
    assert run_results.count_spikes(flat + [3.9] + flat, run_results.grad_spike) == 0
    assert run_results.count_spikes(flat + [4.1] + flat, run_results.grad_spike) == 1
    # the first SPIKE_MIN_HISTORY values are not judged; None (steps not logged) is skipped
    assert run_results.count_spikes([1.0, 100.0] + [1.0] * 20, run_results.grad_spike) == 0
    assert run_results.count_spikes([None, 1.0] * 20 + [9.0], run_results.grad_spike) == 1
    assert run_results.count_spikes([None, None], run_results.grad_spike) is None
    assert run_results.count_spikes([], run_results.loss_spike) is None


def test_best_iteration_gap_and_spike_columns_are_those_of_the_runs_metrics(every_mode):
    out_dir, _ = every_mode
    summary = json.load(open(os.path.join(out_dir, 'summary.json')))
    for mode in ablation_grid.MODES:
        best_iter, gap, grad, loss = [], [], [], []
        for seed in SEEDS:
            rows = read_csv(os.path.join(out_dir, f'{mode}-seed{seed}', 'metrics.csv'))
            evals = [r for r in rows if r['val_loss']]
            lowest = min(float(r['val_loss']) for r in evals)
            best_iter.append(next(int(r['iter']) for r in evals if float(r['val_loss']) == lowest))
            gap.append(float(evals[-1]['val_loss']) - float(evals[-1]['train_loss']))
            grad.append(run_results.count_spikes([float(r['grad_norm']) for r in rows if r['grad_norm']], run_results.grad_spike))
            loss.append(run_results.count_spikes([float(r['step_loss']) for r in rows if r['step_loss']], run_results.loss_spike))
        cells = summary['modes'][mode]
        assert cells['best_val_iter']['per_seed'] == best_iter and set(best_iter) <= {0, 10, 20}
        assert cells['gap_at_end']['per_seed'] == pytest.approx(gap)
        assert cells['gap_at_end']['mean'] == pytest.approx(statistics.fmean(gap))
        assert cells['grad_spikes']['per_seed'] == grad and None not in grad
        assert cells['loss_spikes']['per_seed'] == loss and None not in loss
    for mode, cells in summary['versus_untied'].items():
        assert 'gap_at_end' in cells and 'grad_spikes' in cells and 'loss_spikes' in cells
    table = open(os.path.join(out_dir, 'summary.md')).read()
    assert '| best val loss | at iteration | val - train at end | grad_norm spikes | loss spikes |' in table


def test_validation_loss_by_training_frequency(every_mode, tiny_data):
    import numpy as np
    from lib.run_files import load_checkpoint, model_from_checkpoint
    from lib.prepared_data import load_meta
    out_dir, _ = every_mode
    summary = json.load(open(os.path.join(out_dir, 'summary.json')))
    data_dir = os.path.join(tiny_data, 'tiny')
    meta = load_meta(data_dir)
    train_ids = np.fromfile(os.path.join(data_dir, 'train.bin'), dtype=meta['dtype']).astype(np.int64)
    val = np.fromfile(os.path.join(data_dir, 'val.bin'), dtype=meta['dtype']).astype(np.int64)
    seen = np.bincount(train_ids, minlength=meta['vocab_size'])[val[1:]]  # each target's count in train.bin
    expected = [int(((seen >= lo) & (seen < (hi or np.inf))).sum()) for _, _, lo, hi in run_results.BUCKETS]
    assert sum(expected) == len(val) - 1 and expected[-1] > 0 and expected[1] > 0  # the tiny text has rare letters
    for mode in ('tied', 'untied', 'tied_untie'):
        cells = summary['modes'][mode]
        for key, count in zip(run_results.BUCKET_TOKENS, [len(val) - 1] + expected):
            assert cells[key]['per_seed'] == [count] * len(SEEDS)  # every target evaluated once
        # The token-weighted mean over the buckets is the checkpoint's loss over the whole split.
        path = os.path.join(out_dir, f'{mode}-seed1337', 'ckpt.pt')
        model = model_from_checkpoint(load_checkpoint(path, 'cpu'), path).eval()
        T, n = model.config.block_size, len(val) - 1
        total = 0.0
        with torch.no_grad():
            for start in range(0, n, T):
                x = torch.from_numpy(val[start:min(start + T, n)])[None]
                y = torch.from_numpy(val[start + 1:min(start + T, n) + 1])[None]
                total += model(x, y)[1].item() * x.numel()
        buckets = [(cells[f'val_loss_{key}']['per_seed'][0], count)
                   for (key, *_), count in zip(run_results.BUCKETS, expected)]
        assert sum(loss * count for loss, count in buckets if count) / n == pytest.approx(total / n, rel=1e-5)
        assert cells['val_loss_all']['per_seed'][0] == pytest.approx(total / n, rel=1e-5)  # the 'whole split' column
        assert all((loss is None) == (count == 0) for loss, count in buckets)
        assert os.path.exists(os.path.join(out_dir, f'{mode}-seed1337', run_results.BUCKET_FILE))
    table = open(os.path.join(out_dir, 'summary.md')).read()
    assert f"| seen 10-99 ({expected[1]:,} tokens) |" in table
    lines = table.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith(f'| mode | whole split ({len(val) - 1:,} tokens) '
                                                                        f'| seen < 10'))
    row = next(line for line in lines[header:] if line.startswith('| tied |'))  # the bucket table's tied row
    cells = row.strip('| ').split(' | ')[1:]
    assert [c == '–' for c in cells] == [False] + [count == 0 for count in expected]


def test_the_summary_aligns_every_tied_run_with_its_seeds_untied_run_by_cka(every_mode):
    from lab.run_results import linear_cka, random_cka_floor
    out_dir, _ = every_mode
    summary = json.load(open(os.path.join(out_dir, 'summary.json')))
    assert summary['modes']['untied']['cka_emb']['mean'] is None  # untied is what the others are measured against
    for mode in ('tied', 'pit', 'shuffle'):
        cells = summary['modes'][mode]
        for k, seed in enumerate((1337, 1338)):
            ours = torch.load(os.path.join(out_dir, f'{mode}-seed{seed}', 'ckpt.pt'), weights_only=True)['model']
            untied = torch.load(os.path.join(out_dir, f'untied-seed{seed}', 'ckpt.pt'), weights_only=True)['model']
            W = ours['token_embedding_table.weight']
            assert cells['cka_emb']['per_seed'][k] == pytest.approx(
                linear_cka(W, untied['token_embedding_table.weight']), abs=1e-9)
            assert cells['cka_head']['per_seed'][k] == pytest.approx(linear_cka(W, untied['lm_head.weight']), abs=1e-9)
            assert cells['cka_floor']['per_seed'][k] == pytest.approx(random_cka_floor(*W.shape), abs=1e-9)
    table = open(os.path.join(out_dir, 'summary.md')).read()
    assert '| CKA to untied embedding | CKA to untied head | random floor |' in table


def test_linear_cka_ignores_rotation_and_scale_and_its_floor_depends_on_the_shape():
    from lab.run_results import linear_cka, random_cka_floor
    torch.manual_seed(0)
    X = torch.randn(300, 16)
    Q, _ = torch.linalg.qr(torch.randn(16, 16))
    assert linear_cka(X, 5 * X @ Q) == pytest.approx(1.0, abs=1e-9)
    assert linear_cka(X, torch.randn(300, 16)) < 0.2
    assert random_cka_floor(300, 16) < 0.15 < 0.5 < random_cka_floor(20, 64)  # n <= d: random looks aligned


def test_the_floor_is_fitted_to_what_each_run_reads(tiny_data, tmp_path):
    """summary.json's floor: the bigram fitted to a run's own windows, max_iters x the batch with its accumulation
    steps, drawn with its seed (lab/floor.floors)."""
    from lab.floor import floors
    run_ablation(tiny_data, str(tmp_path), '--modes=untied', max_iters=6, eval_interval=3, gradient_accumulation_steps=2)
    with open(os.path.join(tmp_path, 'summary.json'), encoding='utf-8') as f:
        info = json.load(f)
    assert info['floor'] == floors(os.path.join(tiny_data, 'tiny'), 6, 16, 16, info['config']['seed'])
    assert info['floor']['run_tokens'] == 6 * 16 * 17


def test_every_committed_summary_renders_again():
    """ablation_report.markdown on each summary under docs/results/, the oldest (before the tuned lens, the floor,
    best.pt) included: a summary re-rendered after the report grows a table is never a KeyError."""
    import glob
    paths = sorted(glob.glob(os.path.join(REPO_ROOT, 'docs', 'results', '*', 'summary.json')))
    assert len(paths) > 50
    for path in paths:
        with open(path, encoding='utf-8') as f:
            text = ablation_report.markdown(json.load(f))
        assert '| mode |' in text, path


def test_a_run_that_diverges_is_a_result_of_the_grid_not_a_failure(tiny_data, tmp_path, capsys):
    """A rate sweep's highest rates may drive the loss to NaN: that cell's result is 'diverged at iteration k', kept
    in result.json (so the run is not trained again), named in the summary, and read by a sweep as its worst cell;
    the other rows are summarised as ever."""
    from lab.ablation_figure import row_loss
    out_dir = str(tmp_path / 'grid')
    done = run_ablation(tiny_data, out_dir, '--modes=tied,pit_h100000', max_iters=10, eval_interval=5,
                        figures=True)  # S x100 000; curves that end in NaN
    assert sorted(done['trained']) == [('pit_h100000', 1337), ('tied', 1337)]
    result = json.load(open(os.path.join(out_dir, 'pit_h100000-seed1337', 'result.json')))
    at = result['diverged']['iteration']
    assert 'is nan' in result['diverged']['error'] and at < 10
    info = json.load(open(os.path.join(out_dir, 'summary.json')))
    assert info['modes']['pit_h100000']['diverged_at']['per_seed'] == [at]
    assert info['modes']['pit_h100000']['val_loss_all']['mean'] is None
    assert row_loss(info['modes']['pit_h100000']) == math.inf and row_loss(info['modes']['tied']) < 10
    assert f"Diverged (a non-finite loss stopped the run, so it has no final loss: '–'): pit_h100000 seed 1337 at " \
           f"iteration {at}." in open(os.path.join(out_dir, 'summary.md')).read()
    assert 'diverged, kept as the run' in capsys.readouterr().out
    again = run_ablation(tiny_data, out_dir, '--modes=tied,pit_h100000', max_iters=10, eval_interval=5)
    assert len(again['skipped']) == 2 and not again['trained']


def test_the_verdicts_against_untied_and_tied_are_paired_by_seed(every_mode, tiny_data, monkeypatch):
    """Seeds that move both arms together (here a seed adds 0 or 2 nats to every mode's end, tied a steady 0.010
    more): the paired interval sees the steady difference and excludes zero, Welch's sees the seeds' spread and does
    not. Every versus_* verdict the summary bolds must be the paired one; Welch's is kept beside it, named so."""
    out_dir, done = every_mode
    real = ablation_report.run_numbers

    def seed_moves_both(rows, result, tie_mode, cfg, vocab_size):
        numbers = real(rows, result, tie_mode, cfg, vocab_size)
        seed = result['config']['seed'] - cfg['seed']  # 0 or 1
        numbers['final_val_loss'] = 4.0 + 2.0 * seed + {'untied': 0.0, 'tied': 0.010}.get(tie_mode, 0.005) \
            + 0.0004 * seed * (tie_mode == 'tied')
        return numbers
    monkeypatch.setattr(ablation_report, 'run_numbers', seed_moves_both)
    cfg = ablate.parse_args(ablation_args(tiny_data, out_dir, '--seeds=2'))
    _, info, _ = ablation_report.summarize(cfg, ablate.plan_runs(cfg), done['info']['vocab_size'], [])
    paired = info['versus_untied']['tied']['final_val_loss']
    assert paired[0] == pytest.approx(0.0102) and 0 < paired[1] < paired[2] < 0.02, paired
    welch = info['versus_untied_welch']['tied']['final_val_loss']
    assert welch[1] < 0 < welch[2], welch
    assert info['versus_tied']['shuffle']['final_val_loss'] == pytest.approx(
        ablation_report.paired_interval([4.005, 6.005], [4.010, 6.0104]))
    assert info['versus_tied']['shuffle']['final_val_loss'][2] < 0 < \
        info['versus_tied_welch']['shuffle']['final_val_loss'][2]


def test_a_records_machine_line_names_the_cpu_kind_that_moves_its_ends():
    """Two AMD EPYC kinds share a name, and a bf16 run ends apart between them: the line carries the x86 family and
    model (Zen 2 family 23; Zen 3 and Zen 4 family 25, other models) and whether bf16 runs in hardware."""
    def cpuinfo(family, model):
        return (f"processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: {family}\nmodel\t\t: {model}\n"
                f"model name\t: AMD EPYC\nflags\t\t: avx2\n\nprocessor\t: 1\ncpu family\t: 99\nmodel\t\t: 99\n")
    kinds = {ablation_report.cpu_kind(cpuinfo(*fm), native) for fm, native in
             [((23, 49), False), ((25, 1), False), ((25, 17), True)]}
    assert kinds == {'AMD EPYC; x86 family 23 model 49, bf16 emulated',
                     'AMD EPYC; x86 family 25 model 1, bf16 emulated',
                     'AMD EPYC; x86 family 25 model 17, bf16 native'}
    assert ablation_report.cpu_kind('', False) == platform.processor()
