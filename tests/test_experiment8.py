"""Experiment 8 (docs/experiment8.md, config/experiment8.sh): every number the page quotes is recomputed from the
committed summaries under docs/results/experiment8-* and the experiment 6 confirmations they pair with, by the lab
script that prints the page's tables (lab/zero_head.py), so a number moved on the page or in a summary fails."""
import json
import os
import re

import pytest

from conftest import REPO_ROOT
from lab import zero_head
from lab.experiment7_tables import sweep_cells

RESULTS = os.path.join(REPO_ROOT, 'docs', 'results')
PAGE = os.path.join(REPO_ROOT, 'docs', 'experiment8.md')


def page():
    with open(PAGE, encoding='utf-8') as f:
        return ' '.join(f.read().replace('−', '-').split())


def measured(optimizer):
    return os.path.exists(os.path.join(RESULTS, f'experiment8-fresh-{optimizer}', 'summary.json'))


@pytest.mark.parametrize('optimizer', ['adamw', 'muon'])
def test_the_paired_table_is_the_committed_runs(optimizer, monkeypatch):
    if not measured(optimizer):
        assert f'## {optimizer.replace("adamw", "AdamW").replace("muon", "Muon")} Not yet measured' in page()
        return
    monkeypatch.chdir(REPO_ROOT)  # the out-exp8 folders, where a machine has them, are read first
    lines = zero_head.paired_table(optimizer)
    text = page()
    for line in lines:
        if line.startswith('| ') and not line.startswith('| arm'):
            assert ' '.join(line.replace('−', '-').split()) in text, line
    reproduced = lines[-1]
    assert reproduced.endswith(': reproduced'), reproduced
    again, committed, moved = re.search(r'here: (\S+) against the committed (\S+) \((\S+)\)', reproduced).groups()
    assert f"ends at {again} against the committed {committed} ({moved}" in text


def test_the_adamw_sweep_and_select_numbers_are_their_summaries():
    _, sweep, _, _ = sweep_cells(os.path.join(RESULTS, 'experiment8-sweep-adamw'))
    best = min(sweep, key=sweep.get)
    assert best == (100.0, 3.0)
    text = page()
    assert f"({sweep[best]:.3f} at half length; ×300 and ×3: {sweep[(300.0, 3.0)]:.3f})" in text
    with open(os.path.join(RESULTS, 'experiment8-select-adamw', 'summary.json'), encoding='utf-8') as f:
        select = {mode: cells['val_loss_all']['mean'] for mode, cells in json.load(f)['modes'].items()}
    assert min(select, key=select.get) == 'untied_e100_h3'
    assert (f"`untied_e100_h3` ends at {select['untied_e100_h3']:.3f} and `untied_e300_h3` at "
            f"{select['untied_e300_h3']:.3f}") in text


def test_findings_row_14_quotes_the_zero_head_as_the_paired_table_gives_it(monkeypatch):
    monkeypatch.chdir(REPO_ROOT)
    row = next(line for line in zero_head.paired_table('adamw') if line.startswith('| tied at its best'))
    difference = row.rsplit('|', 2)[1].strip().replace('-', '−')
    with open(os.path.join(REPO_ROOT, 'docs', 'findings.md'), encoding='utf-8') as f:
        (finding,) = [line for line in f if line.startswith('| 14 |')]
    assert f"against a zero head {difference} (AdamW" in finding
