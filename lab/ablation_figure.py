"""An ablation's figures: loss_curves.png (every mode's training and validation loss, and its copy probe),
grad_sources.png (where the shared matrix's gradient comes from), the rate sweeps' heat maps and the tuned lens.
Curves are means over seeds, their range shaded; plot_runs draws single train.py runs side by side (ablate.py
--plot_runs). Each returns False, drawing nothing, without matplotlib."""

import itertools
import math
import statistics

from lab.ablation_grid import UNTIE_ROW
from lib.atomic_files import atomic_path
from lab.run_results import EARLY_FRACTION, lensed_rows


def pyplot():
    try:
        import matplotlib
        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def save(plt, fig, path):
    """Write fig as a PNG at path whole (a temporary file, then a rename) and free it; True: the plot is drawn."""
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=90, format='png')
    plt.close(fig)
    return True


def smooth_log(values, factor=1.15):
    """Mean over [i / factor, i * factor] for each index i: no smoothing over the first steps (where
    the log axis spreads them out), more later, as the eye reads a log-scaled axis."""
    prefix = list(itertools.accumulate(values, initial=0.0))
    spans = [(int(i / factor), min(len(values) - 1, int(i * factor))) for i in range(len(values))]
    return [(prefix[hi + 1] - prefix[lo]) / (hi + 1 - lo) for lo, hi in spans]


def seed_curve(seed_rows, key):
    """(iterations, mean, lowest, highest) over the seeds of one metric, at the iterations every seed logged it."""
    by_iter = {}
    for rows in seed_rows:
        for r in rows:
            if r[key] is not None:
                by_iter.setdefault(r['iter'], []).append(r[key])
    iters = sorted(i for i, v in by_iter.items() if len(v) == len(seed_rows))
    return (iters, [statistics.fmean(by_iter[i]) for i in iters], [min(by_iter[i]) for i in iters],
            [max(by_iter[i]) for i in iters])


def mean_and_range(ax, x, curve, k, seeds, **line):
    """A mode's mean curve over its seeds (curve: mean, lowest, highest) in the k-th colour of the cycle and, with
    more than one seed, their range shaded around it: the spread the differences in the table must stand out from."""
    mean, low, high = curve
    if seeds > 1:
        ax.fill_between(x, low, high, color=f'C{k}', alpha=0.15, linewidth=0)
    ax.plot(x, mean, color=f'C{k}', **line)


def line_style(mode):
    """Dashed for the untie row: until the untie it is the tied run, step for step, and would hide it."""
    return (0, (4, 2)) if mode == UNTIE_ROW else '-'


def reference_line(ax, value, text, style=':'):
    """A gray horizontal line at value, named at the right edge. Its label starts with '_', which keeps it out of a
    legend; it names the line for a reader of the figure."""
    ax.axhline(value, color='gray', linestyle=style, linewidth=1, label='_' + text)
    ax.text(0.99, value, text, va='bottom', ha='right', color='gray', fontsize=8, transform=ax.get_yaxis_transform())


def plot_copy(ax, curves, info):
    """Right panel: copy_prob at the evaluations, on a log axis, since a tied start near 1 and the others'
    near 1/n are orders of magnitude apart; the text's repeat rate (dashed) is where a model that copies
    only as often as the text repeats ends up."""
    drawn = []
    for k, (mode, seed_rows) in enumerate(curves.items()):
        iters, *copy = seed_curve(seed_rows, 'copy_prob')
        if iters:
            mean_and_range(ax, iters, copy, k, len(seed_rows), marker='o', markersize=3.5, linewidth=1.0,
                           linestyle=line_style(mode), label=info['labels'][mode])
            drawn += copy[0]
    ax.set_xlabel('iteration')
    if not drawn:  # every run predates the copy probe: say so rather than draw empty axes
        ax.text(0.5, 0.5, "no copy_prob in these runs' metrics.csv\n(trained before the copy probe)",
                ha='center', va='center', transform=ax.transAxes, color='gray')
        ax.set_title('copy probe', fontsize=9)
        return
    ax.set(yscale='log', ylabel='copy_prob: p(next token = current token)')
    reference_line(ax, 1 / info['vocab_size'], '1/n')
    if info['repeat_rate']:  # 0 on a log axis is nowhere: leave it out
        reference_line(ax, info['repeat_rate'], 'repeat rate of the text', '--')
    if info['untie_iter'] is not None:
        ax.axvline(info['untie_iter'], color=f'C{list(curves).index(UNTIE_ROW)}', linestyle=':', linewidth=1)
    ax.set_title('copying, on the validation batches' +
                 (f" (dotted: the untie at iteration {info['untie_iter']})" if info['untie_iter'] is not None else ''),
                 fontsize=9)


def plot(path, curves, info):
    """Training (light, smoothed) and validation (markers) curves of every mode, and its copy_prob at
    the evaluations, mean over seeds; validation loss and copy_prob with the seeds' range shaded."""
    plt = pyplot()
    if plt is None:
        return False
    log_n = math.log(info['vocab_size'])
    # Saved at 90 dpi rather than 100: about 1500 x 430 pixels, and a file a sixth larger than the two panels made.
    fig, (ax_all, ax_end, ax_copy) = plt.subplots(1, 3, figsize=(16.5, 4.8))
    max_iters = info['max_iters']
    starts, lows, ends = {}, [], {}
    for k, (mode, seed_rows) in enumerate(curves.items()):
        iters, step, _, _ = seed_curve(seed_rows, 'step_loss')
        smoothed = smooth_log(step)
        val_iters, *val = seed_curve(seed_rows, 'val_loss')
        x = [i + 1 for i in iters]
        for ax in (ax_all, ax_end):
            ax.plot(x, smoothed, color=f'C{k}', alpha=0.45, linewidth=1.0, linestyle=line_style(mode))
            mean_and_range(ax, [i + 1 for i in val_iters], val, k, len(seed_rows), marker='o', markersize=3.5,
                           linewidth=0.8, linestyle=line_style(mode), label=info['labels'][mode])
        starts[mode] = smoothed[0]
        lows.append(min(smoothed + val[0]))
        end = [v for i, v in zip(iters, smoothed) if i >= max_iters // 2] + \
              [v for i, v in zip(val_iters, val[0]) if i >= max_iters // 2]
        if end:  # none where the run diverged in the first half
            ends[mode] = end
    # Left: the whole run on a log axis, so the first hundred steps are visible. The top is set by the
    # typical start, so one mode starting far above the others does not squash the rest.
    low = min(lows)
    top = max(log_n, statistics.median(starts.values()))
    top += 0.12 * (top - low)
    clipped = [f"{m} {v:.2f}" for m, v in starts.items() if v > top]
    ax_all.set(xscale='log', ylim=(low - 0.05 * (top - low), top), xlabel='iteration + 1 (log scale)',
               ylabel='loss (nats/token)')
    reference_line(ax_all, log_n, 'log n')
    ax_all.set_title('whole run' + (f" (off scale at the start: {', '.join(clipped)})" if clipped else ''), fontsize=9)
    # Right: the second half, zoomed in, where the final differences are. A mode that ends far above
    # the typical spread (more than that spread again above the median top) is left off scale and named.
    ends = ends or {'': [low]}  # every run diverged in the first half
    lo_end = min(min(v) for v in ends.values())
    typical = statistics.median(max(v) for v in ends.values())
    hi_end = max(max(v) for v in ends.values() if min(v) <= typical + max(typical - lo_end, 0.05))
    pad = 0.08 * (hi_end - lo_end or 0.1)
    ax_end.set(xlim=(max_iters // 2 + 1, max_iters + 1), ylim=(lo_end - pad, hi_end + pad), xlabel='iteration + 1')
    far = [f"{m} {v[-1]:.2f}" for m, v in ends.items() if min(v) > hi_end + pad]
    ax_end.set_title('second half, zoomed in' + (f" (off scale: {', '.join(far)})" if far else ''), fontsize=9)
    ax_end.legend(fontsize=8, ncol=2)
    plot_copy(ax_copy, curves, info)
    for ax in (ax_all, ax_end, ax_copy):
        ax.grid(True, which='both', alpha=0.25)
    cfg, seeds = info['config'], len(info['seeds'])
    fig.suptitle(f"{info['dataset']}: {cfg['n_layer']}L x {cfg['n_embd']}, {max_iters} iterations, "
                 f"zero_init_residual={str(cfg['zero_init_residual']).lower()}, "
                 f"emb_scale={str(cfg['emb_scale']).lower()}; "
                 f"{'mean of ' + str(seeds) + ' seeds (shaded: lowest to highest)' if seeds > 1 else 'one seed'}; "
                 f"losses: training steps (lines, smoothed) and validation (dots); right: copy_prob", fontsize=10)
    return save(plt, fig, path)


def plot_runs(path, curves, info):
    """ablate.py --plot_runs' figure: single train.py runs side by side, one line each (labelled info['labels'][run]):
    left, the loss against the step, training steps (a light line) and validation (dots) beside log n; right, the copy
    probe, as plot_copy draws it. Nothing is smoothed or clipped: a tied start far above log n is the point."""
    plt = pyplot()
    if plt is None:
        return False
    fig, (ax_loss, ax_copy) = plt.subplots(1, 2, figsize=(11, 4.4))
    for k, (run, seed_rows) in enumerate(curves.items()):
        iters, step, _, _ = seed_curve(seed_rows, 'step_loss')
        ax_loss.plot(iters, step, color=f'C{k}', alpha=0.45, linewidth=1.0, label=f"_{info['labels'][run]}, steps")
        val_iters, *val = seed_curve(seed_rows, 'val_loss')
        mean_and_range(ax_loss, val_iters, val, k, 1, marker='o', markersize=3.5, linewidth=0.8,
                       label=info['labels'][run])
    reference_line(ax_loss, math.log(info['vocab_size']), 'log n')
    ax_loss.set(xlabel='iteration', ylabel='loss (nats/token)')
    ax_loss.set_title('loss: training steps (lines) and validation (dots)', fontsize=9)
    ax_loss.legend(fontsize=8)
    plot_copy(ax_copy, curves, info)
    for ax in (ax_loss, ax_copy):
        ax.grid(True, which='both', alpha=0.25)
    fig.suptitle(info['title'], fontsize=10)
    return save(plt, fig, path)


def plot_gradient_sources(path, curves, info):
    """Claim 11's figure: grad_out / grad_in at every logged step (smoothed as the loss is), mean over seeds
    with their range, one line per mode, on a log axis; the dotted line closes the early window that the
    summary's ratio sums over. False, with no file, where no run has the probe."""
    def ratio(r):
        return r['grad_out'] / r['grad_in'] if r['grad_in'] and r['grad_out'] is not None else None
    plt = pyplot()
    ratios = [seed_curve([[dict(iter=r['iter'], ratio=ratio(r)) for r in rows] for rows in seed_rows], 'ratio')
              for seed_rows in curves.values()]
    if plt is None or not any(iters for iters, *_ in ratios):
        return False
    fig, ax = plt.subplots(figsize=(8, 4.8))
    for k, ((mode, seed_rows), (iters, *curve)) in enumerate(zip(curves.items(), ratios)):
        if iters:
            mean_and_range(ax, [i + 1 for i in iters], [smooth_log(values) for values in curve], k, len(seed_rows),
                           linewidth=1.2, linestyle=line_style(mode), label=info['labels'][mode])
    ax.set(xscale='log', yscale='log', xlabel='iteration + 1 (log scale)',
           ylabel='|output-side gradient| / |input-side gradient|')
    ax.axhline(1, color='gray', linestyle=':', linewidth=1)
    ax.axvline(EARLY_FRACTION * info['max_iters'], color='gray', linestyle=':', linewidth=1)
    ax.set_title(f"where the token matrix's gradient comes from ({info['dataset']}, mean of {len(info['seeds'])} "
                 f"seed(s), range shaded)\nuntied: head over embedding; dotted: the end of the first "
                 f"{100 * EARLY_FRACTION:g} %", fontsize=9)
    ax.grid(True, which='both', alpha=0.25)
    ax.legend(fontsize=8, ncol=2)
    return save(plt, fig, path)


def row_loss(cells, key='val_loss_all'):
    """A row's mean loss over its seeds; inf where a seed diverged (its rate too high: a sweep's worst cell) or the
    mean is not a number (NaN ranks before nothing and after nothing: a best taken with min would hang on the order);
    None where a seed has no loss (a mean over the others would pass for the row's)."""
    diverged = any(at is not None for at in cells.get('diverged_at', {}).get('per_seed', []))
    if diverged:
        return math.inf
    if None in (cells.get(key, {}).get('per_seed') or []):  # a seed without its loss: no mean over the row's seeds
        return None
    mean = cells.get(key, {}).get('mean')
    return math.inf if mean is not None and not math.isfinite(mean) else mean


def rate_cells(info, key='val_loss_all'):
    """Experiment 6's sweep read from an ablation's rows: ({(embed x, head x): loss} of untied rows, {embed x: loss}
    of tied rows), the rates as multiples of learning_rate (a row without _eX/_hY at 1), mean over seeds."""
    from lab.ablation_grid import parse_row
    untied, tied = {}, {}
    for mode, cells in info['modes'].items():
        row, loss = parse_row(mode), row_loss(cells, key)
        if loss is None or row.unties or row.zero_head or row.input_grad_scale is not None:
            continue  # arms of their own: the untying tied, the zero head
        embed, head = row.embed_mult or 1.0, row.head_mult or 1.0
        if row.tie_mode == 'untied':
            untied[(embed, head)] = loss
        elif row.tie_mode == 'tied':
            tied[embed] = loss
    return untied, tied


def plot_rate_sweep(path, info, key='val_loss_all'):
    """Experiment 6's figure: untied's loss over (embed rate, head rate) as a heat map with its best cell boxed,
    and tied's over its one rate beside it, with untied's best as a line. False, with no file, where matplotlib
    is missing or the grid sweeps no rate (fewer than two embed and two head rates)."""
    plt = pyplot()
    untied, tied = rate_cells(info, key)
    embeds, heads = sorted({e for e, _ in untied}), sorted({h for _, h in untied})
    if plt is None or len(embeds) < 2 or len(heads) < 2:
        return False
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.6), gridspec_kw=dict(width_ratios=[1.2, 1]))
    grid = [[untied.get((e, h), float('nan')) for h in heads] for e in embeds]
    best = min(untied, key=untied.get)
    finite = [v for v in untied.values() if math.isfinite(v)]
    image = left.imshow(grid, origin='lower', cmap='viridis_r', aspect='auto',
                        vmin=min(finite), vmax=min(max(finite), min(finite) + 1.0))  # a diverged cell saturates
    for i, e in enumerate(embeds):
        for j, h in enumerate(heads):
            if (e, h) in untied:
                left.text(j, i, f"{untied[(e, h)]:.3f}", ha='center', va='center', fontsize=7,
                          color='white' if untied[(e, h)] > min(finite) + 0.5 else 'black',
                          fontweight='bold' if (e, h) == best else 'normal')
    left.add_patch(plt.Rectangle((heads.index(best[1]) - 0.5, embeds.index(best[0]) - 0.5), 1, 1, fill=False,
                                 edgecolor='red', linewidth=2))
    left.set(xticks=range(len(heads)), xticklabels=[f"{h:g}" for h in heads], xlabel='head rate / learning_rate',
             yticks=range(len(embeds)), yticklabels=[f"{e:g}" for e in embeds], ylabel='embedding rate / learning_rate')
    left.set_title(f"untied: {key} (best boxed: embed x{best[0]:g}, head x{best[1]:g})", fontsize=9)
    fig.colorbar(image, ax=left, fraction=0.05)
    right.set_xscale('log')
    if tied:
        rates = sorted(tied)
        right.plot(rates, [tied[r] for r in rates], marker='o', color='C1', label='tied (one rate)')
        low = min(tied, key=tied.get)
        right.plot([low], [tied[low]], marker='o', markersize=11, fillstyle='none', color='red')
        right.set_xticks(rates, [f"{r:g}" for r in rates])
        right.minorticks_off()
    right.axhline(untied[best], color='C0', linestyle='--', label=f"untied at its best ({untied[best]:.3f})")
    right.axhline(untied.get((1.0, 1.0), float('nan')), color='C0', linestyle=':', label='untied at x1, x1')
    finite_tied = [v for v in tied.values() if math.isfinite(v)] + finite
    right.set(xlabel='shared matrix rate / learning_rate', ylabel=key,
              ylim=(min(finite_tied) - 0.02, min(max(finite_tied), min(finite_tied) + 1.0) + 0.02))
    right.grid(True, which='both', alpha=0.25)
    right.legend(fontsize=8)
    optimizer = 'Muon + AdamW' if info['config'].get('optimizer') == 'muon' else 'AdamW'
    right.set_title(f"tied vs untied ({optimizer}, learning_rate {info['config']['learning_rate']:g}, "
                    f"{info['max_iters']} iterations)", fontsize=9)
    return save(plt, fig, path)


def plot_tuned_lens(path, info):
    """Claim 17's figure: each layer's tuned-lens loss (solid) and logit-lens loss (dashed), mean over seeds with
    their range, one colour per mode. False, with no file, where no row has the lens."""
    plt = pyplot()
    layers = info['config']['n_layer'] + 1
    if plt is None or not (lensed := lensed_rows(info)):
        return False
    fig, ax = plt.subplots(figsize=(8, 4.8))
    for k, (mode, cells) in enumerate(lensed.items()):
        for kind, style in (('tuned', '-'), ('logit', '--')):
            seeds = [cells[f'lens_{kind}_{layer}']['per_seed'] for layer in range(layers)]
            curve = [statistics.fmean(v) for v in seeds], [min(v) for v in seeds], [max(v) for v in seeds]
            mean_and_range(ax, range(layers), curve, k, len(info['seeds']), linestyle=style, marker='o', markersize=3,
                           label=f"{info['labels'][mode]}, {kind} lens")
    ax.set_xticks(range(layers), ['embedding'] + [f'block {layer}' for layer in range(1, layers)])
    ax.set_ylabel('validation loss read at that layer')
    ax.set_title(f"tuned lens (solid) and logit lens (dashed), {info['dataset']}: mean of {len(info['seeds'])} "
                 f"seed(s), range shaded", fontsize=9)
    ax.grid(True, alpha=0.25)
    ax.legend(fontsize=7, ncol=2)
    return save(plt, fig, path)
