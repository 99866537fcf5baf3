"""The first run teaches: at train.py's default init (identity blocks, sqrt(d) input scaling, sigma = 1/sqrt(d)) and
the quick start's config, plain tying starts as a copier far above an untied head, where (*) says, and a remedy
starts where an untied head does; the console's first line says so in words."""

import math
import os

import pytest

import train
from lib.init_loss_formula import predicted_initial_loss

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIRST_RUN = os.path.join(ROOT, 'config', 'first_run.py')


SHAKESPEARE = os.path.join(os.path.dirname(ROOT), 'shared', 'data', 'tinyshakespeare.txt')


@pytest.fixture(scope='module')
def english(tmp_path_factory):
    """A prepared character-level dataset of English text: tiny shakespeare where it sits beside the repository (the
    quick start's own 65 characters), else the prose of the repository's own docs, which repeats a character as
    rarely. Their tables are left out: a row's |---:| runs are copies a tied start predicts well, and where the
    validation split's share of them fell as the pages changed, the mean start moved by 0.4 nats."""
    import glob
    import prepare
    root = tmp_path_factory.mktemp('english')
    if os.path.exists(SHAKESPEARE):
        text = open(SHAKESPEARE, encoding='utf-8').read()
    else:
        text = ''.join(line for p in sorted(glob.glob(os.path.join(ROOT, 'docs', '*.md')))
                       for line in open(p, encoding='utf-8') if not line.startswith('|'))
    (root / 'english.txt').write_text(text, encoding='utf-8')
    prepare.main([f"--input={root / 'english.txt'}", '--dataset=english', f'--out_dir={root}'])
    return str(root)


@pytest.fixture(scope='module')
def starts(english, tmp_path_factory):
    """{mode: (val loss at iteration 0, the model, what the run printed)} of the quick start's config, 0 steps."""
    import contextlib
    import io
    found = {}
    for mode in ('tied', 'shuffle', 'untied'):
        printed = io.StringIO()
        args = [FIRST_RUN, f'--tie_mode={mode}', '--max_iters=0', '--dataset=english', f'--data_dir={english}',
                f'--out_dir={tmp_path_factory.mktemp(mode)}', '--eval_iters=20', '--device=cpu', '--dtype=float32',
                '--compile=false', '--progress=false']
        with contextlib.redirect_stdout(printed):
            summary = train.train(train.parse_train_args(args))
        found[mode] = summary['val_loss'], summary['model'], printed.getvalue()
    return found


SEEDS = 8  # weight draws a start is averaged over: one draw's start moves by 0.07-0.10 (start_band says why)


def starts_over_seeds(data_dir, mode):
    """The quick start's model under mode at SEEDS draws of its weights, each evaluated at iteration 0 on the run's
    own evaluation batches (estimate_loss, eval_seed): [val loss per seed], the config, and those batches' inputs
    and targets."""
    from contextlib import nullcontext
    import torch
    from lib.prepared_data import load_splits
    from lib.training_run import make_model_config
    from model import GPT
    cfg = train.parse_train_args([FIRST_RUN, f'--tie_mode={mode}', '--dataset=english', f'--data_dir={data_dir}'])
    splits, meta = load_splits(cfg)
    cfg['vocab_size'] = meta['vocab_size']
    config = make_model_config(cfg)
    losses = []
    for seed in range(SEEDS):
        torch.manual_seed(seed)
        losses.append(train.estimate_loss(GPT(config), {'val': splits['val']}, cfg, nullcontext(), 'cpu')[0]['val'])
    generator = torch.Generator().manual_seed(cfg['eval_seed'])
    pairs = [train.get_batch(splits['val'], cfg['batch_size'], cfg['block_size'], generator)[:2]
             for _ in range(cfg['eval_iters'])]
    return losses, config, pairs


def start_band(config, pairs, symmetric):
    """How far the mean start of an untied-like head (untied: a, shuffle: b) may sit from its expectation over SEEDS
    draws, from (*)'s own terms and the evaluation's (input, target) pairs. With identity blocks the final LayerNorm
    gives |h|^2 = d exactly, so every cross-term logit z(i, k) = u_k . h is N(0, v), v = d sigma^2. The loss's
    target term -sum_ik p(i, k) z(i, k) (p: the pairs' frequencies) then moves by v sum p^2 from draw to draw, and
    the log-sum-exp by about v sum_i p(i)^2 (e^v - 2) / n more (linearised: each softmax share is ~e^z / n).
    shuffle's logits are symmetric (S is its own transpose: z(i, k) = z(k, i)), so a pair and its reverse move
    together: v sum p(i, k) (p(i, k) + p(k, i)), and the log-sum-exp term is counted twice. Returns the variance
    of one draw's start. One draw moves by 0.07-0.10 on either corpus the test uses, which is why one seed could
    not tell shuffle from untied to 0.1."""
    import torch
    n, v = config.vocab_size, config.n_embd * config.init_std ** 2
    counts = torch.zeros(n * n, dtype=torch.float64)
    for x, y in pairs:
        counts += torch.bincount((x * n + y).flatten(), minlength=n * n).double()
    p = (counts / counts.sum()).view(n, n)
    target = (p * (p + p.T)).sum() if symmetric else (p ** 2).sum()
    normaliser = (p.sum(1) ** 2).sum() * (math.exp(v) - 2) / n * (2 if symmetric else 1)
    return v * float(target + normaliser)


def test_plain_tying_starts_as_a_copier_where_equation_star_says_and_a_remedy_where_untied_does(english):
    """Means over SEEDS draws, each held to a band of four standard deviations that start_band derives, plus the
    bias (*) itself leaves: its (n - 1) e^(v/2) is the mean of a sum whose log is (e^v - 1) / 2n lower (Jensen), and
    shuffle's self logit, w_i . S[w_i], a cross term of variance 2v, adds log(1 + (e^v - e^(v/2)) / (n e^(v/2)))."""
    import statistics
    (tied, config, pairs), (untied, untied_config, _), (shuffle, _, _) = (starts_over_seeds(english, mode)
                                                                        for mode in ('tied', 'untied', 'shuffle'))
    tied, untied, shuffle = (statistics.mean(losses) for losses in (tied, untied, shuffle))
    n, v = config.vocab_size, config.n_embd * config.init_std ** 2
    assert tied >= untied + 2.0, (tied, untied)
    assert tied == pytest.approx(predicted_initial_loss(config), rel=0.05)
    # an untied head's start, which (*) also predicts: log n + d sigma^2 / 2
    expected = math.log(n) + v / 2
    assert expected == pytest.approx(predicted_initial_loss(untied_config), abs=0.01)
    var_untied, var_shuffle = start_band(config, pairs, False), start_band(config, pairs, True)
    jensen = (math.exp(v) - 1) / (2 * n)
    band = 4 * math.sqrt(var_untied / SEEDS) + jensen
    assert abs(untied - expected) <= band, (untied, expected, band)
    self_logit = math.log1p((math.exp(v) - math.exp(v / 2)) / (n * math.exp(v / 2)))
    band = 4 * math.sqrt((var_untied + var_shuffle) / SEEDS) + self_logit
    assert abs(shuffle - untied) <= band, (shuffle, untied, band)


def test_the_first_line_sets_the_start_beside_log_n_and_equation_star_in_words(starts):
    for mode, (start, model, printed) in starts.items():
        line = next(line for line in printed.splitlines() if line.startswith('start: '))
        assert f"val loss {start:.2f} against log n = {math.log(model.config.vocab_size):.2f}" in line
        assert f"(*) predicts {predicted_initial_loss(model.config):.2f} for {mode}" in line
        assert ('the head copies its input' in line) == (mode == 'tied'), line


def test_the_readme_table_is_the_committed_measurement():
    """The quick start's table quotes docs/results/first-run/ (bash docs/measure_first_run.sh): each row's mean
    start, end, copy probes and time, and the paired differences, as the record has them."""
    import re
    import statistics
    record = open(os.path.join(ROOT, 'docs', 'results', 'first-run', 'zen3-2026-11-27.txt'), encoding='utf-8').read()
    readme = open(os.path.join(ROOT, 'README.md'), encoding='utf-8').read()
    runs = re.findall(r"^(\w+) seed \d+: start ([\d.]+), end ([\d.]+), copy (\d+) % at the start, (\d+) % at step 50, "
                      r"([\d.]+) s$", record, re.M)
    assert len(runs) == 9
    for mode in ('tied', 'shuffle', 'untied'):
        rows = [tuple(map(float, run[1:])) for run in runs if run[0] == mode]
        start, end, copy0, copy50, wall = (statistics.mean(column) for column in zip(*rows))
        row = next(line for line in readme.splitlines() if line.startswith(f"| {'plain ' if mode == 'tied' else ''}`{mode}` |"))
        cells = [cell.strip().strip('*') for cell in row.split('|')[2:-1]]
        assert cells[0].split(',')[0].strip('*') == f"{start:.2f}", (mode, cells[0])
        assert cells[1] == f"{copy0:.0f} %, {copy50:.0f} %", (mode, cells[1])
        assert cells[2] == f"{end:.3f}", (mode, cells[2])
        assert cells[4] == f"{wall:.0f} s", (mode, cells[4])
        if mode != 'untied':
            paired = re.search(rf"^{mode} minus untied at the end, paired by seed: (\S+) (\[[^\]]+\])", record, re.M)
            assert cells[3].replace('**', '').replace('−', '-') == f"{paired.group(1)} {paired.group(2)}", (mode, cells[3])


def test_the_copy_probe_on_a_progress_line_is_that_steps_and_falls_between_evaluations(english, tmp_path):
    """The console's copy is measured on the logged step's own batch: with evaluations only at 0 and 40, the lines at
    10, 20 and 30 show the head unlearning copying (an evaluation's value repeated until the next one would stay at
    100 %, and did)."""
    import contextlib
    import io
    import re
    printed = io.StringIO()
    args = [FIRST_RUN, '--max_iters=40', '--eval_interval=50', '--log_interval=10', '--dataset=english',
            f'--data_dir={english}', f'--out_dir={tmp_path}', '--device=cpu', '--dtype=float32', '--compile=false']
    with contextlib.redirect_stdout(printed):
        train.train(train.parse_train_args(args))  # stderr is no terminal here: a line per logged iteration
    lines = re.findall(r"^tied: iter (\d+)/40: loss ([\d.]+),.* copy (\d+)%", printed.getvalue(), re.M)
    copies = {int(it): int(copy) for it, _, copy in lines}
    assert sorted(copies) == [0, 10, 20, 30], printed.getvalue()
    assert copies[0] >= 90 and copies[20] < copies[0] and copies[30] <= copies[0] - 30, copies


# The picture of the first run (the quick start's `python ablate.py --plot_runs=out-tied,out ...`): two runs'
# metrics.csv written by hand as train.py writes them, a row per logged step and the evaluation's cells (val_loss, the
# copy probe) filled only on some rows.
PICTURE_CSV = ('iter,step_loss,train_loss,val_loss,lr,copy_prob,repeat_rate\n0,10.9221,10.9497,10.8993,1e-05,0.9981,'
               '0.02656\n10,9.5169,,,1e-04,,\n20,3.1561,3.2231,3.271,2e-04,0.07191,0.02656\n',
               'iter,step_loss,train_loss,val_loss,lr,copy_prob,repeat_rate\n0,4.7512,4.7101,4.7342,1e-05,0.0207,'
               '0.02656\n10,3.9,,,1e-04,,\n20,3.0012,3.0101,3.0203,2e-04,0.0301,0.02656\n')


@pytest.fixture(scope='module')
def picture_runs(tiny_data, tmp_path_factory):
    """[out_dir] of a one-step tiny tied run and a shuffle one, in folders whose names say nothing of the mode (a
    label can only come from the run), each with a hand-written metrics.csv in place of its own; and
    {out_dir: {column: [(iter, value)] of its csv's filled cells}}."""
    import csv
    import io
    from conftest import train_tiny_run
    folders, columns = [], {}
    for text, mode in zip(PICTURE_CSV, ('tied', 'shuffle')):
        folder = train_tiny_run(tiny_data, tmp_path_factory, 'run', tie_mode=mode, max_iters=1)
        with open(os.path.join(folder, 'metrics.csv'), 'w', encoding='utf-8') as f:
            f.write(text)
        rows = list(csv.DictReader(io.StringIO(text)))
        columns[folder] = {key: [(int(r['iter']), float(r[key])) for r in rows if r[key]] for key in rows[0]}
        folders.append(folder)
    return folders, columns


def test_the_first_run_picture_draws_each_runs_csv_under_the_tie_mode_it_was_trained_with(picture_runs, tmp_path,
                                                                                          monkeypatch):
    """Left, each run's training steps and validation losses; right, its copy probe: each series its csv's column
    point for point, under the label of the tie mode in the run's ckpt.pt, in the order the runs are given."""
    import ablate
    from lab import ablation_figure
    folders, columns = picture_runs
    drawn, save = [], ablation_figure.save
    monkeypatch.setattr(ablation_figure, 'save', lambda plt, fig, path: drawn.append(fig) or save(plt, fig, path))
    ablate.main([f"--plot_runs={','.join(folders)}", f"--plot={tmp_path / 'first_run.png'}"])
    assert (tmp_path / 'first_run.png').read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'
    (figure,) = drawn
    ax_loss, ax_copy = figure.axes

    def series(ax, suffix=''):
        """{label: [(x, y)]} of the panel's lines whose label ends in suffix; without one, those a legend shows."""
        return {line.get_label(): list(zip(line.get_xdata(), line.get_ydata())) for line in ax.get_lines()
                if line.get_label().endswith(suffix) and (suffix or not line.get_label().startswith('_'))}
    labels = dict(zip(folders, ('tied', 'shuffle')))
    assert series(ax_loss) == {labels[f]: columns[f]['val_loss'] for f in folders}
    assert series(ax_loss, ', steps') == {f'_{labels[f]}, steps': columns[f]['step_loss'] for f in folders}
    assert series(ax_copy) == {labels[f]: columns[f]['copy_prob'] for f in folders}
    assert [text.get_text() for text in ax_loss.get_legend().get_texts()] == ['tied', 'shuffle']


def test_a_picture_of_what_is_no_run_is_one_line_naming_the_culprit_and_what_is_allowed(picture_runs, tmp_path):
    from conftest import assert_one_line_error, run_in_process
    folders, _ = picture_runs
    good, png = folders[0], f"--plot={tmp_path / 'x.png'}"
    (tmp_path / 'empty').mkdir()
    for runs, culprit, allowed in (
            (f"{good},{tmp_path / 'missing'}", f"{tmp_path / 'missing'} is no folder", 'give the out_dirs'),
            (f"{tmp_path / 'empty'},{good}", f"{tmp_path / 'empty'} has no metrics.csv", 'give the out_dirs'),
            (',', '--plot_runs=,:', 'give one or more runs')):
        assert_one_line_error(run_in_process('ablate.py', f'--plot_runs={runs}', png), culprit, allowed)
    bad = os.path.join(folders[1], 'metrics.csv')
    try:
        for text, why in ((PICTURE_CSV[1].replace('3.0203', 'abc'), "could not convert string to float: 'abc'"),
                          ('', 'no header with iter, step_loss and val_loss'), ('iter,loss\n0,4.1\n', 'no header')):
            with open(bad, 'w', encoding='utf-8') as f:
                f.write(text)
            assert_one_line_error(run_in_process('ablate.py', f"--plot_runs={','.join(folders)}", png),
                                  f'{bad} is not a metrics.csv', why, 'a number or nothing in each cell')
    finally:  # the module's other test reads it
        with open(bad, 'w', encoding='utf-8') as f:
            f.write(PICTURE_CSV[1])
    assert_one_line_error(run_in_process('ablate.py', f'--plot_runs={good}', '--modes=tied'),
                          'takes --plot=FILE.png and no other option, got --modes=tied')
    assert not (tmp_path / 'x.png').exists()


def test_the_quick_start_draws_the_two_runs_it_trained():
    """The README's one command draws docs/first_run.png's picture from the out_dirs its two train.py runs wrote
    (out-tied, then train.py's default, out), and the README shows the committed picture."""
    import re
    readme = open(os.path.join(ROOT, 'README.md'), encoding='utf-8').read()
    command = next(line.strip() for line in readme.splitlines() if line.strip().startswith('pip install -r'))
    trained = [(re.findall(r'--out_dir=(\S+)', part) or [train.DEFAULTS['out_dir']])[0]
               for part in command.split(' && ') if part.startswith('python train.py')]
    assert re.search(rf"&& python ablate.py --plot_runs={','.join(trained)} --plot=\S+\.png", command), command
    assert '(docs/first_run.png)' in readme and os.path.isfile(os.path.join(ROOT, 'docs', 'first_run.png'))
