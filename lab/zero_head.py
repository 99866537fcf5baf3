"""Experiment 8's paired tables (config/experiment8.sh): the zero head's pick against tied and the normal head, each at
its best, seed by seed on the committed runs' seeds, beside the floor; and whether this machine reproduces a run it
is paired with. The pairs: experiment 6's confirmation for adamw, its float32 re-selection for muon, experiment 7's
remedy stages for w160, and over one epoch tied at experiment 7's rate trained on the zero head's machine.

    python lab/zero_head.py [adamw|muon|w160|w160_horizon ...]  # out-exp8 folders where they are, else docs/results/
"""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from lab.ablation_report import fmt_interval, paired_interval  # noqa: E402
from lab.rate_selection import RESULTS, cpu_differences, cpu_named, load, summary_path  # noqa: E402

# What each setting's zero head is paired with: the committed five-seed runs of its arms (summary, mode, label), tied's
# first, and the run its check stage trains again here (summary, mode) on their first seed
NORMAL = 'untied, head N(0, σ²), at its best'
PAIRED_WITH = {
    'adamw': dict(arms=[('experiment6-confirm-adamw', 'tied_e10', 'tied at its best'),
                        ('experiment6-confirm-adamw', 'untied_e10_h3', NORMAL)],
                  check=('experiment6-confirm-adamw', 'tied_e10')),
    # Muon: each arm re-selected, every run in float32 on one machine (nothing in bf16 to reproduce, so no check); the
    # first pass's bf16 pair (experiment6-confirm-muon-split, experiment8-fresh-muon) is kept as records
    'muon': dict(runs='out-exp8-fresh-muon-float32',
                 arms=[('experiment6-confirm-muon-float32', 'tied_e3', 'tied at its best'),
                       ('experiment6-confirm-muon-float32', 'untied_e1_h3', NORMAL)]),
    # claim 18's w160 under AdamW: experiment 7's remedy stages, fresh seeds 1342-1346, the √d rows with --emb_scale
    'w160': dict(arms=[('experiment7-rfresh-adamw-w160-coupled', 'tied_e30', 'tied at its best'),
                       ('experiment7-rfresh-adamw-w160-coupled-emb_scale', 'proj_e10', '`proj` with √d at its best'),
                       ('experiment7-rfresh-adamw-w160-coupled-untied', 'untied_e100_h3', NORMAL),
                       ('experiment7-rfresh-adamw-w160-coupled-emb_scale-untied', 'untied_e30_h10',
                        'untied, head N(0, σ²), with √d, at its best')],
                 # the pairing check ran at the normal head's first-pass pick, before the select rule moved it
                 check=('experiment7-rfresh-adamw-w160-coupled-untied-e100_h10', 'untied_e100_h10')),
    # the same over one epoch, seeds 1337-1339, float32, tied at its rate for that length (experiment 7's horizon
    # rungs) trained on the zero head's machine: the check of experiment 7's tied run missed there. The zero head is
    # the rung below its pick that won, on three seeds (horizon_confirm's summary-confirmed.*, kept as its own record)
    'w160_horizon': dict(runs='out-exp8-horizon-w160-lower-confirmed',
                         arms=[('experiment8-horizon-w160-tied', 'tied_e10', 'tied at its best'),
                               ('experiment8-horizon-w160-sqrt_d', 'proj_e3', '`proj` with √d at its best'),
                               ('experiment8-horizon-w160-sqrt_d', 'untied_e30_h3',
                                'untied, head N(0, σ²), with √d, at its best')],
                         check=('experiment7-rhorizon-adamw-w160-coupled-lower', 'tied_e10')),
}
KEY = 'val_loss_all'  # the whole validation split after the last step
REPRODUCED = 0.005    # nats: a committed run trained again here within this counts as the same run
FIRST = 'run its stage first (bash config/experiment8.sh)'  # where a summary is missing


def machine(summary):
    """Where a summary's runs were trained, coarsely: its platform, kernel build and CPU count, its CPU's name and its
    dtype. Older records name the CPU only, and two AMD EPYC kinds share a name: it tells machines apart where they
    differ, not that they match; same_machine adds the kind where both lines name it."""
    return summary['machine'].split(' CPUs (')[0], cpu_named(summary)[0], summary['trained_on']


def same_machine(a, b):
    """Whether two summaries' runs were trained on one machine, as far as their lines tell: the kind is compared
    where both name it (rate_selection.cpu_differences, the select rule's own test)."""
    return machine(a) == machine(b) and not cpu_differences(cpu_named(a), cpu_named(b))


def paired_table(setting):
    """The lines of one setting's table: a row per arm, its mean and its difference from the zero head."""
    arms, check_run = PAIRED_WITH[setting]['arms'], PAIRED_WITH[setting].get('check')
    summaries = {name: load(os.path.join(RESULTS, name, 'summary.json'), FIRST) for name, _, _ in arms}
    fresh = load(summary_path(PAIRED_WITH[setting].get('runs', f'out-exp8-fresh-{setting}')), FIRST)
    for name, summary in summaries.items():
        if fresh['seeds'] != summary['seeds']:
            raise SystemExit(f"the zero head's seeds {fresh['seeds']} are not {name}'s {summary['seeds']}: nothing "
                             f"to pair")
    # a confirmation of several rungs on the same seeds (horizon_confirm run again) is read at its lowest mean
    pick, cells = min(fresh['modes'].items(), key=lambda item: item[1][KEY]['mean'])
    zero = cells[KEY]['per_seed']
    lines = [f"{setting}: the zero head at its pick `{pick}`, seeds {', '.join(map(str, fresh['seeds']))}, paired "
             f"with {', '.join(summaries)}; the floor, a bigram model counted on the whole training split: "
             f"{summaries[arms[0][0]]['floor']['bigram_whole']:.3f}",
             '', '| arm | val loss, whole split | minus the zero head, paired, 95 % |', '|---|---:|---:|',
             f"| untied, zero head (`{pick}`) | {sum(zero) / len(zero):.3f} | |"]
    for name, mode, label in arms:
        values = summaries[name]['modes'][mode][KEY]['per_seed']
        lines.append(f"| {label} (`{mode}`) | {sum(values) / len(values):.3f} | "
                     f"{fmt_interval(*paired_interval(values, zero))} |")
    if check_run is None:
        return lines
    check_name, check_mode = check_run
    again = load(summary_path(f'out-exp8-check-{setting}'), FIRST)['modes'][check_mode][KEY]['per_seed'][0]
    if check_name not in summaries:  # a check run at a record the table no longer reads (a superseded pick)
        summaries[check_name] = load(os.path.join(RESULTS, check_name, 'summary.json'), FIRST)
    committed = summaries[check_name]['modes'][check_mode][KEY]['per_seed'][0]
    if abs(again - committed) <= REPRODUCED:
        verdict = 'reproduced'
    elif all(same_machine(summary, fresh) for name, summary in summaries.items() if name != check_name):
        verdict = 'not reproduced: every arm is trained on the zero head\'s machine'
    else:
        verdict = 'NOT reproduced: the pairing does not hold'
    lines += ['', f"{check_mode}, seed {fresh['seeds'][0]}, trained again here: {again:.4f} against the committed "
                  f"{committed:.4f} ({again - committed:+.4f}): {verdict}"]
    return lines


def main(argv):
    for optimizer in argv or list(PAIRED_WITH):
        print(*paired_table(optimizer), '', sep='\n')


if __name__ == '__main__':
    main(sys.argv[1:])
