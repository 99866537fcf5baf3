"""Experiment 8 (docs/experiment8.md, config/experiment8.sh): every number the page quotes is recomputed from the
committed summaries under docs/results/experiment8-* and the experiment 6 confirmations they pair with, by the lab
script that prints the page's tables (lab/zero_head.py), so a number moved on the page or in a summary fails."""
import json
import os
import re

import pytest

from conftest import REPO_ROOT, committed_summary, interval
from lab import zero_head
from lab.experiment7_tables import best_rows, beyond_the_pick, neighbour_keys, sweep_cells

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
    assert reproduced.endswith(': reproduced'), reproduced
    again, committed, moved = re.search(r'here: (\S+) against the committed (\S+) \((\S+)\)', reproduced).groups()
    assert f"ends at {again} against the committed {committed} ({moved}" in text


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


@pytest.mark.parametrize('optimizer, claim, after', [('adamw', '14', ' (AdamW'), ('muon', '15', ' (4 layers, BPE'),
                                                     ('w160', '18 (AdamW)', ' (w160')])
def test_the_findings_rows_quote_the_zero_head_as_the_paired_table_gives_it(optimizer, claim, after, monkeypatch):
    monkeypatch.chdir(REPO_ROOT)
    row = next(line for line in zero_head.paired_table(optimizer) if line.startswith('| tied at its best'))
    difference = row.rsplit('|', 2)[1].strip().strip('*').replace('-', '−')
    with open(os.path.join(REPO_ROOT, 'docs', 'findings.md'), encoding='utf-8') as f:
        (finding,) = [line for line in f if line.startswith(f'| {claim} |')]
    assert re.search(rf"against a zero head(, each at its best,)? {re.escape(difference + after)}", finding)


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
