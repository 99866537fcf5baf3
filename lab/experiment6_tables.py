"""docs/experiment6.md's tables and heat maps, from the summaries its runs left under docs/results/.

    python lab/experiment6_tables.py            # prints the markdown tables
    python lab/experiment6_tables.py --figures  # and redraws docs/exp6_rates_{adamw,muon}.png from them

Every difference is one setting's seeds minus another's, with a 95 % interval by Welch's t (lab/summary_tables.diff),
on the whole validation split at the end of training ('end') and at each run's best.pt ('best point')."""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from lab.ablation_figure import plot_rate_sweep, rate_cells  # noqa: E402
from lab.ablation_grid import parse_row  # noqa: E402
from lab.summary_tables import RESULTS, cell, diff, print_sections, read_summary  # noqa: E402


def sweep_summary(optimizer):
    """The half-length sweep's summary, with the cells the edges stage trained in a folder of their own
    (experiment6-rates-OPTIMIZER-e300: the same seed and data order as every cell) merged in."""
    def cell_of(row):  # untied_e1_h1 and untied are the same cell
        parsed = parse_row(row)
        return parsed.tie_mode, parsed.embed_mult or 1.0, parsed.head_mult or 1.0

    info = read_summary(f'experiment6-rates-{optimizer}')
    extra_name = f'experiment6-rates-{optimizer}-e300'
    if os.path.exists(os.path.join(RESULTS, extra_name)):
        swept = {cell_of(row) for row in info['modes']}  # the sweep's own runs stay; the folder adds new cells only
        info['modes'].update({row: cells for row, cells in read_summary(extra_name)['modes'].items()
                              if cell_of(row) not in swept})
    return info


def sweep_table(info):
    """The half-length sweep: untied's cells as a grid (embed rate down, head rate across), tied's as a row."""
    untied, tied = rate_cells(info)
    embeds, heads = sorted({e for e, _ in untied}), sorted({h for _, h in untied})
    best = min(untied, key=untied.get)
    lines = ['| embed \\ head | ' + ' | '.join(f"×{h:g}" for h in heads) + ' |', '|---|' + '---:|' * len(heads)]
    for e in embeds:
        values = [untied.get((e, h)) for h in heads]
        lines.append(f"| ×{e:g} | " + ' | '.join('' if v is None else (f"**{v:.3f}**" if (e, h) == best else f"{v:.3f}")
                                                 for v, h in zip(values, heads)) + ' |')
    low = min(tied, key=tied.get)
    lines += ['', '| tied, shared rate | ' + ' | '.join(f"×{r:g}" for r in sorted(tied)) + ' |',
              '|---|' + '---:|' * len(tied),
              '| whole split, end | ' + ' | '.join(f"**{tied[r]:.3f}**" if r == low else f"{tied[r]:.3f}"
                                                 for r in sorted(tied)) + ' |']
    return lines, best, low


def sweep_section(optimizer, figures=False):
    """The sweep under optimizer and its base rates: (heading, lines); figures=True also redraws its heat map."""
    info = sweep_summary(optimizer)
    if figures:
        plot_rate_sweep(os.path.join(os.path.dirname(RESULTS), f'exp6_rates_{optimizer}.png'), info)
    lines, best, low = sweep_table(info)
    # each base rate's untied and tied, the sweep's at x1 (untied_e1_h1, tied_e1: rate_cells reads both alike)
    factors = ('0.3', '1', '3', '10')
    cells = [rate_cells(info if factor == '1' else read_summary(f'experiment6-rates-{optimizer}-base{factor}'))
             for factor in factors]
    return (f"### The sweep under {optimizer}: whole-split validation loss after 350 iterations, one seed",
            lines + ['', f"best: untied at embed ×{best[0]:g}, head ×{best[1]:g}; tied at ×{low:g}", '',
                     f"Base rate under {optimizer} (every rate of the model times the factor; ends at ×1 of it):", '',
                     '| | ' + ' | '.join(f"×{factor}" for factor in factors) + ' |', '|---|' + '---:|' * len(factors),
                     '| untied | ' + ' | '.join(f"{untied[(1.0, 1.0)]:.3f}" for untied, _ in cells) + ' |',
                     '| tied | ' + ' | '.join(f"{tied[1.0]:.3f}" for _, tied in cells) + ' |'])


def main(figures=False):
    sections = [sweep_section(optimizer, figures) for optimizer in ('adamw', 'muon')]
    sources = confirm_sources()
    print_sections(sections + confirm_tables(sources) + [split_table(sources)] + decay_tables(sources))


# Stage 2's comparisons: (label, one setting, minus another), each a key of confirm_sources()'s rows
COMPARISONS = [('tied − untied, default rates', 'tied', 'untied'),
               ('tied − untied, each at its best rates', 'tied_best', 'untied_best'),
               ('untied: best rates − default', 'untied_best', 'untied'),
               ('tied: best rate − default', 'tied_best', 'tied'),
               ('tied untied at 2/3 − tied, at tied\'s best rate', 'tied_untie_best', 'tied_best')]


def confirm_sources():
    """{optimizer: {setting: (summary, row)}} of stage 2; AdamW's default rates are experiment 5's runs."""
    adamw, default = read_summary('experiment6-confirm-adamw'), read_summary('experiment5-bpe')
    sources = dict(adamw=dict(untied=(default, 'untied'), tied=(default, 'tied'), untied_best=(adamw, 'untied_e30_h3'),
                              tied_best=(adamw, 'tied_e10'), tied_untie_best=(adamw, 'tied_untie_e10')))
    # Muon as experiment 6 ran it (q, k, v stacked, orthogonalised as one matrix), then with each apart (the
    # controls stage: --muon_qkv=split, the default since)
    for optimizer, name in (('muon', 'experiment6-confirm-muon'), ('muon, q/k/v apart', 'experiment6-confirm-muon-split')):
        muon = read_summary(name)
        sources[optimizer] = dict(untied=(muon, 'untied'), tied=(muon, 'tied'), untied_best=(muon, 'untied_e10_h3'),
                                  tied_best=(muon, 'tied_e10'), tied_untie_best=(muon, 'tied_untie_e10'))
    return sources


def split_table(sources):
    """Muon with q, k, v orthogonalised apart minus as one stacked matrix, row by row (the same seeds and data)."""
    split, fused = sources['muon, q/k/v apart'], sources['muon']
    lines = ['| setting | row | q/k/v apart | as one matrix | apart − as one |', '|---|---|---:|---:|---:|']
    for setting, row in split.items():
        lines.append(f"| {setting} | `{row[1]}` | {cell(*row)} | {cell(*fused[setting])} | "
                     f"{diff(row, fused[setting])} |")
    return '### Muon: q, k, v apart against as one matrix (whole split, end)', lines


# The controls of the ends' decay: at each best row, the decay per step held at x1's (per_step) or none, against
# torch's coupling (the best rows of stage 2). {optimizer of stage 2: the controls' folder prefix}
DECAY_CONTROLS = {'adamw': 'experiment6-decay-adamw', 'muon, q/k/v apart': 'experiment6-decay-muon'}
DECAY_FORMS = ('coupled', 'per_step', 'none')


def decay_sources(confirmed):
    """{optimizer: {form: {setting: (summary, row)}}}: 'coupled' is stage 2's best rows; the others the controls'."""
    sources = {}
    for optimizer, prefix in DECAY_CONTROLS.items():
        rows = confirmed[optimizer]
        sources[optimizer] = {'coupled': rows}
        for form in DECAY_FORMS[1:]:
            control = read_summary(f'{prefix}-{form}')
            sources[optimizer][form] = dict(rows, untied_best=(control, rows['untied_best'][1]),
                                            tied_best=(control, rows['tied_best'][1]))
    return sources


# (label, one setting minus another) under each decay form: the cost at the best rates, and what each rate bought
DECAY_COMPARISONS = [('tied − untied, each at its best rates', 'tied_best', 'untied_best'),
                     ('tied: best rate − default', 'tied_best', 'tied'),
                     ('untied: best rates − default', 'untied_best', 'untied')]


def decay_tables(confirmed):
    """The controls: which carries the cost that the best rates recovered, the rate or the decay that came with it."""
    sources = decay_sources(confirmed)
    lines = ['| optimizer | ends\' decay | tied, best rate | untied, best rates | '
             + ' | '.join(label for label, _, _ in DECAY_COMPARISONS) + ' |', '|---|---|' + '---:|' * 5]
    for optimizer, forms in sources.items():
        for form, rows in forms.items():
            lines.append(f"| {optimizer} | {form} | {cell(*rows['tied_best'])} | {cell(*rows['untied_best'])} | "
                         + ' | '.join(diff(rows[a], rows[b]) for _, a, b in DECAY_COMPARISONS) + ' |')
    sections = [('### The ends\' decay at the best rates (whole split, end; [95 % interval, Welch])', lines)]
    # the decay's own share: the same rate, with the ends' decay per step held at x1's (or none), minus coupled
    lines = ['| optimizer | ends\' decay | tied: this − coupled | untied: this − coupled |', '|---|---|---:|---:|']
    for optimizer, forms in sources.items():
        for form, rows in forms.items():
            if form != 'coupled':
                lines.append(f"| {optimizer} | {form} | " + ' | '.join(
                    diff(rows[key], forms['coupled'][key]) for key in ('tied_best', 'untied_best')) + ' |')
    return sections + [('### What the decay that came with the rate bought (whole split, end)', lines)]


def confirm_tables(sources):
    """Stage 2: five seeds, full length, the differences, and the tuned lens where its runs were lensed."""
    lines = ['| optimizer | setting | row | whole split, end | whole split, best point |', '|---|---|---|---:|---:|']
    for optimizer, rows in sources.items():
        for setting, (source, row) in rows.items():
            lines.append(f"| {optimizer} | {setting} | `{row}` | {cell(source, row)} | "
                         f"{cell(source, row, 'best_val_loss_all')} |")
    sections = [('### Five seeds, full length', lines)]
    lines = ['| difference | optimizer | end | best point |', '|---|---|---:|---:|']
    for label, a, b in COMPARISONS:
        for optimizer, rows in sources.items():
            lines.append(f"| {label} | {optimizer} | {diff(rows[a], rows[b])} | "
                         f"{diff(rows[a], rows[b], 'best_val_loss_all')} |")
    sections.append(('### Differences [95 % interval, Welch]', lines))
    return sections + [lens_table(*pair) for pair in lens_pairs(sources)]


def lens_pairs(sources):
    """[(optimizer, rates, (summary, tied row), (summary, untied row))]: claim 17's pairs whose runs were lensed."""
    again = read_summary('experiment6-lens-adamw')  # experiment 5's untied and tied trained again, with the lens
    lensed, pairs = dict(sources, adamw=dict(sources['adamw'], untied=(again, 'untied'), tied=(again, 'tied'))), []
    for optimizer, rows in lensed.items():
        for rates, (tied_key, untied_key) in (('default rates', ('tied', 'untied')),
                                              ('each at its best rates', ('tied_best', 'untied_best'))):
            (source, tied), (untied_source, untied) = rows[tied_key], rows[untied_key]
            if source['modes'][tied].get('lens_gap_0', {}).get('mean') is not None:
                pairs.append((optimizer, rates, (source, tied), (untied_source, untied)))
    return pairs


def lens_table(optimizer, rates, tied, untied):
    """Claim 17: each layer's tuned-lens loss, tied against untied, and the gap to each model's own final loss:
    (heading, lines)."""
    source = tied[0]
    layers = source['config']['n_layer'] + 1
    names = ['embedding'] + [f'block {layer}' for layer in range(1, layers)]
    lines = [f"Tuned lens under {optimizer}, {rates}: `{tied[1]}` and `{untied[1]}` (whole split, mean ± std over "
             f"seeds):", '| | ' + ' | '.join(names) + ' |', '|---|' + '---:|' * layers]
    for row in (tied, untied):
        lines.append(f"| `{row[1]}` | " + ' | '.join(cell(*row, f'lens_tuned_{layer}') for layer in range(layers)) + ' |')
    lines.append('| gap to own final loss, tied − untied | ' + ' | '.join(
        diff(tied, untied, f'lens_gap_{layer}') for layer in range(layers - 1)) + ' | |')
    lines.append('| logit lens, tied − untied | ' + ' | '.join(
        diff(tied, untied, f'lens_logit_{layer}') for layer in range(layers - 1)) + ' | |')
    return lines[0], lines[1:]


if __name__ == '__main__':
    main(figures='--figures' in sys.argv[1:])
