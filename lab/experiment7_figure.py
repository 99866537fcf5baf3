"""Experiment 7's figure, docs/experiment7_cost.png, from the committed records. It draws tying's cost against the
tied parameter count at the default rates and at each arm's confirmed rates (the select rule's picks, read on their
five fresh seeds), the Muon line carried to GPT-2 small, and the sweeps' best rates against width; no runs, no data.

    python lab/experiment7_figure.py [PNG]          # default docs/experiment7_cost.png

A cost is tied - untied on the whole validation split, paired by seed, with its 95 % interval (Student's t)."""

import math
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from lab import experiment7_tables as tables  # noqa: E402
from lab.ablation_figure import pyplot, rate_cells, save  # noqa: E402
from lab.ablation_report import paired_interval, t_975  # noqa: E402
from lab.rate_selection import RESULTS, best_rows, load, row_key  # noqa: E402

GPT2_SMALL = dict(n_embd=768, n_layer=12, n_head=12, block_size=1024)  # and GPT-2's 50,257 ids


def record(name):
    return load(os.path.join(RESULTS, name, 'summary.json'))


def select_record(optimizer, size):
    """The select record whose picks a size's fresh record trains, by config/experiment7.sh's rule (muon_select):
    the one taken whole on one Xeon (-xeon) where there is one, as at w96 and w160 under Muon."""
    name = f'experiment7-select-{optimizer}-{size}'
    return f'{name}-xeon' if os.path.isdir(os.path.join(RESULTS, f'{name}-xeon')) else name


def picks(info):
    """A record's best rows, (untied's, tied's), by its whole-split means."""
    untied, tied = rate_cells(info)
    rows = best_rows(untied, tied)
    return rows[0], rows[-1]


def cost(info, tied, untied):
    """tied - untied in one record, paired by seed: (difference, low, high)."""
    per_seed = [info['modes'][row]['val_loss_all']['per_seed'] for row in (tied, untied)]
    return paired_interval(*per_seed)


def costs():
    """{(optimizer, 'default' | 'best'): [(tied parameters, (difference, low, high)), ...]}, smallest size first:
    the default rates from each size's five-seed confirmation, the best from its select record's picks on the
    fresh seeds."""
    points = {}
    for optimizer, sizes in tables.OPTIMIZERS.items():
        for size in sizes:
            params = tables.counts(tables.resolve(size))['tied']
            confirm = record(f'experiment7-confirm-{optimizer}-{size}')
            untied, tied = picks(record(select_record(optimizer, size)))
            points.setdefault((optimizer, 'default'), []).append((params, cost(confirm, 'tied', 'untied')))
            fresh = record(f'experiment7-fresh-{optimizer}-{size}')
            points.setdefault((optimizer, 'best'), []).append((params, cost(fresh, tied, untied)))
    return points


def carried(points, n):
    """The least-squares line of cost on log10(parameters) through points [(parameters, cost)], read at n
    parameters, with its 95 % prediction interval for a new size: (cost, low, high, slope per tenfold)."""
    xs, ys = [math.log10(p) for p, _ in points], [c for _, c in points]
    k, mx, my = len(xs), sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    residual = math.sqrt(sum((y - my - slope * (x - mx)) ** 2 for x, y in zip(xs, ys)) / (k - 2))
    x = math.log10(n)
    y, half = my + slope * (x - mx), t_975(k - 2) * residual * math.sqrt(1 + 1 / k + (x - mx) ** 2 / sxx)
    return y, y - half, y + half, slope


def gpt2_small_params():
    return tables.counts(dict(tables.resolve('recipe_ladder.py'), **GPT2_SMALL), 50_257)['tied']


def draw(path):
    plt = pyplot()
    if plt is None:
        raise SystemExit('error: drawing the figure needs matplotlib (pip install matplotlib)')
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.6))
    colours = {'muon': 'tab:blue', 'adamw': 'tab:orange'}
    for (optimizer, rates), line in costs().items():
        xs = [p for p, _ in line]
        ys, lows, highs = ([c[k] for _, c in line] for k in range(3))
        left.errorbar(xs, ys, yerr=[[y - lo for y, lo in zip(ys, lows)], [hi - y for y, hi in zip(ys, highs)]],
                      color=colours[optimizer], marker='s' if rates == 'best' else 'o', capsize=3,
                      mfc=colours[optimizer] if rates == 'best' else 'white', ls='-' if rates == 'best' else '--',
                      label=f"{optimizer}, {'confirmed rates, fresh seeds' if rates == 'best' else 'default rates'}")
        if optimizer == 'muon' and rates == 'best':
            n = gpt2_small_params()
            y, lo, hi, _ = carried([(p, c[0]) for p, c in line], n)
            left.plot([xs[-1], n], [ys[-1], y], ':', color=colours[optimizer])
            left.errorbar([n], [y], yerr=[[y - lo], [hi - y]], color=colours[optimizer], marker='*', ms=11,
                          capsize=3, label='muon: the line carried to GPT-2 small')
            left.annotate(f'{y:+.3f} [{lo:+.3f}, {hi:+.3f}]', (n, hi), textcoords='offset points', xytext=(-150, 4),
                          color=colours[optimizer], fontsize=8)
    left.axhline(0, color='grey', lw=0.6)
    left.set(xscale='log', xlabel='parameters, tied model', ylabel='tied − untied, validation loss (nats)',
             title="tying's cost as the model grows (5 seeds, 95 % intervals)")
    left.legend(fontsize=7)
    widths = [tables.resolve(size)['n_embd'] for size in tables.SIZES]
    for optimizer, style in (('muon', '-'), ('adamw', '--')):
        sizes = tables.OPTIMIZERS[optimizer]
        best = [[row_key(row)[1] for row in picks(record(f'experiment7-sweep-{optimizer}-{size}'))]
                for size in sizes]  # [((table, head), tied), ...]
        x = [widths[tables.SIZES.index(size)] for size in sizes]
        rates = {'tied matrix': [t for _, t in best], 'untied table': [u[0] for u, _ in best],
                 'untied head': [u[1] for u, _ in best]}
        for (name, ys), (colour, marker) in zip(rates.items(), (('tab:purple', 'o'), ('tab:green', '^'),
                                                                 ('tab:red', 'v'))):
            right.plot(x, ys, style, color=colour, marker=marker, label=f'{name}, {optimizer}')
    right.set(yscale='log', xlabel='width', ylabel='best rate, multiple of learning_rate (1e-3)',
              title="the sweeps' best rates (one seed, half length)", xticks=widths)
    right.set_yticks([10, 30, 100, 300, 1000], ['×10', '×30', '×100', '×300', '×1000'])
    right.legend(fontsize=7)
    try:  # written whole or not at all: a temporary file beside it, then a rename
        save(plt, fig, path)
    except OSError as e:
        raise SystemExit(f'error: cannot write {path}: {e.strerror or e}') from None
    print(f'wrote {path}')


if __name__ == '__main__':
    draw(sys.argv[1] if sys.argv[1:] else os.path.join(ROOT, 'docs', 'experiment7_cost.png'))
