"""The select rule's guards (lab/rate_selection.py): a stage reads its rows together only where they were trained
alike, steps a rung at a time along every rate an arm tunes and only along its own arm, ends only once each pick has
a full-length loss either side of it, and reads a horizon's rungs at the right seed whatever diverged."""

import copy
import json
import os

import pytest

from conftest import REPO_ROOT
from lab import experiment7_tables as tables
from lab import rate_selection as selection

# A committed record that a stage continues: its machine line, dtype and settings are the ones compared.
RECORD = os.path.join(REPO_ROOT, 'docs', 'results', 'experiment7-horizon-muon-w128-best', 'summary.json')


def record():
    with open(RECORD, encoding='utf-8') as f:
        return json.load(f)


def stage(tmp_path, monkeypatch, kept, ours):
    """out_dir holding ours beside its committed record kept (RESULTS moved to tmp_path): its sweep_cells."""
    monkeypatch.setattr(selection, 'RESULTS', str(tmp_path / 'results'))
    out = tmp_path / 'out-exp7-select-muon-w160'
    for folder, info in ((tmp_path / 'results' / 'experiment7-select-muon-w160', kept), (out, ours)):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / 'summary.json').write_text(json.dumps(info))
    return selection.sweep_cells(str(out), committed=True)


def changed(value):
    """Another value of value's type: what a setting typed otherwise on the command line gives."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value * 2 + 1
    if isinstance(value, list):
        return value + value[:1]
    return 'other' if value is None else f'{value}-other'


def test_a_stage_reads_with_its_record_only_rows_trained_alike(tmp_path, monkeypatch):
    """Every setting a run computes with, changed one at a time in the stage's summary, is refused beside its record;
    the settings that only say how a stage ran (its rows, its seeds' count, its jobs) are not. So are other seeds,
    another dtype, another CPU and another CPU kind: a continuation on another machine would mix its kernels' ends
    with the record's."""
    kept = record()
    assert 'x86 family 6 model 167' in kept['machine']
    ours = dict(copy.deepcopy(kept), modes={'tied_e1': kept['modes']['tied_e3']})
    assert stage(tmp_path, monkeypatch, kept, ours)[0] == list(kept['modes']) + ['tied_e1']  # alike: read together
    unused = [key for key in kept['config'] if key.startswith('muon_')] if kept['config']['optimizer'] == 'adamw' else []
    for key, value in kept['config'].items():
        other = copy.deepcopy(ours)
        other['config'][key] = changed(value)
        if key in selection.RUN_ONLY_KEYS or key in unused:
            stage(tmp_path, monkeypatch, kept, other)
        else:
            with pytest.raises(SystemExit, match=f"--{key}"):
                stage(tmp_path, monkeypatch, kept, other)
    machine = kept['machine']
    for what, field, value in (('seeds', 'seeds', [1337, 1338, 1340]),
                               ('trained_on', 'trained_on', 'every run on cpu in float32'),
                               ('CPU kind', 'machine', machine.replace('model 167', 'model 143')),
                               ('CPU', 'machine', machine.replace('Intel(R) Xeon(R) Processor', 'AMD EPYC'))):
        with pytest.raises(SystemExit, match=f"runs' {what} "):
            stage(tmp_path, monkeypatch, kept, dict(ours, **{field: value}))
    # a record from before the CPU's kind was named: the CPU's name is compared, and only it
    older = dict(kept, machine=machine.replace('; x86 family 6 model 167, bf16 native', ''))
    stage(tmp_path, monkeypatch, older, ours)


def test_a_select_stage_refuses_another_cpu_before_it_trains(tmp_path, monkeypatch):
    """The rows a stage lacks are not trained at all on a CPU other than its record's: refused before the first run,
    not after a round whose rows could not be read with the record's."""
    monkeypatch.setattr(selection, 'RESULTS', str(tmp_path / 'results'))
    kept = tmp_path / 'results' / 'experiment7-select-muon-w160'
    kept.mkdir(parents=True)
    info = dict(summary({'tied_e10': 4.5}), machine=record()['machine'])
    (kept / 'summary.json').write_text(json.dumps(info))
    xeon = selection.cpu_named(info)

    def train(rows):
        raise AssertionError(f'trained {rows}')
    for cpu in (('AMD EPYC 9R14 96-Core Processor', 'x86 family 25 model 17, bf16 native'),
                (xeon[0], 'x86 family 6 model 143, bf16 native')):
        with pytest.raises(SystemExit, match='cannot be read together'):
            selection.run_select(str(tmp_path / 'out-exp7-select-muon-w160'), ['tied_e10'], [], train=train, cpu=cpu)
    trained = []
    with pytest.raises(SystemExit):  # the stand-in trains nothing, so the stage never ends: but it did start
        selection.run_select(str(tmp_path / 'out-exp7-select-muon-w160'), ['tied_e10'], [], train=trained.append,
                             cpu=(xeon[0], ''), rounds=1)
    assert trained == [['tied_e3', 'tied_e30']]


def summary(losses, seeds=(1342, 1343, 1344)):
    """A select stage's summary: each row's mean loss (None: its runs ended without one)."""
    return dict(seeds=list(seeds), modes={row: dict(val_loss_all=dict(mean=loss)) for row, loss in losses.items()})


def bowl(best, row):
    name, key = selection.row_key(row)
    e, h = key if isinstance(key, tuple) else (key, best[1])
    return 4.5 + 0.1 * (abs(selection.rung_index(e) - selection.rung_index(best[0]))
                        + abs(selection.rung_index(h) - selection.rung_index(best[1])))


def select(tmp_path, first_rows, loss):
    """run_select from first_rows with a stand-in for ablate.py whose runs end at loss(row); the rows it trained."""
    out, trained = tmp_path / 'out', {}

    def train(rows):
        trained.update((row, loss(row)) for row in rows if row not in trained)  # ablate.py skips runs it finished
        out.mkdir(parents=True, exist_ok=True)
        (out / 'summary.json').write_text(json.dumps(summary(trained)))
    selection.run_select(str(out), first_rows, [], train=train)
    return trained


def test_the_zero_heads_neighbours_are_zero_head_rows(tmp_path):
    """An arm's neighbours are its own rows: the zero head (untied_zero) steps as untied does, two rates, and no
    normal-head row is trained for it nor read with it."""
    trained = select(tmp_path, ['untied_zero_e10_h3', 'untied_zero_e10_h10'], lambda row: bowl((3, 3), row))
    assert all(row.startswith('untied_zero_') for row in trained), trained
    assert {'untied_zero_e3_h3', 'untied_zero_e1_h3', 'untied_zero_e3_h1', 'untied_zero_e3_h10'} <= set(trained)


def test_the_stage_does_not_end_while_a_pick_lacks_a_loss_beside_it(tmp_path):
    """A neighbour whose runs end without a whole-split loss is asked for again and skipped by ablate.py: the stage
    must say so rather than call the pick confirmed. A neighbour at NaN is the worst cell, never the pick."""
    with pytest.raises(SystemExit, match='tied_e3 at full length'):
        select(tmp_path / 'a', ['tied_e10', 'tied_e30'], lambda row: None if row == 'tied_e3' else bowl((10, 1), row))
    trained = select(tmp_path / 'b', ['tied_e30', 'tied_e10'],
                     lambda row: float('nan') if row == 'tied_e30' else bowl((3, 1), row))
    _, *cells = selection.sweep_cells(str(tmp_path / 'b' / 'out'))
    assert selection.best_cells(*cells)['tied'][1] == 3 and 'tied' in trained


def test_rates_step_along_the_ladder_and_every_rate_a_row_names():
    """A rate off the ladder has no rung to step to: an error, never a neighbour a factor of 2 or 5 away. A head rate
    is a rate the row tunes wherever it is named (tied_untie's after its untying)."""
    for row in ('tied_e20', 'tied_e0.5', 'untied_e100_h2', 'tied_e0.015'):
        with pytest.raises(SystemExit, match='not on the rate ladder'):
            selection.rungs_below([row])
    assert selection.rungs_below(['tied_untie_e3_h10']) == ['tied_untie_e1_h10', 'tied_untie_e3_h3']
    assert selection.rungs_below(['tied_e3']) == ['tied'] and selection.rungs_below(['pit_e1_h3']) == [
        'pit_e0.3_h3', 'pit_e1_h1']


def test_the_select_command_refuses_a_rate_the_rows_tune():
    for flag in ('--embed_lr=0.01', '--head_lr=0.01'):
        with pytest.raises(SystemExit, match=f'select: {flag} sets a rate the rule tunes'):
            tables.main(['select', 'out-nowhere', 'tied_e10', '--optimizer=adamw', flag])


def write(folder, name, seeds, ends):
    """A summary of rows at ends {row: per-seed losses} (None: the run diverged) in folder/name."""
    folder.mkdir(parents=True, exist_ok=True)
    modes = {}
    for row, per_seed in ends.items():
        finite = [x for x in per_seed if x is not None]
        mean = sum(finite) / len(finite) if len(finite) == len(per_seed) else None
        std = (sum((x - mean) ** 2 for x in finite) / (len(finite) - 1)) ** 0.5 if mean is not None and \
            len(finite) > 1 else None
        modes[row] = dict(val_loss_all=dict(mean=mean, std=std, per_seed=per_seed),
                          **({} if mean is not None else {'diverged_at': dict(per_seed=[1] * len(per_seed))}))
    (folder / name).write_text(json.dumps(dict(seeds=seeds, modes=modes)))


def test_a_horizons_rungs_are_read_at_their_seed_whatever_diverged(tmp_path, monkeypatch):
    """The rungs beat their arm's best by more than its spread on the rungs' seed: a rung that diverged loses, a best
    that diverged there loses to any rung, a confirmation whose seeds come in another order is read at the right
    seed, and a rung of no arm in the picks is an error."""
    monkeypatch.setattr(selection, 'RESULTS', str(tmp_path / 'results'))
    picks, rungs = tmp_path / 'out-exp7-horizon-x', tmp_path / 'out-exp7-horizon-x-lower'
    write(picks, 'summary.json', [1337, 1338, 1339], {'tied_e10': [4.50, 4.52, 4.54], 'untied_e300_h10': [4.4] * 3})
    write(rungs, 'summary.json', [1337], {'tied_e3': [None], 'untied_e100_h10': [4.30], 'untied_e300_h3': [4.41]})
    assert selection.rungs_that_won(str(picks), str(rungs)) == ['untied_e100_h10']
    write(picks, 'summary.json', [1337, 1338, 1339], {'tied_e10': [None, 4.52, 4.54], 'untied_e300_h10': [4.4] * 3})
    assert selection.rungs_that_won(str(picks), str(rungs)) == ['untied_e100_h10']  # tied_e3 diverged too
    write(rungs, 'summary.json', [1337], {'tied_e3': [4.9], 'untied_e100_h10': [4.30]})
    assert selection.rungs_that_won(str(picks), str(rungs)) == ['tied_e3', 'untied_e100_h10']
    # the confirmation of untied x100, x10: seeds listed from 1339 down; on seed 1337 it ends at 4.30, its best
    write(picks, 'summary.json', [1337, 1338, 1339], {'tied_e10': [4.50, 4.52, 4.54], 'untied_e300_h10': [4.4] * 3})
    write(rungs, 'summary-confirmed.json', [1339, 1338, 1337], {'untied_e100_h10': [4.36, 4.34, 4.30]})
    write(rungs, 'summary.json', [1337], {'untied_e30_h10': [4.29], 'tied_e3': [4.51]})
    # against the confirmed best's seed-1337 end 4.30 less its spread 0.03: x30 (4.29) does not win; read at seed
    # 1339's 4.36 it would
    assert selection.rungs_that_won(str(picks), str(rungs)) == ['untied_e100_h10']
    write(rungs, 'summary.json', [1337], {'untied_e100_h10': [4.30], 'shuffle_e3': [4.0]})
    with pytest.raises(SystemExit, match='shuffle_e3, a rung of no arm'):
        selection.rungs_that_won(str(picks), str(rungs))
    write(rungs, 'summary-confirmed.json', [1337, 1338, 1340], {'untied_e100_h10': [4.36, 4.34, 4.30]})
    with pytest.raises(SystemExit, match="are not the picks'"):
        selection.rungs_that_won(str(picks), str(rungs))
    write(picks, 'summary.json', [1337, 1338], {'tied_e10': [4.50, 4.52], 'untied_e300_h10': [4.4] * 2})
    with pytest.raises(SystemExit, match='needs its three seeds'):  # the spread of two says little
        selection.rungs_that_won(str(picks), str(rungs))


def test_a_stage_refuses_settings_unlike_its_records_before_it_trains(tmp_path, monkeypatch):
    """What a select stage would train is read from its ablate.py arguments as ablate.py reads them, config file
    included, and set against its record before the first run: another length, or a rate the rows tune, is refused
    before anything trains. A setting the record predates counts at the value its runs were made with."""
    monkeypatch.setattr(selection, 'RESULTS', str(tmp_path / 'results'))
    kept = tmp_path / 'results' / 'experiment7-select-muon-w160'
    kept.mkdir(parents=True)
    info = record()
    info['config'].pop('head_init', None)  # a record from before --head_init: every head was drawn normal
    (kept / 'summary.json').write_text(json.dumps(info))
    cpu = selection.cpu_named(info)
    out = str(tmp_path / 'out-exp7-select-muon-w160')
    args = ['config/ladder_w128.py', '--optimizer=muon', '--seeds=3', '--max_iters=1376', '--warmup_iters=172',
            '--eval_interval=172', '--eval_iters=50']

    def train(rows):
        raise AssertionError(f'trained {rows}')
    for wrong, culprit in (('--max_iters=688', 'max_iters'), ('--head_init=zero', 'head_init'),
                           ('--muon_lr=0.01', 'muon_lr')):
        with pytest.raises(SystemExit, match=f'--{culprit} '):
            selection.run_select(out, ['tied_e10'], [*args, wrong], train=train, cpu=cpu)
    config = tmp_path / 'rates.py'
    config.write_text('head_lr = 0.003\n')
    for given in ([*args, '--embed_lr=0.01'], [args[0], str(config), *args[1:]]):
        with pytest.raises(SystemExit, match='sets a rate the rule tunes'):
            selection.run_select(out, ['tied_e10'], given, train=train, cpu=cpu)
    trained = []  # as the record was trained: the stage goes ahead
    with pytest.raises(SystemExit):
        selection.run_select(out, ['tied_e10'], args, train=trained.append, cpu=cpu, rounds=1)
    assert trained


def test_every_arm_is_a_family_of_its_own_and_one_cell_trains_once(tmp_path):
    """untied with input-gradient scaling is an arm of its own, stepped to a pick with a neighbour on every side;
    a cell named two ways (tied and tied_e1, pit_e1 and pit_e1_h1, tied_e3.0 and tied_e3) is trained once."""
    trained = select(tmp_path / 'igs', ['untied_igs4_e100_h3', 'untied_igs4_e300_h3'], lambda row: bowl((30, 3), row))
    _, *cells = selection.sweep_cells(str(tmp_path / 'igs' / 'out'))
    assert selection.best_cells(*cells)['untied_igs4'][1] == (30, 3)
    assert {'untied_igs4_e10_h3', 'untied_igs4_e30_h1', 'untied_igs4_e30_h10'} <= set(trained)
    rows = selection.select_rows(str(tmp_path / 'none'), ['tied_e3.0', 'tied_e3', 'tied', 'tied_e1', 'pit_e1',
                                                         'pit_e1_h1'])
    assert rows == ['tied_e3.0', 'tied', 'pit_e1', 'pit_e0.3_h1', 'pit_e1_h0.3']


def test_a_row_without_the_loss_of_every_seed_is_no_cell(tmp_path):
    """A row whose runs left a loss on some seeds only is not read as its mean over the others: the stage asks for
    it, and says it lacks a full-length loss, rather than pick it."""
    out, trained = tmp_path / 'out', {}

    def train(rows):
        trained.update((row, bowl((10, 1), row)) for row in rows if row not in trained)
        info = summary(trained)
        info['modes'].get('tied_e3', {}).setdefault('val_loss_all', {}).update(per_seed=[4.0, None, None])
        if 'tied_e3' in info['modes']:
            info['modes']['tied_e3']['val_loss_all']['mean'] = 4.0
        out.mkdir(exist_ok=True)
        (out / 'summary.json').write_text(json.dumps(info))
    with pytest.raises(SystemExit, match='tied_e3 at full length'):
        selection.run_select(str(out), ['tied_e10', 'tied_e30'], [], train=train)


def test_the_horizons_rungs_refuse_what_cannot_be_read(tmp_path, monkeypatch):
    """Two picks of one arm, a confirmed rung of no arm, rungs trained another way, a summary without seeds: each a
    one-line error; a confirmed rung the rungs' summary lacks is read from its confirmation; a pick whose spread is
    not a number bars nothing."""
    monkeypatch.setattr(selection, 'RESULTS', str(tmp_path / 'results'))
    picks, rungs = tmp_path / 'out-exp7-horizon-y', tmp_path / 'out-exp7-horizon-y-lower'
    write(picks, 'summary.json', [1337, 1338, 1339], {'tied_e10': [4.50, 4.52, 4.54], 'tied_e30': [4.6] * 3})
    write(rungs, 'summary.json', [1337], {'tied_e3': [4.3]})
    with pytest.raises(SystemExit, match='two picks of one arm'):
        selection.rungs_that_won(str(picks), str(rungs))
    write(picks, 'summary.json', [1337, 1338, 1339], {'tied_e10': [4.50, 4.52, 4.54], 'untied_e300_h10': [4.4] * 3})
    write(rungs, 'summary-confirmed.json', [1337, 1338, 1339], {'shuffle_e3': [4.0] * 3})
    with pytest.raises(SystemExit, match='shuffle_e3, a rung of no arm'):
        selection.rungs_that_won(str(picks), str(rungs))
    write(rungs, 'summary-confirmed.json', [1337, 1338, 1339], {'tied_e3': [4.30, 4.31, 4.32]})
    write(rungs, 'summary.json', [1337], {'tied_e1': [4.35], 'untied_e100_h10': [4.41]})
    assert selection.horizon_best_rows(str(picks), str(rungs)) == ['tied_e3', 'untied_e300_h10']
    for field, value, says in (('max_iters', 200, "max_iters"), ('seeds', [], 'names no seeds')):
        info = json.loads((rungs / 'summary.json').read_text())
        info.update(config=dict(max_iters=1376)) if field != 'seeds' else None
        (picks / 'summary.json').write_text(json.dumps(dict(json.loads((picks / 'summary.json').read_text()),
                                                            config=dict(max_iters=1376))))
        info['config' if field != 'seeds' else 'seeds'] = dict(max_iters=value) if field != 'seeds' else value
        (rungs / 'summary.json').write_text(json.dumps(info))
        with pytest.raises(SystemExit, match=says):
            selection.rungs_that_won(str(picks), str(rungs))
    (rungs / 'summary-confirmed.json').unlink()
    write(picks, 'summary.json', [1337, 1338, 1339], {'tied_e10': [4.50, 4.52, 4.54], 'untied_e300_h10': [4.4] * 3})
    info = json.loads((picks / 'summary.json').read_text())
    info['modes']['tied_e10']['val_loss_all'].update(per_seed=[float('nan'), 4.52, 4.54], std=float('nan'))
    (picks / 'summary.json').write_text(json.dumps(info))
    write(rungs, 'summary.json', [1337], {'tied_e3': [4.9]})
    assert selection.rungs_that_won(str(picks), str(rungs)) == ['tied_e3']  # the pick's NaN end loses to any rung


def test_the_commands_give_one_line_errors(tmp_path, capsys):
    """Too few arguments, a summary that is not one, a row ablate.py would refuse, ablate.py failing under the
    select stage: each ends in one line naming the culprit, not a traceback."""
    for argv, says in ((['lower'], 'lower needs 1 argument'), (['select', 'out'], 'select needs 2 argument'),
                       (['rungs_won', 'a'], 'rungs_won needs 2'), (['lower', 'tied_h3'], 'tied_h3, a head rate')):
        with pytest.raises(SystemExit, match=says):
            tables.main(argv)
    bad = tmp_path / 'bad'
    bad.mkdir()
    for text in ('{"modes": {', '[]', '{"seeds": [1337]}'):
        (bad / 'summary.json').write_text(text)
        with pytest.raises(SystemExit, match='summary'):
            tables.main(['best', str(bad)])
    with pytest.raises(SystemExit, match=r'ablate.py stopped \(exit code 2\)'):
        selection.run_select(str(tmp_path / 'out'), ['tied_e10'], [f'--data_dir={tmp_path / "none"}', '--seeds=1'])
