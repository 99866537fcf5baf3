"""An ablation's figures: loss_curves.png (every mode's training and validation loss, and its copy
probe) and grad_sources.png (where the shared matrix's gradient comes from), mean over seeds with
the seeds' range shaded. Each returns False, drawing nothing, where matplotlib is missing."""

import math
import statistics

from lib.ablation_grid import UNTIE_ROW
from lib.atomic_files import atomic_path
from lib.run_results import EARLY_FRACTION


def pyplot():
    """matplotlib's pyplot on a file-only backend, or None where matplotlib is not installed."""
    try:
        import matplotlib
        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def save(plt, fig, path):
    """Write fig as a PNG at path whole (a temporary file, then a rename), and free it."""
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=90, format='png')
    plt.close(fig)


def smooth_log(values, factor=1.15):
    """Mean over [i / factor, i * factor] for each index i: no smoothing over the first steps (where
    the log axis spreads them out), more later, as the eye reads a log-scaled axis."""
    prefix = [0.0]
    for v in values:
        prefix.append(prefix[-1] + v)
    out = []
    for i in range(len(values)):
        lo, hi = int(i / factor), min(len(values) - 1, int(i * factor))
        out.append((prefix[hi + 1] - prefix[lo]) / (hi + 1 - lo))
    return out


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


def spread_band(ax, x, low, high, color, seeds):
    """The seeds' range around a mean curve: the spread the differences in the table must stand out from."""
    if seeds > 1:
        ax.fill_between(x, low, high, color=color, alpha=0.15, linewidth=0)


def line_style(mode):
    """Dashed for the untie row: until the untie it is the tied run, step for step, and would hide it."""
    return (0, (4, 2)) if mode == UNTIE_ROW else '-'


def plot_copy(ax, curves, info, colors):
    """Right panel: copy_prob at the evaluations, on a log axis, since a tied start near 1 and the others'
    near 1/n are orders of magnitude apart; the text's repeat rate (dashed) is where a model that copies
    only as often as the text repeats ends up."""
    drawn = []
    for k, (mode, seed_rows) in enumerate(curves.items()):
        iters, copy, low, high = seed_curve(seed_rows, 'copy_prob')
        if iters:
            spread_band(ax, iters, low, high, colors[k % len(colors)], len(seed_rows))
            ax.plot(iters, copy, color=colors[k % len(colors)], marker='o', markersize=3.5, linewidth=1.0,
                    linestyle=line_style(mode), label=info['labels'][mode])
            drawn += copy
    ax.set_xlabel('iteration')
    if not drawn:  # every run predates the copy probe: say so rather than draw empty axes
        ax.text(0.5, 0.5, "no copy_prob in these runs' metrics.csv\n(trained before the copy probe)",
                ha='center', va='center', transform=ax.transAxes, color='gray')
        ax.set_title('copy probe', fontsize=9)
        return
    ax.set_yscale('log')
    references = [(1 / info['vocab_size'], ':', '1/n')]
    if info['repeat_rate']:  # 0 on a log axis is nowhere: leave it out
        references.append((info['repeat_rate'], '--', 'repeat rate of the text'))
    for value, style, text in references:
        # The label starts with '_', which keeps it out of a legend; it names the line for a reader of the figure.
        ax.axhline(value, color='gray', linestyle=style, linewidth=1, label='_' + text)
        ax.text(0.99, value, text, va='bottom', ha='right', color='gray', fontsize=8,
                transform=ax.get_yaxis_transform())
    if info['untie_iter'] is not None:
        color = colors[list(curves).index(UNTIE_ROW) % len(colors)]
        ax.axvline(info['untie_iter'], color=color, linestyle=':', linewidth=1)
    ax.set_ylabel('copy_prob: p(next token = current token)')
    ax.set_title('copying, on the validation batches' +
                 (f" (dotted: the untie at iteration {info['untie_iter']})" if info['untie_iter'] is not None else ''),
                 fontsize=9)


def plot(path, curves, info):
    """Training (light, smoothed) and validation (markers) curves of every mode, and its copy_prob at
    the evaluations, mean over seeds; validation loss and copy_prob with the seeds' range shaded.
    Returns False, without a figure, where matplotlib is missing."""
    plt = pyplot()
    if plt is None:
        return False
    log_n = math.log(info['vocab_size'])
    # Saved at 90 dpi rather than 100: about 1500 x 430 pixels, and a file a sixth larger than the two panels made.
    fig, (ax_all, ax_end, ax_copy) = plt.subplots(1, 3, figsize=(16.5, 4.8))
    colors = plt.get_cmap('tab10').colors
    max_iters = info['max_iters']
    starts, lows, ends = {}, [], {}
    for k, (mode, seed_rows) in enumerate(curves.items()):
        color = colors[k % len(colors)]
        iters, step, _, _ = seed_curve(seed_rows, 'step_loss')
        smoothed = smooth_log(step)
        val_iters, val, val_low, val_high = seed_curve(seed_rows, 'val_loss')
        x = [i + 1 for i in iters]
        for ax in (ax_all, ax_end):
            spread_band(ax, [i + 1 for i in val_iters], val_low, val_high, color, len(seed_rows))
            ax.plot(x, smoothed, color=color, alpha=0.45, linewidth=1.0, linestyle=line_style(mode))
            ax.plot([i + 1 for i in val_iters], val, color=color, marker='o', markersize=3.5, linewidth=0.8,
                    linestyle=line_style(mode), label=info['labels'][mode])
        starts[mode] = smoothed[0]
        lows.append(min(smoothed + val))
        ends[mode] = [v for i, v in zip(iters, smoothed) if i >= max_iters // 2] + \
                     [v for i, v in zip(val_iters, val) if i >= max_iters // 2]
    # Left: the whole run on a log axis, so the first hundred steps are visible. The top is set by the
    # typical start, so one mode starting far above the others does not squash the rest.
    low = min(lows)
    top = max(log_n, statistics.median(starts.values()))
    top += 0.12 * (top - low)
    clipped = [f"{m} {v:.2f}" for m, v in starts.items() if v > top]
    ax_all.set_xscale('log')
    ax_all.set_ylim(low - 0.05 * (top - low), top)
    ax_all.axhline(log_n, color='gray', linestyle=':', linewidth=1)
    ax_all.text(0.99, log_n, 'log n', va='bottom', ha='right', color='gray', fontsize=8,
                transform=ax_all.get_yaxis_transform())
    ax_all.set_xlabel('iteration + 1 (log scale)')
    ax_all.set_ylabel('loss (nats/token)')
    ax_all.set_title('whole run' + (f" (off scale at the start: {', '.join(clipped)})" if clipped else ''),
                     fontsize=9)
    # Right: the second half, zoomed in, where the final differences are. A mode that ends far above
    # the typical spread (more than that spread again above the median top) is left off scale and named.
    ax_end.set_xlim(max_iters // 2 + 1, max_iters + 1)
    lo_end = min(min(v) for v in ends.values())
    typical = statistics.median(max(v) for v in ends.values())
    hi_end = max(max(v) for v in ends.values() if min(v) <= typical + max(typical - lo_end, 0.05))
    pad = 0.08 * (hi_end - lo_end or 0.1)
    ax_end.set_ylim(lo_end - pad, hi_end + pad)
    far = [f"{m} {v[-1]:.2f}" for m, v in ends.items() if min(v) > hi_end + pad]
    ax_end.set_title('second half, zoomed in' + (f" (off scale: {', '.join(far)})" if far else ''), fontsize=9)
    ax_end.set_xlabel('iteration + 1')
    ax_end.legend(fontsize=8, ncol=2)
    plot_copy(ax_copy, curves, info, colors)
    for ax in (ax_all, ax_end, ax_copy):
        ax.grid(True, which='both', alpha=0.25)
    cfg = info['config']
    seeds = len(info['seeds'])
    fig.suptitle(f"{info['dataset']}: {cfg['n_layer']}L x {cfg['n_embd']}, {max_iters} iterations, "
                 f"zero_init_residual={str(cfg['zero_init_residual']).lower()}, "
                 f"emb_scale={str(cfg['emb_scale']).lower()}; "
                 f"{'mean of ' + str(seeds) + ' seeds (shaded: lowest to highest)' if seeds > 1 else 'one seed'}; "
                 f"losses: training steps (lines, smoothed) and validation (dots); right: copy_prob", fontsize=10)
    save(plt, fig, path)
    return True


def plot_gradient_sources(path, curves, info):
    """Claim 11's figure: grad_out / grad_in at every logged step (smoothed as the loss is), mean over seeds
    with their range, one line per mode, on a log axis; the dotted line closes the early window that the
    summary's ratio sums over. False, with no file, where matplotlib is missing or no run has the probe."""
    plt = pyplot()
    if plt is None:
        return False
    fig, ax = plt.subplots(figsize=(8, 4.8))
    colors = plt.get_cmap('tab10').colors
    drawn = False
    for k, (mode, seed_rows) in enumerate(curves.items()):
        ratios = [[dict(iter=r['iter'], ratio=r['grad_out'] / r['grad_in'] if r['grad_in'] and r['grad_out'] is not None
                        else None) for r in rows] for rows in seed_rows]
        iters, mean, low, high = seed_curve(ratios, 'ratio')
        if not iters:
            continue
        color = colors[k % len(colors)]
        x = [i + 1 for i in iters]
        spread_band(ax, x, smooth_log(low), smooth_log(high), color, len(seed_rows))
        ax.plot(x, smooth_log(mean), color=color, linewidth=1.2, linestyle=line_style(mode), label=info['labels'][mode])
        drawn = True
    if not drawn:
        plt.close(fig)
        return False
    ax.set_xscale('log')
    ax.set_yscale('log')
    ax.axhline(1, color='gray', linestyle=':', linewidth=1)
    ax.axvline(EARLY_FRACTION * info['max_iters'], color='gray', linestyle=':', linewidth=1)
    ax.set_xlabel('iteration + 1 (log scale)')
    ax.set_ylabel('|output-side gradient| / |input-side gradient|')
    ax.set_title(f"where the token matrix's gradient comes from ({info['dataset']}, mean of {len(info['seeds'])} "
                 f"seed(s), range shaded)\nuntied: head over embedding; dotted: the end of the first "
                 f"{100 * EARLY_FRACTION:g} %", fontsize=9)
    ax.grid(True, which='both', alpha=0.25)
    ax.legend(fontsize=8, ncol=2)
    save(plt, fig, path)
    return True
