"""Experiment 8's paired table (config/experiment8.sh): the zero head's pick on the five seeds of experiment 6's
confirmation, against tied at its best and untied (its head drawn N(0, sigma^2)) at its best, seed by seed, beside
the floor that counting reaches on the same text; and whether this machine reproduces the runs it is paired with.

    python lab/zero_head.py      # from the out-exp8 folders where the runs are, else their copies under docs/results/
"""

import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from lab.ablation_report import fmt_interval, paired_interval  # noqa: E402
from lab.experiment7_tables import RESULTS, summary_path  # noqa: E402

# The committed five-seed confirmation each optimizer's zero head is paired with: (summary, untied's best, tied's best)
PAIRED_WITH = {'adamw': ('experiment6-confirm-adamw', 'untied_e30_h3', 'tied_e10'),
               'muon': ('experiment6-confirm-muon-split', 'untied_e10_h3', 'tied_e10')}
KEY = 'val_loss_all'  # the whole validation split after the last step
REPRODUCED = 0.005    # nats: a committed run trained again here within this counts as the same run


def load(path):
    if not os.path.exists(path):
        raise SystemExit(f"{path} is missing: run its stage first (bash config/experiment8.sh)")
    with open(path, encoding='utf-8') as f:
        return json.load(f)


def paired_table(optimizer):
    """The lines of one optimizer's table: a row per arm, its mean and its difference from the zero head."""
    name, untied, tied = PAIRED_WITH[optimizer]
    base = load(os.path.join(RESULTS, name, 'summary.json'))
    fresh = load(summary_path(f'out-exp8-fresh-{optimizer}'))
    if fresh['seeds'] != base['seeds']:
        raise SystemExit(f"the zero head's seeds {fresh['seeds']} are not {name}'s {base['seeds']}: nothing to pair")
    (pick, cells), = fresh['modes'].items()
    zero = cells[KEY]['per_seed']
    check = load(summary_path(f'out-exp8-check-{optimizer}'))
    again, committed = check['modes'][tied][KEY]['per_seed'][0], base['modes'][tied][KEY]['per_seed'][0]
    lines = [f"{optimizer}: the zero head at its pick `{pick}`, seeds {', '.join(map(str, fresh['seeds']))}, paired "
             f"with {name}; the floor, a bigram model counted on the whole training split: "
             f"{base['floor']['bigram_whole']:.3f}",
             '', '| arm | val loss, whole split | minus the zero head, paired, 95 % |', '|---|---:|---:|',
             f"| untied, zero head (`{pick}`) | {sum(zero) / len(zero):.3f} | |"]
    for label, mode in ((f"tied at its best (`{tied}`)", tied), (f"untied, head N(0, σ²), at its best (`{untied}`)",
                                                                 untied)):
        values = base['modes'][mode][KEY]['per_seed']
        lines.append(f"| {label} | {sum(values) / len(values):.3f} | {fmt_interval(*paired_interval(values, zero))} |")
    verdict = 'reproduced' if abs(again - committed) <= REPRODUCED else 'NOT reproduced: the pairing does not hold'
    lines += ['', f"{tied}, seed {base['seeds'][0]}, trained again here: {again:.4f} against the committed {committed:.4f}"
                  f" ({again - committed:+.4f}): {verdict}"]
    return lines


def main(argv):
    for optimizer in argv or list(PAIRED_WITH):
        print(*paired_table(optimizer), '', sep='\n')


if __name__ == '__main__':
    main(sys.argv[1:])
