"""docs/experiment7.md's result tables and figures, from the summaries committed under docs/results/.

Each is experiment7-STAGE-OPTIMIZER-SIZE, a copy of the out-exp7-... folder's summary.json and summary.md:

    python lab/experiment7_results.py             # every table the doc quotes, and the prediction for GPT-2 small
    python lab/experiment7_results.py --figures   # and docs/experiment7_cost.png, tying's cost against size, and
                                                  # docs/experiment7_horizon.png, the cost against tokens seen
    python lab/experiment7_results.py curves OUT_DIR  # a horizon run's evaluations, OUT_DIR/curves.csv

A stage whose summaries are not committed yet is left out of its table, which says what it lacks. The ladder,
the plan and the parameter counts are lab/experiment7_tables.py's; every loss is the whole validation split at
the end of training, every difference the mean of one setting's per-seed differences from another's with a 95 %
interval by Student's t on n - 1 degrees of freedom (the seeds pair the runs: each seed gives both the same data
order and evaluation batches), bold where it excludes zero, and Welch's interval, which ignores the pairing, beside
it (lab/summary_tables.diff). Each table also says where its models stand against the floor that counting
alone reaches on the same validation split (lab/floor.py) and how many tokens each parameter saw.
"""

import csv
import glob
import math
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, 'docs')
sys.path.insert(0, ROOT)

from lab import experiment7_remedies as remedies  # noqa: E402
from lab import experiment7_tables as plan  # noqa: E402
from lab.ablation_figure import pyplot, rate_cells, save  # noqa: E402
from lab.ablation_grid import parse_row  # noqa: E402
from lab.ablation_report import fmt_interval, fmt_paired, mean_std, paired_interval, t_975  # noqa: E402
# a row's per-seed losses, their 'mean ± std', and (a, b) as (diff, low, high) and as text
from lab.summary_tables import RESULTS, cell, diff, paired, print_sections, read_summary, seeds  # noqa: E402
from lib.atomic_files import atomic_write_bytes  # noqa: E402

# The floor under every run of the ladder: the works' validation split, and one run's 200 x 16 windows of 65 tokens
# (python lab/floor.py; every size reads the same windows, so one floor serves the ladder).
FLOOR = dict(bigram_whole=4.747, bigram_run=5.073, unigram_whole=6.388)
RUN_TOKENS = 200 * 16 * 64  # the tokens a full-length run trains on
FIGURE = os.path.join(DOCS, 'experiment7_cost.png')
HORIZON_FIGURE = os.path.join(DOCS, 'experiment7_horizon.png')
# GPT-2 small as released: 124 M parameters tied, its 50,257 x 768 table 31 % of them. The prediction is for
# its shape, trained as this ladder is (the recipe's batch is not GPT-2's, and nor is the corpus).
GPT2_SMALL = dict(n_embd=768, n_layer=12, n_head=12, block_size=1024, vocab_size=50_257)


def summary(name):
    """A committed summary, or None where that stage has not been run (or not committed) yet."""
    return read_summary(name, RESULTS, missing_ok=True)


def committed(optimizer, sizes, *stages):
    """(size, its summary of each stage) for each of sizes whose stages (experiment7-STAGE-OPTIMIZER-SIZE) are all
    committed: a size with a stage not run yet is left out of the table that reads it."""
    for size in sizes:
        found = [summary(f'experiment7-{stage}-{optimizer}-{size}') for stage in stages]
        if None not in found:
            yield size, *found


def trained_in(info):
    """'float32' or 'bf16': the ladder trained on a Zen 4 in bf16 autocast; a summary whose runs trained on a CPU
    without native bf16 says so ('trained_on', from its runs' logs)."""
    return 'float32' if 'in float32' in info.get('trained_on', '') else 'bf16'


def best_of(sweep):
    """A sweep summary's best rows, (untied's, tied's) as the confirmation names them; None for a side it lacks."""
    untied, tied = rate_cells(sweep)
    rows = plan.best_rows(untied, tied)
    return (rows[0] if untied else None), (rows[-1] if tied else None)


def rate(row):
    """'untied_e10_h3' -> '×10, ×3'; 'tied_e3' -> '×3'; the default rows -> '×1'."""
    parsed = parse_row(row)
    rates = [parsed.embed_mult or 1.0] + ([parsed.head_mult or 1.0] if parsed.tie_mode == 'untied' else [])
    return ', '.join(f'×{r:g}' for r in rates)


def sweep_table():
    """Stage 1: each sweep's best rates (one seed, half length), as multiples of learning_rate."""
    lines = ['| size | width | optimizer | tied: best rate | its loss | untied: best table, head rates | its loss | '
             'tied − untied (one seed) |', '|---|---:|---|---:|---:|---:|---:|---:|']
    for optimizer, sizes in plan.OPTIMIZERS.items():
        for size, sweep in committed(optimizer, sizes, 'sweep'):
            untied, tied = best_of(sweep)
            lines.append(f"| `{size}` | {plan.resolve(size)['n_embd']} | {optimizer} | {rate(tied)} | "
                         f"{cell(sweep, tied)} | {rate(untied)} | {cell(sweep, untied)} | "
                         f"{seeds(sweep, tied)[0] - seeds(sweep, untied)[0]:+.3f} |")
    return lines


def costs():
    """[(optimizer, size, confirmation summary, counts, {'default': (diff, low, high), 'best': ...}, best rows)]
    for every confirmation committed: tied - untied at the default rates, and each at the best rates of its sweep."""
    found = []
    for optimizer, sizes in plan.OPTIMIZERS.items():
        for size, confirm, sweep in committed(optimizer, sizes, 'confirm', 'sweep'):
            untied_best, tied_best = best_of(sweep)
            cost = dict(default=paired((confirm, 'tied'), (confirm, 'untied')),
                        best=paired((confirm, tied_best), (confirm, untied_best)))
            found.append((optimizer, size, confirm, plan.counts(plan.resolve(size)), cost, (untied_best, tied_best)))
    return found


def cost_table():
    """Stage 2 (claim 18): tying's cost at each size, five seeds, full length."""
    lines = ['| size | parameters, tied / untied | tokens a parameter, tied | table share, tied | optimizer | untied, '
             'default | tied, default | tied − untied, default rates | untied, its best | tied, its best | tied − untied, '
             'each at its best | best model − bigram floor (whole split; one run\'s windows) |',
             '|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|']
    for optimizer, size, confirm, c, cost, (untied_best, tied_best) in costs():
        precision = ', float32' if trained_in(confirm) == 'float32' else ''  # bf16, the ladder's, goes unsaid
        defaults = cell(confirm, 'untied'), cell(confirm, 'tied'), diff((confirm, 'tied'), (confirm, 'untied'))
        best = min(sum(seeds(confirm, row)) / len(seeds(confirm, row)) for row in (untied_best, tied_best))
        lines.append(f"| `{size}` | {c['tied'] / 1e6:.2f} M / {c['untied'] / 1e6:.2f} M | {RUN_TOKENS / c['tied']:.3f} | "
                     f"{c['share']:.0%} | {optimizer}{precision} | {' | '.join(defaults)} | "
                     f"{cell(confirm, untied_best)} ({rate(untied_best)}) | {cell(confirm, tied_best)} ({rate(tied_best)}) | "
                     f"{diff((confirm, tied_best), (confirm, untied_best))} | "
                     f"{best - FLOOR['bigram_whole']:+.3f}; {best - FLOOR['bigram_run']:+.3f} |")
    return lines


def check_table():
    """Stage 2's check of its own selection: tied trained again at a rate its one-seed, half-length sweep put within
    a seed's noise of its best (experiment7-check-OPTIMIZER-SIZE), against the same untied best rows."""
    lines = ['| size | optimizer | tied in the sweep (one seed, half length): its best, the runner-up | tied, five seeds: '
             'at the sweep\'s best | at the runner-up | tied − untied: at the sweep\'s best | at the runner-up |',
             '|---|---|---:|---:|---:|---:|---:|']
    for optimizer, size, confirm, _, _, (untied_best, tied_best) in costs():
        check, sweep = summary(f'experiment7-check-{optimizer}-{size}'), summary(f'experiment7-sweep-{optimizer}-{size}')
        for row in (check or {}).get('modes', {}):
            lines.append(f"| `{size}` | {optimizer} | {rate(tied_best)} {cell(sweep, tied_best)}, {rate(row)} "
                         f"{cell(sweep, row)} | {cell(confirm, tied_best)} | {cell(check, row)} | "
                         f"{diff((confirm, tied_best), (confirm, untied_best))} | "
                         f"{diff((check, row), (confirm, untied_best))} |")
    return lines


def depth_results():
    """Stage 3 (claim 19): the deeper tied model at its own best rate against the untied one at its best, seed for
    seed, trained the same way, and against the tied one of the base depth; compute per token beside them."""
    lines = ['| size | tied, deeper: layers, parameters | untied: layers, parameters | FLOPs per token, deeper tied / '
             'untied | deeper tied, its best | deeper tied − untied, each at its best | deeper tied − tied, each at its '
             'best |', '|---|---:|---:|---:|---:|---:|---:|']
    for size, confirm, sweep in committed('muon', plan.DEEP, 'confirm', 'sweep'):
        deep, deep_sweep = (summary(f'experiment7-{stage}-muon-{size}_deep') for stage in ('confirm', 'sweep'))
        if deep is None or deep_sweep is None:
            continue
        (_, row), (untied_best, tied_best) = best_of(deep_sweep), best_of(sweep)
        base_cfg, deep_cfg = plan.resolve(size), plan.resolve(f'{size}_deep')
        base, more = plan.counts(base_cfg), plan.counts(deep_cfg)
        # The untied reference is stage 2's confirmation, unless a float32 copy of its untied best row is committed:
        # w160's deeper model trained on a Zen 3 without native bf16, so in float32 under --dtype=auto, where stage 2
        # ran on a Zen 4 in bf16 autocast; its untied reference was trained again there, the same seeds and rates, so
        # that the difference is the depth's and not the precision's. Tied's base-depth rows were not: that column
        # crosses precisions where the untied one does not (precision_table measures the shift on untied's rows).
        again = summary(f'experiment7-float32-muon-{size}')
        reference, crossed = (confirm, False) if again is None else (again, True)
        lines.append(f"| `{size}` | {deep_cfg['n_layer']}, {more['tied'] / 1e6:.2f} M | {base_cfg['n_layer']}, "
                     f"{base['untied'] / 1e6:.2f} M | {more['flops'] / base['flops']:.2f} | {cell(deep, row)} "
                     f"({rate(row)}{', float32' if crossed else ''}) | "
                     f"{diff((deep, row), (reference, untied_best))} | "
                     f"{diff((deep, row), (confirm, tied_best))}{' (bf16)' if crossed else ''} |")
    return lines


def precision_table():
    """Where a size's untied best row was trained again in float32 (depth_results), the two against each other,
    the same seeds and rates: how much the precision alone moves a five-seed loss."""
    lines = ['| size | untied, its best rates | bf16 autocast (Zen 4) | float32 (Zen 3) | float32 − bf16 |',
             '|---|---:|---:|---:|---:|']
    for size, confirm, sweep, again in committed('muon', plan.DEEP, 'confirm', 'sweep', 'float32'):
        untied_best, _ = best_of(sweep)
        lines.append(f"| `{size}` | {rate(untied_best)} | {cell(confirm, untied_best)} | {cell(again, untied_best)} | "
                     f"{diff((again, untied_best), (confirm, untied_best))} |")
    return lines


def control_table():
    """The follow-up's control of AdamW's cost at w160 (config/experiment7.sh control, blocks): tied at three rates of
    the shared matrix, two warmups and two forms of the ends' decay, one seed, full length; then the best cell with
    the blocks at other rates, the shared matrix's own rate held. Each cell the whole-split loss of seed 1337; the best
    against untied's best rows of stage 2 (five seeds, float32 on a Zen 3; these trained in bf16 on a Zen 4, where
    the precision moved untied's w160 loss by +0.000 [-0.004, +0.004] under Muon)."""
    lines = ['| warmup | ends\' decay | blocks\' rate | tied ×10 | tied ×30 | tied ×100 | train loss at 10 %, best cell | '
             'best cell − untied\'s five-seed mean |', '|---:|---|---:|---:|---:|---:|---:|---:|']
    untied = summary('experiment7-confirm-adamw-w160')
    untied_mean = sum(seeds(untied, 'untied_e300_h10')) / len(seeds(untied, 'untied_e300_h10')) if untied else None
    paths = [*sorted(glob.glob(os.path.join(RESULTS, 'experiment7-control-adamw-w160-w*'))),
             *sorted(glob.glob(os.path.join(RESULTS, 'experiment7-blocks-adamw-w160-lr*')))]
    for path in paths:
        info = summary(os.path.basename(path))
        cfg = info['config']
        # the shared matrix's rate as a multiple of 1e-3, the blocks' default, whatever the blocks' rate
        shared = {round(cfg['learning_rate'] * (parse_row(row).embed_mult or 1) / 1e-3): row for row in info['modes']}
        best = min(info['modes'], key=lambda row: seeds(info, row)[0])
        lines.append(f"| {cfg['warmup_iters']} | {cfg['ends_decay']} | {cfg['learning_rate']:g} | "
                     + ' | '.join(f"{seeds(info, shared[m])[0]:.3f}" if m in shared else '–' for m in (10, 30, 100))
                     + f" | {info['modes'][best]['train_loss_0.1']['mean']:.2f} "
                       f"(×{round(cfg['learning_rate'] * (parse_row(best).embed_mult or 1) / 1e-3)}) | "
                     + (f"{seeds(info, best)[0] - untied_mean:+.3f} |" if untied_mean else '– |'))
    return lines


def pair_table():
    """The control's last word: five seeds of its best tied cell against five of untied's best rows, trained on one
    machine from the same seeds (config/experiment7.sh pair), paired by seed; nothing where it has not run."""
    tied, untied = summary('experiment7-pair-adamw-w160-tied'), summary('experiment7-pair-adamw-w160-untied')
    if tied is None or untied is None:
        return []
    ((t_row,), (u_row,)), cfg = (tied['modes'], untied['modes']), tied['config']
    return ['| tied: warmup, ends\' decay, rate | tied, five seeds | untied (×300, ×10), five seeds | untied trained on | '
            'tied − untied |', '|---|---:|---:|---|---:|',
            f"| {cfg['warmup_iters']}, {cfg['ends_decay']}, ×{round(parse_row(t_row).embed_mult or 1)} | "
            f"{cell(tied, t_row)} | {cell(untied, u_row)} | this machine, {trained_in(untied)} | "
            f"{diff((tied, t_row), (untied, u_row))} |"]


def remedies_table():
    """The control's best tied cell with its input side at a rate of its own (config/experiment7.sh remedies), one
    seed: sqrt(d) at the input (emb_scale), and the lookup's gradient times 4 (input_grad_scale), each beside the
    same seed of the cell without them and of untied (the pair stage's seed 1337)."""
    pair = summary('experiment7-pair-adamw-w160-tied'), summary('experiment7-pair-adamw-w160-untied')
    names = ('experiment7-remedies-adamw-w160', 'experiment7-remedies-adamw-w160-emb_scale')
    found = [info for info in map(summary, names) if info is not None]
    if None in pair or not found:
        return []
    (tied, t_row), (untied, u_row) = ((info, next(iter(info['modes']))) for info in pair)
    base, untied_1337 = seeds(tied, t_row)[0], seeds(untied, u_row)[0]
    lines = ['| remedy | tied, seed 1337 | − the cell without it | − untied |', '|---|---:|---:|---:|',
             f"| none (the control's best cell) | {base:.3f} | – | {base - untied_1337:+.3f} |"]
    for info in found:
        for row in info['modes']:
            what = ', '.join(part for part, on in (('√d input scaling', info['config'].get('emb_scale')),
                                                   ('input_grad_scale 4', row.endswith('_igs4'))) if on)
            loss = seeds(info, row)[0]
            lines.append(f"| {what} | {loss:.3f} | {loss - base:+.3f} | {loss - untied_1337:+.3f} |")
    return lines


def selection_table():
    """Selection without the winner's curse (config/experiment7.sh select): each mode's two best cells of its
    one-seed half-length sweep trained at full length on three seeds, the pick from those, and the reported cost
    from five fresh seeds (1342-1346) that played no part in choosing, paired by seed."""
    lines = []
    for size, picked, fresh in committed('muon', plan.SIZES, 'select', 'fresh'):
        untied, tied = best_of(picked)
        cells = ' · '.join(f"{mode}: " + '; '.join(f"{rate(row)} {cell(picked, row)}" for row in sorted(
            (row for row in picked['modes'] if row.startswith(mode)), key=lambda row: sum(seeds(picked, row))))
            for mode in ('untied', 'tied'))
        lines.append(f"| `{size}` | {cells} | {rate(untied)}; {rate(tied)} | {cell(fresh, untied)} | {cell(fresh, tied)} | "
                     f"{diff((fresh, tied), (fresh, untied))} |")
    return ['| size | the top two cells of each mode, three seeds, full length | the picks: untied; tied | untied, five fresh '
            'seeds | tied, five fresh seeds | tied − untied, fresh seeds |', '|---|---|---|---:|---:|---:|'] + lines if lines else []


def shallow_table():
    """Depth apart from width under AdamW (config/experiment7.sh shallow): width 160 at 4 layers, its own sweep and
    five seeds at its best rows, between the ladder's AdamW ends, w64 at 2 layers and w160 at 20. Where the cost at
    w160 is the depth's, the 4-layer model's lies near w64's; where it is the width's, near w160's. The untied
    table's best rate at one width and two depths is the fixed-width reading that the sweep table cannot give."""
    lines = []
    for size, confirm, sweep in committed('adamw', ('w64', 'w160_shallow', 'w160'), 'confirm', 'sweep'):
        untied, tied = best_of(sweep)
        cfg = plan.resolve(size)
        c = plan.counts(cfg)
        lines.append(f"| `{size}` | {cfg['n_embd']} × {cfg['n_layer']} | {c['tied'] / 1e6:.2f} M | "
                     f"{RUN_TOKENS / c['tied']:.3f} | {c['share']:.0%} | {trained_in(confirm)} | {cell(confirm, untied)} "
                     f"({rate(untied)}) | {cell(confirm, tied)} ({rate(tied)}) | "
                     f"{diff((confirm, tied), (confirm, untied))} |")
    if not any('w160_shallow' in line for line in lines):
        return []
    return ['| size | width × layers | tied parameters | tokens a parameter, tied | table share, tied | trained in | '
            'untied, its best (table, head) | tied, its best | tied − untied, each at its best |',
            '|---|---|---:|---:|---:|---|---:|---:|---:|'] + lines


def write_curves(out_dir):
    """The evaluations along the way (metrics.csv's rows with a validation loss) of every run that OUT_DIR's summary
    reports, as one file, OUT_DIR/curves.csv: mode, seed, iter, val_loss. It is committed beside the summary, which
    keeps only the end; a run folder the summary leaves out (a row dropped from the stage part-way) stays out."""
    out_dir = os.path.abspath(out_dir)
    info, rows = read_summary(os.path.basename(out_dir), os.path.dirname(out_dir), missing_ok=True), []
    if info is None:
        sys.exit(f"curves: {out_dir} has no summary.json (run its ablate.py command first, or name another folder)")
    for mode in info['modes']:
        for seed in info['seeds']:
            with open(os.path.join(out_dir, f'{mode}-seed{seed}', 'metrics.csv'), encoding='utf-8') as f:
                rows += [(mode, str(seed), r['iter'], r['val_loss']) for r in csv.DictReader(f) if r['val_loss']]
    atomic_write_bytes(os.path.join(out_dir, 'curves.csv'),
                       ('mode,seed,iter,val_loss\n' + ''.join(','.join(r) + '\n' for r in rows)).encode())


def horizon_runs():
    """{size: (summary, {iter: (untied's per-seed losses, tied's)})} for every horizon stage committed with its
    curves.csv; iteration 0, before any training, left out."""
    found = {}
    for size, info in committed('muon', plan.SIZES, 'horizon'):
        path = os.path.join(RESULTS, f'experiment7-horizon-muon-{size}', 'curves.csv')
        if not os.path.exists(path):
            continue
        with open(path, encoding='utf-8') as f:
            loss = {(r['mode'], int(r['seed']), int(r['iter'])): float(r['val_loss']) for r in csv.DictReader(f)}
        found[size] = info, {k: tuple([loss.get((row, s, k)) for s in info['seeds']] for row in best_of(info))
                             for k in sorted({k for _, _, k in loss}) if k}
    return found


def horizon_table():
    """One epoch at w128 and w160 (config/experiment7.sh horizon): untied and tied at the picked rates, three
    seeds, paired; the curve's points on 50 fixed validation batches, the end also on the whole split."""
    lines = []
    for size, (info, curve) in horizon_runs().items():
        untied, tied = best_of(info)
        params = plan.counts(plan.resolve(size))['untied']
        batch = info['config']['batch_size'] * info['config']['block_size']
        lines += [f"| `{size}` ({rate(untied)}; {rate(tied)}) | {k} | {k * batch / params:.3f} | {mean_std(u)[0]:.3f} | "
                  f"{mean_std(t)[0]:.3f} | {fmt_paired(paired_interval(t, u))} |" for k, (u, t) in curve.items()]
        lines.append(f"| `{size}`, whole split at the end | {info['max_iters']} | "
                     f"{info['max_iters'] * batch / params:.3f} | {cell(info, untied)} | {cell(info, tied)} | "
                     f"{diff((info, tied), (info, untied))} |")
    return with_floor(['| size (rates: untied; tied) | iteration | tokens a parameter (untied) | untied | tied | '
                       'tied − untied, paired |', '|---|---:|---:|---:|---:|---:|'] + lines if lines else [])


def with_floor(table):
    """A horizon's table under the floor it is read against; nothing where there is no table."""
    return [f"Floor (lab/floor.py, the whole validation split): bigram {FLOOR['bigram_whole']:.3f}, unigram "
            f"{FLOOR['unigram_whole']:.3f}; one epoch reads the whole training split.", ''] + table if table else []


def plot_horizon(path=HORIZON_FIGURE):
    """Left: each size's validation loss along one epoch, both modes (mean over seeds), beside the bigram floor.
    Right: tying's cost against tokens seen, one line per size, the paired 95 % interval shaded."""
    plt, found, adamw = pyplot(), horizon_runs(), remedies.horizon_curves(RESULTS)
    if plt is None or not (found or adamw):
        return False
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.4))
    for (size, (info, curve)), colour in zip(found.items(), ('tab:blue', 'tab:orange', 'tab:green', 'tab:red')):
        batch = info['config']['batch_size'] * info['config']['block_size']
        tokens = [k * batch for k in curve]
        for i, (mode, style) in enumerate((('untied', '-'), ('tied', '--'))):
            left.plot(tokens, [mean_std(losses[i])[0] for losses in curve.values()], style, color=colour,
                      label=f'{size} {mode}')
        cost, lows, highs = map(list, zip(*(paired_interval(t, u) for u, t in curve.values())))
        right.plot(tokens, cost, 'o-', color=colour, label=f'{size} Muon')
        if None not in lows:
            right.fill_between(tokens, lows, highs, color=colour, alpha=0.2)
    if adamw:  # under AdamW at w160 (lab/experiment7_remedies.py): tied's and the best remedy's cost, dashed
        info, curves, _ = adamw
        (_, untied), others = next(iter(curves.items())), list(curves.items())[1:]
        tokens = [i * info['config']['batch_size'] * info['config']['block_size'] for i in untied]
        for (label, curve), colour in zip(others, ('black', 'tab:purple')):
            cost, lows, highs = map(list, zip(*(paired_interval(curve[i], untied[i]) for i in untied)))
            right.plot(tokens, cost, 's--', color=colour, label=f"w160 AdamW {label.replace('`', '')}")
            if None not in lows:
                right.fill_between(tokens, lows, highs, color=colour, alpha=0.1)
    left.axhline(FLOOR['bigram_whole'], color='grey', lw=0.8, ls=':', label='Kneser-Ney bigram floor')
    right.axhline(0, color='grey', lw=0.8)
    left.set_ylabel('validation loss, 50 fixed batches (nats)')
    left.set_title('under Muon, both modes (mean over seeds)', fontsize=10)
    right.set_ylabel('tied − untied (nats), paired by seed')
    for ax in (left, right):
        ax.set_xlabel('training tokens seen')
        ax.legend(fontsize=7)
    right.set_title(f"tying's cost along one epoch ({'AdamW dashed, ' if adamw else 'Muon, '}3 seeds, 95 % intervals)",
                    fontsize=10)
    return save(plt, fig, path)


def fit(points):
    """Least squares of cost on log10(parameters): (slope, intercept, predict), where predict(n) gives the line
    at n parameters and its 95 % prediction interval for a new size (t with len(points) - 2 degrees of freedom);
    None with fewer than three points."""
    if len(points) < 3:
        return None
    xs, ys = [math.log10(n) for n, _ in points], [y for _, y in points]
    k = len(xs)
    mx, my = sum(xs) / k, sum(ys) / k
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    intercept = my - slope * mx
    s = math.sqrt(sum((y - intercept - slope * x) ** 2 for x, y in zip(xs, ys)) / (k - 2))

    def predict(n):
        x = math.log10(n)
        half = t_975(k - 2) * s * math.sqrt(1 + 1 / k + (x - mx) ** 2 / sxx)
        y = intercept + slope * x
        return y, y - half, y + half
    return slope, intercept, predict


def gpt2_small():
    cfg = dict(plan.resolve('recipe_ladder.py'), **{k: v for k, v in GPT2_SMALL.items() if k != 'vocab_size'})
    return plan.counts(cfg, GPT2_SMALL['vocab_size'])


def prediction():
    """Claim 18's trend carried to GPT-2 small: per optimizer and rates, the line through the ladder's costs."""
    target = gpt2_small()
    lines = [f"GPT-2 small: {target['tied'] / 1e6:.1f} M parameters tied, the table {target['share']:.0%} of them.", '',
             '| optimizer | rates | sizes | change of cost per tenfold parameters | predicted cost at GPT-2 small |',
             '|---|---|---:|---:|---:|']
    found = costs()
    for optimizer in plan.OPTIMIZERS:
        for rates in ('default', 'best'):
            points = line_points(found, optimizer, rates)
            line = fit(points)
            if line is not None:
                slope, _, predict = line
                lines.append(f"| {optimizer} | {'default' if rates == 'default' else 'each at its best'} | "
                             f"{len(points)} | {slope:+.3f} | {fmt_interval(*predict(target['tied']))} |")
    return lines


def line_points(found, optimizer, rates):
    """The (tied parameters, cost) points a line is fitted through, from costs(): each size's cost at the default
    rates, or at the best rates as the text accepts them."""
    return [(c['tied'], accepted(o, size, confirm, untied_best, cost) if rates == 'best' else cost[rates][0])
            for o, size, confirm, c, cost, (untied_best, _) in found if o == optimizer]


def accepted(optimizer, size, confirm, untied_best, cost):
    """A size's cost at the best rates as the text accepts it: where the selection's check found that a full-length
    run prefers the sweep's runner-up for tied (experiment7-check-OPTIMIZER-SIZE), tied at that rate, not at the rate
    the one-seed half-length sweep picked; elsewhere cost, the confirmation's own best rows (costs())."""
    check = summary(f'experiment7-check-{optimizer}-{size}')
    if check is None:
        return cost['best'][0]
    return min(paired((check, row), (confirm, untied_best))[0] for row in check['modes'])


def best_rates():
    """{optimizer: [(width, tied's rate, untied's table rate, untied's head rate)]} from each committed sweep,
    rates as multiples of learning_rate, smallest width first."""
    found = {}
    for optimizer, sizes in plan.OPTIMIZERS.items():
        for size, sweep in committed(optimizer, sizes, 'sweep'):
            untied, tied = (parse_row(row) for row in best_of(sweep))
            found.setdefault(optimizer, []).append((plan.resolve(size)['n_embd'], tied.embed_mult or 1.0,
                                                    untied.embed_mult or 1.0, untied.head_mult or 1.0))
    return found


def plot_costs(path=FIGURE):
    """Left: tying's cost (tied - untied, 95 % intervals) against the tied parameter count, at the default rates
    and at each one's best, per optimizer, with each best-rate line carried to GPT-2 small. Right: the sweeps'
    best rates against width, beside muP's expectation under Adam (an embedding's rate constant in width, an
    output layer's falling as 1/width). False where there is nothing to draw."""
    plt, found = pyplot(), costs()
    if plt is None or not found:
        return False
    target = gpt2_small()['tied']
    fig, (ax, right) = plt.subplots(1, 2, figsize=(12, 4.6), gridspec_kw=dict(width_ratios=[1.35, 1]))
    for optimizer, colour in zip(plan.OPTIMIZERS, ('tab:blue', 'tab:orange')):
        for rates, fmt, mfc, what in (('default', 'o--', 'white', 'default rates'),
                                      ('best', 's-', colour, 'each at its best')):
            points = [(c['tied'], *cost[rates]) for o, _, _, c, cost, _ in found if o == optimizer]
            if points:
                xs, ys, lows, highs = map(list, zip(*points))
                err = [[d - lo for d, lo in zip(ys, lows)], [hi - d for d, hi in zip(ys, highs)]]
                ax.errorbar(xs, ys, yerr=err, fmt=fmt, color=colour, mfc=mfc, capsize=3, label=f'{optimizer}, {what}')
        best = line_points(found, optimizer, 'best')
        line = fit(best)
        if line is not None:  # the best rates' line, from the largest size measured on to GPT-2 small
            largest = best[-1][0]
            y, lo, hi = line[2](target)
            ax.errorbar([target], [y], yerr=[[y - lo], [hi - y]], fmt='*', color=colour, capsize=3, ms=10,
                        label=f'{optimizer}: the line carried to GPT-2 small')
            ax.annotate(f'{y:+.3f} [{lo:+.3f}, {hi:+.3f}]', (target, y), textcoords='offset points',
                        xytext=(-12, 22), ha='right', fontsize=7, color=colour)
            ax.plot([largest, target], [line[1] + line[0] * math.log10(largest), y], ':', color=colour)
    ax.axhline(0, color='grey', lw=0.8)
    # the axis fits the measured intervals: a prediction interval far wider than them runs off it, its numbers beside
    measured = [bound for *_, cost, _ in found for rates in ('default', 'best') for bound in cost[rates]]
    margin = 0.25 * (max(measured) - min(measured))
    ax.set_ylim(min(min(measured), 0) - margin, max(measured) + margin)
    ax.set_xscale('log')
    ax.set_xlabel('parameters, tied model')
    ax.set_ylabel('tied − untied, validation loss (nats)')
    ax.set_title("tying's cost as the model grows (5 seeds, 95 % intervals)", fontsize=10)
    ax.legend(fontsize=7)
    rates_by_optimizer = best_rates()  # every committed sweep read once, for the lines, muP's and the ticks
    for optimizer, rows in rates_by_optimizer.items():
        widths = [w for w, *_ in rows]
        style = '-' if optimizer == 'muon' else '--'
        for i, (what, marker) in enumerate((('tied matrix', 'o'), ('untied table', '^'), ('untied head', 'v')), 1):
            right.plot(widths, [r[i] for r in rows], style + marker, color=('tab:purple', 'tab:green', 'tab:red')[i - 1],
                       label=f'{what}, {optimizer}')
    muon = rates_by_optimizer.get('muon')
    if muon:  # muP's expectation, drawn through the smallest width's untied best rates
        w0, _, table0, head0 = muon[0]
        widths = [w for w, *_ in muon]
        right.plot(widths, [table0] * len(widths), ':', color='tab:green', lw=1, label='μP: table constant')
        right.plot(widths, [head0 * w0 / w for w in widths], ':', color='tab:red', lw=1, label='μP: head ∝ 1/width')
    right.set_xscale('log')
    right.set_yscale('log')
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator
    right.xaxis.set_major_locator(FixedLocator([w for rows in rates_by_optimizer.values() for w, *_ in rows]))
    right.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f'{v:g}'))
    right.yaxis.set_major_locator(FixedLocator(plan.RUNGS))  # the sweeps' ladder of rates
    right.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f'×{v:g}'))
    for axis in (right.xaxis, right.yaxis):
        axis.set_minor_locator(NullLocator())
    right.set_xlabel('width')
    right.set_ylabel('best rate, multiple of learning_rate (1e-3)')
    right.set_title('the sweeps\' best rates (one seed, half length)', fontsize=10)
    right.legend(fontsize=7)
    return save(plt, fig, path)


def main(figures=False):
    sections = [('### Stage 1: the best rates at each size (one seed, half length)', sweep_table()),
                ("### Stage 2: tying's cost at each size (claim 18)", cost_table()),
                ("### Stage 2's check: tied at its sweep's runner-up rate", check_table()),
                ('### Stage 3: a deeper tied model at the untied parameter count (claim 19)', depth_results()),
                ("### Stage 3's precision control: untied trained again in float32", precision_table()),
                ("### The follow-up's control of AdamW's cost at w160 (one seed, full length)", control_table()),
                ("### The control's five paired seeds", pair_table()),
                ("### The input side at its own rate (one seed)", remedies_table()),
                ("### Each remedy at its own rate (one seed, half length)", remedies.sweep_table(RESULTS)),
                ("### The remedies' picks on fresh seeds (full length)", remedies.selection_table(RESULTS)),
                ("### Depth apart from width: w160 at 4 layers (AdamW, five seeds)", shallow_table()),
                ("### Selection without the winner's curse (Muon)", selection_table()),
                ("### The horizon: one epoch (Muon, three seeds)", horizon_table()),
                ("### The best remedy at 4 layers: depth apart (AdamW, five fresh seeds)",
                 remedies.depth_table(RESULTS)),
                ("### The horizon under AdamW: one epoch at w160 (three seeds)",
                 with_floor(remedies.horizon_table(RESULTS, plan.counts(plan.resolve('w160'))['untied']))),
                ('### The trend carried to GPT-2 small', prediction())]
    print_sections(sections)  # a stage not run yet has no table
    if figures:
        print(f"wrote {FIGURE}" if plot_costs() else "no figure: no confirmation committed, or no matplotlib")
        if plot_horizon():
            print(f"wrote {HORIZON_FIGURE}")


if __name__ == '__main__':
    if sys.argv[1:2] == ['curves']:
        write_curves(sys.argv[2])
    else:
        main(figures='--figures' in sys.argv[1:])
