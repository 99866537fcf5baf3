"""The experiment docs' tables across committed summaries: each read back, a row's seeds and their mean ± std, one
row minus another with its intervals (lab/ablation_report's), and the tables printed under their headings."""

import json
import os

from lab.ablation_report import fmt_paired, mean_std, paired_interval, runs_pair, welch_interval

RESULTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'docs', 'results')


def read_summary(name, results=RESULTS, missing_ok=False):
    """The summary.json of the folder name under results (docs/results/, the committed ones); with missing_ok,
    None where there is none (a stage not run, or not committed, yet)."""
    path = os.path.join(results, name, 'summary.json')
    if missing_ok and not os.path.exists(path):
        return None
    with open(path, encoding='utf-8') as f:
        return json.load(f)


def seeds(source, row, key='val_loss_all'):
    return [v for v in source['modes'][row][key]['per_seed'] if v is not None]


def cell(source, row, key='val_loss_all'):
    mean, std = mean_std(seeds(source, row, key))
    return '–' if mean is None else f"{mean:.3f} ± {std:.3f}" if std is not None else f"{mean:.3f}"


def paired(a, b, key='val_loss_all'):
    """(source, row) minus (source, row): (difference, low, high) paired by seed where both sources ran the same
    seeds on the same evaluation batches (each seed then gives both rows the same data order), else by Welch's t."""
    (source_a, row_a), (source_b, row_b) = a, b
    if runs_pair(source_a, source_b):
        return paired_interval(source_a['modes'][row_a][key]['per_seed'], source_b['modes'][row_b][key]['per_seed'])
    return welch_interval(seeds(*a, key), seeds(*b, key))


def diff(a, b, key='val_loss_all'):
    """(source, row) minus (source, row) over seeds: the paired interval (bold where it excludes zero) with Welch's,
    which ignores the pairing, beside it; Welch's alone where the two sources ran other seeds."""
    welch = welch_interval(seeds(*a, key), seeds(*b, key)) if runs_pair(a[0], b[0]) else None
    return fmt_paired(paired(a, b, key), welch)


def print_sections(sections):
    """Each (heading, table's lines) as markdown; a section without lines (a stage not run yet) is left out."""
    for heading, lines in sections:
        if lines:
            print(heading, '', *lines, '', sep='\n')
