"""Experiment 8 (docs/experiment8.md, config/experiment8.sh): every number the page quotes is recomputed from the
committed summaries under docs/results/experiment8-* and the experiment 6 confirmations they pair with, by the lab
script that prints the page's tables (lab/zero_head.py), so a number moved on the page or in a summary fails."""
import json
import os
import re

import pytest

from conftest import REPO_ROOT, committed_summary, interval
from lab import zero_head
from lab.rate_selection import (best_rows, beyond_the_pick, load, neighbour_keys, rungs_below, rungs_that_won,
                                    summary_path, sweep_cells)

RESULTS = os.path.join(REPO_ROOT, 'docs', 'results')
PAGE = os.path.join(REPO_ROOT, 'docs', 'experiment8.md')


def page():
    with open(PAGE, encoding='utf-8') as f:
        return ' '.join(f.read().replace('−', '-').split())


@pytest.mark.parametrize('setting', list(zero_head.PAIRED_WITH))
def test_the_paired_table_is_the_committed_runs(setting, monkeypatch):
    monkeypatch.chdir(REPO_ROOT)  # the out-exp8 folders, where a machine has them, are read first
    lines = zero_head.paired_table(setting)
    text = page()
    for line in lines:
        if line.startswith('| ') and not line.startswith('| arm'):
            assert ' '.join(line.replace('−', '-').split()) in text, line
    if 'check' not in zero_head.PAIRED_WITH[setting]:
        return
    reproduced = lines[-1]
    assert reproduced.endswith((': reproduced', ": every arm is trained on the zero head's machine")), reproduced
    again, committed, moved = re.search(r'here: (\S+) against the committed (\S+) \((\S+)\)', reproduced).groups()
    assert f"ends at {again} against the committed {committed} ({moved}" in text


def test_a_check_that_misses_holds_the_pairs_only_where_every_arm_shares_the_zero_heads_machine(monkeypatch):
    """A committed run trained again here that ends more than 0.005 away breaks the pairing with the records: the
    table's pairs then hold only where every arm was trained on the zero head's machine, in its dtype."""
    monkeypatch.chdir(REPO_ROOT)
    monkeypatch.setattr(zero_head, 'REPRODUCED', -1.0)  # every check misses
    assert zero_head.paired_table('w160')[-1].endswith('NOT reproduced: the pairing does not hold')  # bf16, float32
    assert zero_head.paired_table('w160_horizon')[-1].endswith("every arm is trained on the zero head's machine")


# Each optimizer's sweep best and the cell the page names beside it, and the select stage's two rows, pick first.
QUOTED_CELLS = {'adamw': ((100.0, 3.0), (300.0, 3.0), '×300 and ×3', ('untied_e30_h3', 'untied_e100_h3')),
                'muon': ((10.0, 10.0), (10.0, 3.0), '×10 and ×3', ('untied_e10_h3', 'untied_e10_h10')),
                'w160': ((1000.0, 10.0), (3000.0, 10.0), '×3000 and ×10', ('untied_e300_h10', 'untied_e1000_h10'))}


@pytest.mark.parametrize('optimizer', QUOTED_CELLS)
def test_the_sweep_and_select_numbers_are_their_summaries(optimizer):
    best, beside, words, (pick, other) = QUOTED_CELLS[optimizer]
    _, sweep, _, _ = sweep_cells(os.path.join(RESULTS, f'experiment8-sweep-{optimizer}'))
    assert min(sweep, key=sweep.get) == best
    text = page()
    assert f"({sweep[best]:.3f} at half length; {words}: {sweep[beside]:.3f})" in text
    with open(os.path.join(RESULTS, f'experiment8-select-{optimizer}', 'summary.json'), encoding='utf-8') as f:
        select = {mode: cells['val_loss_all']['mean'] for mode, cells in json.load(f)['modes'].items()}
    assert min(select, key=select.get) == pick
    assert f"`{pick}` ends at {select[pick]:.3f} and `{other}` at {select[other]:.3f}" in text


@pytest.mark.parametrize('setting, claim, said', [('adamw', '14', 'against a zero head, each at its best, {} (AdamW'),
                                                 ('muon', '15', 'against a zero head {} (4 layers, BPE'),
                                                 ('w160', '18 (AdamW)', 'against a zero head {}, one epoch'),
                                                 ('w160_horizon', '18 (AdamW)', 'against a zero head [^;|]*, one epoch {}')])
def test_the_findings_rows_quote_the_zero_head_as_the_paired_table_gives_it(setting, claim, said, monkeypatch):
    monkeypatch.chdir(REPO_ROOT)
    row = next(line for line in zero_head.paired_table(setting) if line.startswith('| tied at its best'))
    difference = row.rsplit('|', 2)[1].strip().strip('*').replace('-', '−')
    with open(os.path.join(REPO_ROOT, 'docs', 'findings.md'), encoding='utf-8') as f:
        (finding,) = [line for line in f if line.startswith(f'| {claim} |')]
    assert re.search(said.replace('(', r'\(').format(re.escape(difference)), finding), (said, difference)


# The first pass's picks, superseded by the select rule and kept as records: the page quotes each in a sentence, its
# mean on the fresh seeds and tied's paired difference against it, from the zero head's record and the tied run it
# was paired with.
FIRST_PASS = {'adamw': ('experiment8-fresh-adamw-e100_h3', 'experiment6-confirm-adamw', 'tied_e10'),
              'muon': ('experiment8-fresh-muon', 'experiment6-confirm-muon-split', 'tied_e10'),
              'w160': ('experiment8-fresh-w160-e1000_h10', 'experiment7-rfresh-adamw-w160-coupled', 'tied_e30')}


@pytest.mark.parametrize('setting', FIRST_PASS)
def test_the_first_passes_picks_are_quoted_as_their_records_give_them(setting):
    record, tied_record, tied_mode = FIRST_PASS[setting]
    zero, tied = committed_summary(record), committed_summary(tied_record)
    assert zero['seeds'] == tied['seeds']
    (zero_mode, cells), = zero['modes'].items()
    difference = interval((tied, tied_mode), (zero, zero_mode)).strip('*')
    quoted = (f"[record](results/{record}/summary.md): {cells['val_loss_all']['mean']:.3f} on the fresh seeds, "
              f"{difference} for tied")
    assert quoted in page(), quoted


def test_muons_float32_pick_is_its_records_lowest_with_a_run_on_every_side():
    """Muon's zero head re-selected in float32: the pick the page names is the select record's lowest cell, each of
    its neighbours one rung away on either rate has a full-length run, and the page quotes every one of their means;
    the fresh record trained that pick."""
    _, untied, _, _ = sweep_cells(os.path.join(RESULTS, 'experiment8-select-muon-float32'), committed=True)
    pick = min(untied, key=untied.get)
    assert beyond_the_pick(untied, pick) == []
    (row,) = best_rows({pick: 0}, {})
    assert list(committed_summary('experiment8-fresh-muon-float32')['modes']) == [row]
    text = page()
    paragraph = text[text.index('`select_float32 muon`'):text.index('[record](results/experiment8-fresh-muon-float32')]
    table, head = pick
    assert f"`{row}` (table ×{table:g}, head ×{head:g}) ends at {untied[pick]:.3f}" in paragraph, row
    for neighbour in neighbour_keys(pick):
        assert f"{untied[neighbour]:.3f}" in paragraph, neighbour


def test_the_zero_heads_horizon_is_read_at_the_best_confirmed_and_says_where_a_rung_below_it_won(monkeypatch):
    """The horizon at its own length: every rung below the pick has its seed-1337 run, which the page quotes; those
    that beat the pick by more than its seed spread are on its three seeds; the table reads the lowest three-seed mean
    of the pick and the rungs confirmed; and where a rung that won is not confirmed, or one below the read best is
    untried or beats it by more than its own spread, the page and the findings say the rate is not yet settled, and
    otherwise they say it is the zero head's rate for that length."""
    monkeypatch.chdir(REPO_ROOT)  # the records, as CI has them
    pick, rungs = committed_summary('experiment8-horizon-w160'), committed_summary('experiment8-horizon-w160-lower')
    confirmed = committed_summary('experiment8-horizon-w160-lower-confirmed')
    won = rungs_that_won('out-exp8-horizon-w160', 'out-exp8-horizon-w160-lower')
    (pick_row, pick_cells), = pick['modes'].items()
    assert set(rungs_below([pick_row])) <= set(rungs['modes'])
    assert set(won) & set(rungs_below([pick_row])) <= set(confirmed['modes']) <= set(won)
    assert confirmed['seeds'] == pick['seeds']
    means = {pick_row: pick_cells['val_loss_all']['mean'],
             **{row: cells['val_loss_all']['mean'] for row, cells in confirmed['modes'].items()}}
    read = load(summary_path(zero_head.PAIRED_WITH['w160_horizon']['runs']))
    best = min(means, key=means.get)
    cells = read['modes'][best]
    assert best == min(read['modes'], key=lambda row: read['modes'][row]['val_loss_all']['mean'])
    assert read['seeds'] == pick['seeds']
    text = page()
    assert f"more than its seed spread ({pick_cells['val_loss_all']['std']:.3f})" in text
    for row, rung in rungs['modes'].items():
        assert f"{rung['val_loss_all']['per_seed'][0]:.3f}" in text, row
    end = cells['val_loss_all']['per_seed'][read['seeds'].index(1337)]
    unsettled = [row for row in rungs_below([best]) if row not in rungs['modes']
                 or rungs['modes'][row]['val_loss_all']['per_seed'][0] < end - cells['val_loss_all']['std']]
    unsettled += [row for row in won if row not in confirmed['modes']]
    with open(os.path.join(REPO_ROOT, 'docs', 'findings.md'), encoding='utf-8') as f:
        findings = ' '.join(f.read().split())
    assert ('not yet settled' in text) == bool(unsettled), unsettled
    assert ("after one epoch, with the zero head's rate not yet settled" in findings) == bool(unsettled), unsettled
    if not unsettled:  # every rung around the best is run and lost: the pages read the zero head at its own rate
        assert "after one epoch, each at its rate for that length" in findings
