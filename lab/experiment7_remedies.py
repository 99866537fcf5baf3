"""Experiment 7's remedy stages under AdamW at width 160 and 20 layers, read from their committed summaries.

config/experiment7.sh remedy_sweep trains every remedy along its own rate in three sweeps (plain, with sqrt(d) input
scaling, untied), one seed at half length; remedy_select then takes untied's best, plain tied's and the three best
remedies to three seeds at full length and each one's better cell to five fresh seeds; remedy_horizon runs the
best three over one epoch, and remedy_depth the best remedy at 4 layers. python lab/experiment7_results.py prints
these tables with the experiment's others; a stage not committed yet has none.
"""

import csv
import json
import os

from lab import experiment7_tables as plan
from lab.ablation_figure import row_loss
from lab.ablation_grid import parse_row
from lab.ablation_report import fmt_paired, mean_std, paired_interval
from lab.summary_tables import cell, diff, read_summary

# The three sweeps' summaries under docs/results/ (out-exp7-X there is experiment7-X), and what each adds to a row
SWEEPS = ('experiment7-rsweep-adamw-w160-coupled', 'experiment7-rsweep-adamw-w160-coupled-emb_scale',
          'experiment7-rsweep-adamw-w160-coupled-untied')
SCALED = ('', ', √d input scaling', '', ', √d input scaling')
SELECT = tuple(name.replace('-rsweep-', '-rselect-') for name in SWEEPS)  # three seeds at full length, 1337 on
FRESH = tuple(name.replace('-rsweep-', '-rfresh-') for name in SWEEPS)    # five fresh seeds, 1342 on
HORIZON = tuple(name.replace('-rsweep-', '-rhorizon-') for name in SWEEPS)  # one epoch, three seeds, 1337 on
# untied with sqrt(d) input scaling taken through the same two stages (remedy_untied_sqrt_d), a fourth folder in the
# picks table: whether proj with sqrt(d)'s edge over untied is sqrt(d)'s own
UNTIED_SQRT_D = tuple(name + '-emb_scale-untied' for name in (SELECT[0], FRESH[0], HORIZON[0]))
SHALLOW_SWEEPS = tuple(name.replace('-w160-', '-w160_shallow-') for name in SWEEPS)  # the remedy's rate at 4 layers
DEPTH = tuple(name.replace('-rsweep-', '-rdepth-') for name in SHALLOW_SWEEPS)  # 4 layers, five fresh seeds, 1342 on


def untied_pick(results):
    """(folder index, row) of untied's pick: its lowest cell on the three choosing seeds, without sqrt(d) input
    scaling (SELECT[2]) or with it (UNTIED_SQRT_D[0]): each mode at its best; (2, None) before either is in."""
    cells = []
    for k, name in ((2, SELECT[2]), (3, UNTIED_SQRT_D[0])):
        info = read_summary(name, results, missing_ok=True)
        cells += [(row_loss(v), k, row) for row, v in (info['modes'] if info else {}).items()
                  if plan.family(row) == 'untied']
    return min(cells, default=(None, 2, None))[1:]


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


def selection_table(results):
    """The picks without the winner's curse: each family's two best sweep cells at full length on three seeds (and
    the rungs the select stage added beyond a pick at their edge), its pick (the lowest mean), and that pick on five
    fresh seeds that played no part in choosing, minus untied's pick and plain tied's on the same seeds (paired: a
    seed gives every run its data order and evaluation batches). Untied with sqrt(d) has folders of its own; untied's
    pick is the lower of the two forms' picks on the three seeds.
    A family's row appears once its select stage is committed; its fresh columns stay '–' until its fresh seeds
    are, and so does a cost against a pick whose fresh seeds are not. Best first: by the fresh seeds once every
    family has them, by the three seeds until then."""
    picked, fresh = ([read_summary(name, results, missing_ok=True) for name in names]
                     for names in (SELECT + UNTIED_SQRT_D[:1], FRESH + UNTIED_SQRT_D[1:]))
    families = []  # (out dir's index, family, its cells best first: the first is its pick)
    for k, info in enumerate(picked):
        for name in dict.fromkeys(plan.family(row) for row in (info['modes'] if info else ())):
            families.append((k, name, sorted((row for row in info['modes'] if plan.family(row) == name),
                                             key=lambda row: row_loss(info['modes'][row]))))
    if not families:
        return []

    def reported(k, cells):  # the pick on its fresh seeds, where they are committed
        return (fresh[k], cells[0]) if fresh[k] and cells[0] in fresh[k]['modes'] else None
    k, row = untied_pick(results)
    untied = reported(k, [row]) if row else None
    tied = next((reported(k, cells) for k, name, cells in families if name == 'tied' and k == 0), None)
    final = all(reported(k, cells) for k, _, cells in families)
    lines = ['| family | the cells it tried, three seeds, full length | five fresh seeds | − untied\'s pick | '
             '− plain tied\'s pick |', '|---|---|---:|---:|---:|']
    by_pick = lambda f: row_loss((fresh if final else picked)[f[0]]['modes'][f[2][0]])  # a diverged pick: last
    for k, name, cells in sorted(families, key=by_pick):
        mine = reported(k, cells)
        tried = '; '.join(f"{row}{' (the pick)' if row == cells[0] else ''} {cell(picked[k], row)}" for row in cells)
        against = ['–' if None in (mine, other) or other == mine else diff(mine, other) for other in (untied, tied)]
        lines.append(f"| `{name}`{SCALED[k]} | {tried} | {cell(*mine) if mine else '–'} | {' | '.join(against)} |")
    return lines


def horizon_curves(results):
    """(summary of untied's run, {label: {iteration: per-seed losses}}, {label: (summary, row)}) of the horizon
    under AdamW (config/experiment7.sh remedy_horizon, and remedy_untied_sqrt_d's): untied's pick (untied_pick)
    first, then the others, from each folder's curves.csv, iteration 0 left out; the third gives each label's end on
    the whole split. None until untied's pick's and another's are in."""
    (pick, _), untied, curves, ends = untied_pick(results), None, {}, {}
    for k, name in enumerate(HORIZON + UNTIED_SQRT_D[2:]):
        info, path = read_summary(name, results, missing_ok=True), os.path.join(results, name, 'curves.csv')
        if info is None or not os.path.exists(path):
            continue
        with open(path, encoding='utf-8') as f:
            loss = {(r['mode'], int(r['seed']), int(r['iter'])): float(r['val_loss']) for r in csv.DictReader(f)}
        for row in info['modes']:
            label = f"`{plan.family(row)}`{SCALED[k]} ({rates_of(row)})"
            if plan.family(row) == 'untied' and k == pick:
                untied = label
            curves[label] = {i: [loss.get((row, seed, i)) for seed in info['seeds']]
                             for i in sorted({i for _, _, i in loss}) if i}
            ends[label] = info, row
    if untied is None or len(curves) < 2:
        return None
    return ends[untied][0], {untied: curves.pop(untied)} | curves, ends


def rates_of(row):
    """A row's rates as text: ×table, and ×head where it has one; a rate not written is x1."""
    parsed = parse_row(row)
    return rates((parsed.embed_mult or 1.0, parsed.head_mult) if parsed.head_mult else parsed.embed_mult or 1.0)


def horizon_table(results, params):
    """The horizon's points on 50 fixed validation batches, then the whole split at the end: each mode's mean, and
    tied's and the remedy's cost against untied paired by seed; params, untied's parameter count, gives the tokens
    each parameter has seen."""
    found = horizon_curves(results)
    if found is None:
        return []
    info, curves, ends = found
    (untied, base), others = next(iter(curves.items())), list(curves.items())[1:]
    batch = info['config']['batch_size'] * info['config']['block_size']
    lines = ['| iteration | tokens a parameter (untied) | ' + ' | '.join(curves) + ' | ' +
             ' | '.join(f'{label} − untied' for label, _ in others) + ' |', '|---:' * (2 + len(curves) + len(others))
             + '|']
    for i, losses in base.items():
        means = [f"{mean_std(curve[i])[0]:.3f}" for curve in curves.values()]
        costs = [fmt_paired(paired_interval(curve[i], losses)) for _, curve in others]
        lines.append(f"| {i} | {i * batch / params:.3f} | " + ' | '.join(means + costs) + ' |')
    end, untied_end = info['config']['max_iters'], ends[untied]
    lines.append(f"| whole split at the end, {end} | {end * batch / params:.3f} | "
                 + ' | '.join([cell(*ends[label]) for label in curves] + [diff(ends[label], untied_end)
                                                                         for label, _ in others]) + ' |')
    return lines


def depth_table(results):
    """Depth apart (config/experiment7.sh remedy_depth): at width 160 with 4 layers and with 20, on five fresh seeds
    (1342 on), untied's pick, plain tied's and the best remedy's, each tied form's cost against untied and the
    remedy's against plain tied, paired by seed; under it the remedy's own rate swept at 4 layers (one seed, half
    length). Nothing until all three arms at 4 layers are committed."""
    shallow, deep = ([read_summary(name, results, missing_ok=True) for name in names] for names in (DEPTH, FRESH))
    remedy = next(((k, plan.family(row)) for k, info in enumerate(shallow) for row in (info['modes'] if info else ())
                   if plan.family(row) != 'untied' and (k, plan.family(row)) != (0, 'tied')), None)
    if remedy is None:
        return []
    arms = [(2, 'untied'), (0, 'tied'), remedy]

    def find(infos, k, name):  # (summary, row) of the family's one row in folder k, or None
        row = next((row for row in (infos[k]['modes'] if infos[k] else ()) if plan.family(row) == name), None)
        return (infos[k], row) if row else None
    label = f"`{remedy[1]}`{SCALED[remedy[0]]}"
    lines = [f"| width × layers | tied parameters | tokens a parameter, tied | untied | plain tied | {label} | "
             f"plain tied − untied | {label} − untied | {label} − plain tied |", '|---|---:|---:' + '|---:' * 6 + '|']
    for size, infos in (('w160_shallow', shallow), ('w160', deep)):
        found = [find(infos, k, name) for k, name in arms]
        if None in found:
            if size == 'w160_shallow':
                return []
            continue
        cfg = found[0][0]['config']
        params = plan.counts(plan.resolve(size))['tied']
        tokens = cfg['batch_size'] * cfg['block_size'] * cfg['max_iters'] / params
        untied, tied, mine = found
        lines.append(f"| {cfg['n_embd']} × {cfg['n_layer']} | {params / 1e6:.2f} M | {tokens:.3f} | "
                     + ' | '.join(f"{cell(*arm)} ({rates_of(arm[1])})" for arm in found)
                     + f" | {diff(tied, untied)} | {diff(mine, untied)} | {diff(mine, tied)} |")
    sweep = read_summary(SHALLOW_SWEEPS[remedy[0]], results, missing_ok=True)
    if sweep:
        cells = sorted((parse_row(row).embed_mult or 1.0, row_loss(v)) for row, v in sweep['modes'].items()
                       if plan.family(row) == remedy[1] and row_loss(v) is not None)
        lines += ['', f"{label}'s own rate at 4 layers (one seed, half length, whole validation split): "
                  + '; '.join(f'×{rate:g} {loss:.3f}' for rate, loss in cells) + '.']
    return lines
