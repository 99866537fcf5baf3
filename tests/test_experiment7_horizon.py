"""Experiment 7's horizon under Muon (one epoch of the works, w128 and w160) read at each arm's rate for that length
(config/experiment7.sh horizon, horizon_lower, horizon_best): the page's table gives every size at its 200-step picks
and, where a rung lower won over the epoch, at the rungs that won, each number its record's; findings row 18 (Muon)
quotes the cost at the rates the records settle on, and says where a size's rungs are not yet through."""

import os

from conftest import REPO_ROOT, as_prose, committed_summary, curve_means, doc_table, findings_row, interval, rates_of
from lab import experiment7_tables as tables
from lab import rate_selection as selection

DOC = os.path.join('docs', 'experiment7.md')
SIZES = ('w128', 'w160')
STEPS = (172, 688, 1376)


def committed(name):
    return os.path.exists(os.path.join(REPO_ROOT, 'docs', 'results', name, 'summary.json'))


def readings(size):
    """(record, label, rows) for each reading of a size's horizon the records hold, and whether a rung won over the
    epoch whose three seeds are not yet committed: the 200-step picks; and, where horizon_lower's rungs are committed
    and an arm's rung beat its pick, horizon_best's record of the two arms at the rows that won."""
    at = f'experiment7-horizon-muon-{size}'
    picks = list(committed_summary(at)['modes'])
    found = [(at, '200-step picks', picks)]
    if not committed(f'{at}-lower'):
        return found, True
    rows = selection.horizon_best_rows(f'out-exp7-horizon-muon-{size}', f'out-exp7-horizon-muon-{size}-lower')
    if rows == picks:
        return found, False
    if not committed(f'{at}-best'):
        return found, True
    assert list(committed_summary(f'{at}-best')['modes']) == rows, size
    return found + [(f'{at}-best', "the epoch's rates", rows)], False


def test_the_muon_horizon_table_gives_each_reading_its_records_numbers():
    """Each size at its 200-step picks and, where an arm's rung lower won over the epoch, at the epoch's rates:
    tied - untied at steps 172, 688 and 1,376 (the mean over seeds of the 50-batch evaluations, curves.csv), each
    arm's whole-split end (mean ± std) and the paired cost, in that order; a reading the records hold and the table
    lacks (or the reverse) fails."""
    expected = []
    for size in SIZES:
        for record, label, (untied, tied) in readings(size)[0]:
            summary = committed_summary(record)
            assert summary['seeds'] == [1337, 1338, 1339] and summary['max_iters'] == 1376, record
            along = curve_means(record, tied, STEPS), curve_means(record, untied, STEPS)
            ends = [summary['modes'][row]['val_loss_all'] for row in (untied, tied)]
            expected.append([f"`{size}`, {label} ({rates_of(untied)}; {rates_of(tied)})",
                             *(f'{along[0][step] - along[1][step]:+.3f}' for step in STEPS),
                             *(f"{end['mean']:.3f} ± {end['std']:.3f}" for end in ends),
                             interval((summary, tied), (summary, untied))])
    assert doc_table(DOC, '| size, rates', after='### The horizon: one epoch (Muon') == expected


def test_findings_row_18_under_muon_quotes_the_horizon_at_the_rates_the_records_settle_on():
    """The row's one-epoch costs are each size's last reading (the epoch's rates where a rung won), named by size;
    a size whose rungs are not committed, or whose rung won without its three seeds, is said to be not yet settled;
    the records' notes give every rung's seed-1337 end."""
    row = findings_row('18 (Muon)')
    for size in SIZES:
        found, pending = readings(size)
        record, label, (untied, tied) = found[-1]
        summary = committed_summary(record)
        said = f"{as_prose(interval((summary, tied), (summary, untied)))} ({size}"
        assert said in row, said
        assert (f'{size} not yet settled' in row) == pending, size
    with open(os.path.join(REPO_ROOT, 'docs', 'results', 'experiment7', 'notes.md'), encoding='utf-8') as f:
        notes = f.read().split("## The Muon horizon's rungs")[1].split('\n## ')[0]
    for size in SIZES:
        if committed(f'experiment7-horizon-muon-{size}-lower'):
            lower = committed_summary(f'experiment7-horizon-muon-{size}-lower')
            for name, cells in lower['modes'].items():
                said = f"| `{size}` | `{name}` | {cells['val_loss_all']['per_seed'][0]:.3f} |"
                assert said in notes, said


def test_the_epochs_rates_have_a_worse_run_a_rung_below_them_on_every_rate():
    """Each arm's rate for the epoch (the -best record's rows) won a rung below its 200-step pick; a rung lower again
    on every rate it tunes (the -lower2 record, seed 1337, the same machine) must end above that rate's own
    seed-1337 run, or the epoch's rate is not yet its best and the page's 'a rung lower again lost' is false."""
    for size in ('w128', 'w160'):
        at = f'experiment7-horizon-muon-{size}'
        best, lower, lower2 = (committed_summary(at + suffix) for suffix in ('-best', '-lower', '-lower2'))
        assert selection.cpu_differences(selection.cpu_named(lower), selection.cpu_named(lower2)) == [], size
        ends = {row: cells['val_loss_all']['mean'] for record in (lower, lower2) for row, cells in record['modes'].items()}
        for row in best['modes']:
            below = selection.rungs_below([row])
            assert below and all(rung in lower2['modes'] for rung in below), (size, row, below)
            assert all(ends[rung] > ends[row] for rung in below), (size, row, {r: ends[r] for r in below})
