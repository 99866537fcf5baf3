"""Experiment 7's remedy stages under AdamW at width 160 and 20 layers, read from their committed summaries.

config/experiment7.sh remedy_sweep trains every remedy along its own rate in three sweeps (plain, with sqrt(d) input
scaling, untied), one seed at half length; remedy_select then takes untied's best, plain tied's and the three best
remedies to three seeds at full length and each one's better cell to five fresh seeds. python
lab/experiment7_results.py prints these tables with the experiment's others; a stage not committed yet has none.
"""

import json
import os

from lab import experiment7_tables as plan

# The three sweeps' summaries under docs/results/ (out-exp7-X there is experiment7-X), and what each adds to a row
SWEEPS = ('experiment7-rsweep-adamw-w160-coupled', 'experiment7-rsweep-adamw-w160-coupled-emb_scale',
          'experiment7-rsweep-adamw-w160-coupled-untied')
SCALED = ('', ', √d input scaling', '')


def rates(key):
    """A family's cell as its rates: ×table (and ×head, for untied and pit's S), multiples of learning_rate."""
    return ', '.join(f'×{rate:g}' for rate in (key if isinstance(key, tuple) else (key,)))


def sweep_table(results):
    """Each family's best cell over the three sweeps (whole validation split, one seed, half length): untied's,
    plain tied's, then the remedies best first, each with its cost against untied's best and its gain over plain
    tied's; under it the bigram floor, of the whole training split and of one run's windows."""
    dirs = [os.path.join(results, name) for name in SWEEPS]
    if not all(os.path.exists(os.path.join(out_dir, 'summary.json')) for out_dir in dirs):
        return []
    untied, tied, remedies = plan.ranked_families(dirs, sweeps=False)
    lines = ['| family | cells | its best rate | loss | − untied\'s best | − plain tied\'s best |',
             '|---|---:|---|---:|---:|---:|']
    for loss, k, name, cells in [untied, tied] + remedies:
        best = min(cells, key=cells.get)
        lines.append(f"| `{name}`{SCALED[k]} | {len(cells)} | {rates(best)} | {loss:.3f} | {loss - untied[0]:+.3f} | "
                     f"{loss - tied[0]:+.3f} |")
    with open(os.path.join(dirs[2], 'summary.json'), encoding='utf-8') as f:
        floor = json.load(f)['floor']
    return lines + ['', f"The bigram floor on the same validation split: {floor['bigram_whole']:.3f} fitted to the "
                        f"whole training split, {floor['bigram_run']:.3f} to one run's {floor['run_tokens']:,} tokens."]
