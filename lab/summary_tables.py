"""The experiment docs' tables across committed summaries: each read back, a row's seeds and their mean ± std, one
row minus another with its intervals (lab/ablation_report's), and the tables printed under their headings.

A row is named (summary, row): a summary.json as read_summary returns it and one of its modes."""

import json
import os

RESULTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'docs', 'results')


def read_summary(folder, missing_ok=False):
    """folder's summary.json; with missing_ok, None where it has none (a stage not run, or not committed, yet)."""
    path = os.path.join(folder, 'summary.json')
    if missing_ok and not os.path.exists(path):
        return None
    with open(path, encoding='utf-8') as f:
        return json.load(f)


def seeds(source, row, key='val_loss_all'):
    return [v for v in source['modes'][row][key]['per_seed'] if v is not None]


def seed_mean(source, row, key='val_loss_all'):
    values = seeds(source, row, key)
    return sum(values) / len(values)


def cell(source, row, key='val_loss_all'):
    from lab.ablation_report import mean_std  # it brings torch: lab/experiment7_tables.py's plan commands do without
    mean, std = mean_std(seeds(source, row, key))
    return '–' if mean is None else f"{mean:.3f} ± {std:.3f}" if std is not None else f"{mean:.3f}"


def paired(a, b, key='val_loss_all'):
    """(source, row) minus (source, row): (difference, low, high) paired by seed where both sources ran the same
    seeds on the same evaluation batches (each seed then gives both rows the same data order), else by Welch's t."""
    from lab.ablation_report import paired_interval, runs_pair, welch_interval
    (source_a, row_a), (source_b, row_b) = a, b
    if runs_pair(source_a, source_b):
        return paired_interval(source_a['modes'][row_a][key]['per_seed'], source_b['modes'][row_b][key]['per_seed'])
    return welch_interval(seeds(*a, key), seeds(*b, key))


def diff(a, b, key='val_loss_all'):
    """(source, row) minus (source, row) over seeds: the paired interval (bold where it excludes zero) with Welch's,
    which ignores the pairing, beside it; Welch's alone where the two sources ran other seeds."""
    from lab.ablation_report import fmt_paired, runs_pair, welch_interval
    welch = welch_interval(seeds(*a, key), seeds(*b, key)) if runs_pair(a[0], b[0]) else None
    return fmt_paired(paired(a, b, key), welch)


def lowest(cells):
    """The key of cells ({rate or (table rate, head rate): loss}) with the lowest loss: a sweep's best cell."""
    return min(cells, key=cells.get)


def print_sections(sections):
    """Each (heading, table's lines) as markdown; a section without lines (a stage not run yet) is left out."""
    for heading, lines in sections:
        if lines:
            print(heading, '', *lines, '', sep='\n')
