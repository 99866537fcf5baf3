"""An ablation's report: mean and spread over seeds, intervals against untied (or another ablation) paired by seed
beside Welch's, the floor that counting alone reaches (lab/floor.py), and the markdown tables of summary.md,
summary.json and runs.csv."""

import contextlib
import csv
import json
import math
import os
import platform
import re
import shlex
import statistics

from lab.ablation_grid import (ABLATE_KEYS, BOOKKEEPING_KEYS, UNTIE_ROW, fraction_text, recorded_eval_seed, row_label,
                               untie_iter)
from lib.atomic_files import atomic_path
from lib.command_line import UserError
from lab.grid_runner import LOG_FILE
from lab.floor import floor_lines
from lab.run_results import (ALIGNMENT_COLUMNS, BEST_BUCKET_COLUMNS, BEST_BUCKET_TOKENS, BUCKET_COLUMNS, BUCKET_TOKENS,
                             EARLY_FRACTION, FRACTIONS, GRAD_SPIKE_FACTOR, LOSS_SPIKE_SIGMAS, MAX_BUCKET_TARGETS, SPIKE_MIN_HISTORY, SPIKE_WINDOW, WINDOW, BucketData,
                             checkpoint_numbers, lens_keys, lens_numbers, lensed_rows, number, read_metrics, read_result,
                             run_numbers)


CSV_FIELDS = ('mode', 'seed', 'iter', 'step_loss', 'train_loss', 'val_loss', 'lr', 'tokens_per_sec',
              'data_fingerprint', 'copy_prob', 'repeat_rate', 'self_margin', 'grad_norm', 'grad_in', 'grad_out')


# metrics.csv columns read as numbers; runs older than the copy probe lack the last four (None then).
METRIC_KEYS = ('step_loss', 'train_loss', 'val_loss', 'tokens_per_sec', 'copy_prob', 'repeat_rate', 'self_margin',
               'grad_norm', 'grad_in', 'grad_out')


def mean_std(values):
    values = [v for v in values if v is not None]
    return (statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else None) if values else (None, None)


# Student's t, two-sided 95 % (the 0.975 quantile), for 1 to 30 degrees of freedom.
T_975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
         2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def t_975(df):
    """The 0.975 quantile of Student's t at a (fractional, Welch) df: linear between the table's whole
    degrees, and 1.96 + 2.4/df beyond 30 (within 0.002 of the exact value there)."""
    if df >= len(T_975):
        return 1.96 + 2.4 / df
    lo = max(1, math.floor(df))
    return T_975[lo - 1] + (df - lo) * (T_975[min(lo + 1, len(T_975)) - 1] - T_975[lo - 1])


def paired_interval(a, b):
    """The mean of the per-seed differences a[i] - b[i] and its 95 % confidence interval by Student's t on n - 1
    degrees of freedom: (difference, low, high); low and high are None with fewer than two pairs. For runs that
    share their seed's data order and evaluation batches (every row of an ablation, and ablations with the same
    seeds and eval_seed), whatever the seed does to both runs cancels in the difference. A pair with None on
    either side is left out."""
    diffs = [x - y for x, y in zip(a, b) if x is not None and y is not None]
    if len(diffs) < 2:
        return (statistics.fmean(diffs) if diffs else None), None, None
    return mean_interval(diffs)


def welch_interval(a, b):
    """mean(a) - mean(b) and its 95 % confidence interval by Welch's t (the seeds of two modes, unequal
    variances): (difference, low, high); low and high are None with fewer than two seeds a side."""
    a, b = [v for v in a if v is not None], [v for v in b if v is not None]
    if not a or not b:
        return None, None, None
    diff = statistics.fmean(a) - statistics.fmean(b)
    if len(a) < 2 or len(b) < 2:
        return diff, None, None
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    if va + vb == 0:
        return diff, diff, diff
    df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
    half = t_975(df) * math.sqrt(va + vb)
    return diff, diff - half, diff + half


# The columns compared with untied, seed against seed of each mode: a difference is called real only when its 95 %
# interval excludes zero. The bucket losses (BUCKET_COLUMNS) have a table of their own, and so their differences.
VERSUS_UNTIED = ('init_step_loss', 'train_loss_0.1', 'final_val_loss', 'best_val_loss', 'best_val_iter', 'gap_at_end',
                 'grad_spikes', 'loss_spikes', 'grad_ratio_early', *(key for key, *_ in BUCKET_COLUMNS + BEST_BUCKET_COLUMNS))
DIFF_DECIMALS = dict(best_val_iter=0, grad_spikes=1, loss_spikes=1, grad_ratio_early=2)  # counts; every loss difference gets 3


def differences(cells, base, interval):
    """{key: (difference, low, high)}: one mode's cells minus another's (base), seed by seed (paired_interval) or
    seed set against seed set (welch_interval), over the VERSUS_UNTIED columns. A key with no value on either side
    (an empty bucket, runs from before grad_norm, a summary.json older than the column) is left out."""
    return {key: found for key in VERSUS_UNTIED if key in cells and key in base
            and (found := interval(cells[key]['per_seed'], base[key]['per_seed']))[0] is not None}


def versus_row(table, base, interval):
    """{mode: {key: (difference, low, high)}}: every row but base and untied against base (untied, tied), if any."""
    return {mode: differences(cells, table[base], interval) for mode, cells in table.items()
            if mode not in (base, 'untied')} if base in table else {}


# The remedies of 2026 against plain tying (claims 12 and 13): what a row changes from tied, beside what
# it changes from untied. Shown where the grid has tied and some row other than untied.
VERSUS_TIED = (('grad_ratio_early', 'grad_out / grad_in, first 20 %'), ('grad_spikes', 'grad_norm spikes'),
               ('loss_spikes', 'loss spikes'), ('final_val_loss', 'val loss at end'),
               ('val_loss_all', 'whole split, end'), ('best_val_loss_all', 'whole split, best point'))


def read_other_summary(out_dir):
    path = os.path.join(out_dir, 'summary.json')
    try:
        with open(path, encoding='utf-8') as f:
            other = json.load(f)
    except OSError as e:
        raise UserError(f"--versus={out_dir}: cannot read {path} ({e.strerror or e}); it must be the out_dir of an "
                        f"ablation that has finished its summary") from None
    except ValueError:
        other = None
    if not (isinstance(other, dict) and isinstance(other.get('modes'), dict) and isinstance(other.get('config'), dict)):
        raise UserError(f"--versus={out_dir}: {path} is not an ablate.py summary.json")
    return other


def runs_pair(summary_a, summary_b):
    """Whether two summaries' runs pair seed by seed, as the rows of one ablation do: the same seeds, scored on the
    same evaluation batches (each seed then gives both the same data order)."""
    return (summary_a.get('seeds') is not None and summary_a.get('seeds') == summary_b.get('seeds')
            and summary_a.get('eval_seeds') == summary_b.get('eval_seeds'))


def versus_other(info, out_dir):
    """This ablation minus another (e.g. the same recipe without emb_scale), mode by mode over the VERSUS_UNTIED
    columns, seed sets against seed sets: {'out_dir', 'differs': {key: [this, that]}, 'modes': {mode: {key:
    (difference, low, high)}}}. Only the modes both have; what differs between the two configs is listed, so
    that the table says what the difference is the effect of."""
    other = read_other_summary(out_dir)
    paired = runs_pair(info, other)

    def minus_other(interval):
        return {mode: differences(cells, other['modes'][mode], interval) for mode, cells in info['modes'].items()
                if mode in other['modes']}
    modes = minus_other(paired_interval if paired else welch_interval)
    welch = minus_other(welch_interval) if paired else None
    differs = {key: [value, other['config'].get(key)] for key, value in info['config'].items()
               if key not in ABLATE_KEYS and other['config'].get(key) != value}
    return dict(out_dir=out_dir, differs=differs, modes=modes, paired=paired, welch=welch)


# The line every process that trains a run writes first into its log (ablate.train_run): where and in what
# precision. The precision is the machine's, not the config's, under --dtype=auto (bf16 on a CPU with native bf16,
# float32 on one without), so a grid finished on two kinds of CPU may hold both; the summary says which.
TRAINED_ON = re.compile(r'^ablate\.py: pid \d+ trains .*?, on (\S+) in (\w+) with ', re.M)


def trained_on(runs):
    """How the runs were trained, from their logs: 'every run on cpu in float32', or each way with its runs
    counted where they differ (a run resumed elsewhere counts under each of its ways)."""
    counts = {}
    for _, _, run_cfg in runs:
        ways = set()
        with contextlib.suppress(OSError), open(os.path.join(run_cfg['out_dir'], LOG_FILE), errors='replace') as f:
            ways = {f"on {device} in {dtype}" for device, dtype in TRAINED_ON.findall(f.read())}
        for way in ways or {'unrecorded'}:
            counts[way] = counts.get(way, 0) + 1
    return f"every run {next(iter(counts))}" if len(counts) == 1 else \
        '; '.join(f"{way}: {n} of {len(runs)} runs" for way, n in sorted(counts.items()))


def cpu_kind(cpuinfo, native_bf16):
    """The CPU's kind from /proc/cpuinfo's text: its name, x86 family and model (two AMD EPYC kinds share a name; Zen 2
    is family 23, Zen 3 and 4 family 25 with other models) and whether its bf16 matmuls run in hardware, which moves
    a bf16 run's ends between kinds."""
    fields = {}
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(':')
        fields.setdefault(key.strip(), value.strip())
    if not fields.get('model name'):
        return platform.processor() or ''
    family = f"; x86 family {fields['cpu family']} model {fields.get('model', '?')}" if 'cpu family' in fields else ''
    return f"{fields['model name']}{family}, bf16 {'native' if native_bf16 else 'emulated'}"


def machine_line():
    import torch
    from lib.device import cpu_has_native_bf16
    cpuinfo = ''
    with contextlib.suppress(OSError), open('/proc/cpuinfo') as f:
        cpuinfo = f.read()
    cpu = cpu_kind(cpuinfo, cpu_has_native_bf16())
    threads = os.environ.get('OMP_NUM_THREADS')
    return (f"{platform.platform()}, {os.cpu_count()} CPUs{' (' + cpu + ')' if cpu else ''}, python "
            f"{platform.python_version()}, torch {torch.__version__}, {torch.get_num_threads()} torch threads"
            f"{' (OMP_NUM_THREADS=' + threads + ')' if threads else ''}")


COLUMNS = [  # (key, header, format)
    ('params', 'params', '{:,.0f}'),
    ('init_step_loss', 'initial loss (step 0)', '{:.3f}'),
    ('init_val_loss', 'initial val loss', '{:.3f}'),
    ('predicted_init_loss', 'predicted (*)', '{:.3f}'),
    ('log_n', 'log n', '{:.3f}'),
    ('train_loss_0.01', 'train loss @1 %', '{:.3f}'),
    ('train_loss_0.1', 'train loss @10 %', '{:.3f}'),
    ('train_loss_1', 'train loss @100 %', '{:.3f}'),
    ('final_val_loss', 'val loss at end', '{:.3f}'),
    ('best_val_loss', 'best val loss', '{:.3f}'),
    ('best_val_iter', 'at iteration', '{:.0f}'),
    ('gap_at_end', 'val - train at end', '{:+.3f}'),
    ('grad_spikes', 'grad_norm spikes', '{:.1f}'),
    ('loss_spikes', 'loss spikes', '{:.1f}'),
    ('grad_ratio_early', 'grad_out / grad_in, first 20 %', '{:.2f}'),
    ('init_copy_prob', 'copy_prob at start', '{:.3g}'),
    ('unlearned_copy_iter', 'unlearned copy by', '{:.0f}'),
    ('final_copy_prob', 'copy_prob at end', '{:.3g}'),
    ('tokens_per_sec', 'tokens/s', '{:,.0f}'),
]


def iteration_range(center, max_iters):
    lo, hi = math.ceil(center / WINDOW), min(math.floor(center * WINDOW), max_iters - 1)
    return f"iteration {lo}" if lo >= hi else f"iterations {lo}-{hi}"


def summarize(cfg, runs, vocab_size, argv):
    """ablation.csv rows, and the per-mode numbers (per seed, mean, std) for summary.md/json."""
    csv_rows, per_mode, curves = [], {}, {}
    data = BucketData(cfg)
    untied_dirs = {seed: run_cfg['out_dir'] for mode, seed, run_cfg in runs if mode == 'untied'}
    for mode, seed, run_cfg in runs:
        result = read_result(os.path.join(run_cfg['out_dir'], 'result.json'))
        raw = read_metrics(run_cfg['out_dir'])
        csv_rows += [dict({k: r.get(k, '') for k in CSV_FIELDS}, mode=mode, seed=seed) for r in raw]
        # r.get: a metrics.csv older than a column has no such key, and its cells count as empty.
        rows = [dict({k: number(r.get(k)) for k in METRIC_KEYS}, iter=int(r['iter'])) for r in raw]
        numbers = run_numbers(rows, result, run_cfg['tie_mode'], cfg, vocab_size) if rows else dict(
            dict.fromkeys(key for key, _, _ in COLUMNS), probed=False)  # rows: none where step 0 diverged
        numbers.update(checkpoint_numbers(run_cfg['out_dir'], data, cfg, result.get('diverged'),
                                          None if mode == 'untied' else untied_dirs.get(seed)))
        numbers['eval_seed'] = recorded_eval_seed(result['config'])
        numbers.update(lens_numbers(run_cfg['out_dir'], run_cfg) if mode in cfg.get('tuned_lens', '').split(',')
                       else dict.fromkeys(lens_keys(cfg['n_layer'])))
        per_mode.setdefault(mode, []).append(numbers)
        curves.setdefault(mode, []).append(rows)
    table = {}
    for mode, seed_numbers in per_mode.items():
        table[mode] = {}
        for key in ([key for key, _, _ in COLUMNS + BUCKET_COLUMNS + BEST_BUCKET_COLUMNS + ALIGNMENT_COLUMNS]
                    + BUCKET_TOKENS + BEST_BUCKET_TOKENS + lens_keys(cfg['n_layer']) + ['diverged_at']):
            mean, std = mean_std([n[key] for n in seed_numbers])
            table[mode][key] = dict(mean=mean, std=std, per_seed=[n[key] for n in seed_numbers])
        # The mean and std are over the seeds that unlearned it; how many did, of those measured, is kept
        # with them, so that "2 of 3 seeds" is never read as all three.
        table[mode]['unlearned_copy_iter'].update(
            seeds_reached=sum(n['unlearned_copy_iter'] is not None for n in seed_numbers),
            seeds_probed=sum(n['probed'] for n in seed_numbers))
    seeds = [cfg['seed'] + k for k in range(cfg['seeds'])]
    max_iters = cfg['max_iters']
    points = {f: max(1, round(f * max_iters)) for f in FRACTIONS}
    # The same fixed validation batches at every evaluation of a seed, whatever the mode: one number.
    repeat_rates = [r['repeat_rate'] for seed_rows in curves.values() for rows in seed_rows for r in rows
                    if r['repeat_rate'] is not None]
    every_run = [n for seed_numbers in per_mode.values() for n in seed_numbers]
    info = dict(
        command='python ablate.py ' + shlex.join(argv), machine=machine_line(), trained_on=trained_on(runs),
        dataset=cfg['dataset'], vocab_size=vocab_size, seeds=seeds, max_iters=max_iters,
        config={k: v for k, v in cfg.items() if k not in BOOKKEEPING_KEYS},
        loss_at_fraction=(f"mean training step loss over the logged iterations within a factor {WINDOW} of "
                          f"iteration round(f * max_iters), the last iteration at most: " +
                          ', '.join(f"{100 * f:g} % -> {iteration_range(c, max_iters)}" for f, c in points.items())),
        labels={mode: row_label(mode, cfg['untie_at']) for mode in per_mode},
        untie_iter=untie_iter(cfg) if UNTIE_ROW in per_mode else None,
        repeat_rate=statistics.fmean(repeat_rates) if repeat_rates else None,
        unlearned_copy=("the first evaluated iteration at which copy_prob < 2 * repeat_rate; mean and std over "
                        "the seeds that reached it (seeds_reached of seeds_probed)"),
        modes=table,
        versus_untied=versus_row(table, 'untied', paired_interval),
        versus_untied_welch=versus_row(table, 'untied', welch_interval),
        versus_tied=versus_row(table, 'tied', paired_interval),
        versus_tied_welch=versus_row(table, 'tied', welch_interval),
        versus_other=None,
        buckets=(f"validation loss of the final checkpoint by how often the target token occurs in train.bin, "
                 f"over the whole validation split (at most its first {MAX_BUCKET_TARGETS:,} targets), each target "
                 f"once, in non-overlapping windows of block_size; per-token cross-entropy averaged per bucket, and "
                 f"over all of them (whole split)"),
        # Seed-independent evaluation: one eval_seed for every run, and best.pt scored on the whole split. Runs
        # made before either existed are summarised all the same; these say what they lack.
        eval_seeds=sorted({n['eval_seed'] for n in every_run}),
        runs_without_best=sum(n['best_val_loss_all'] is None for n in every_run),
    )
    return csv_rows, info, curves


def fmt(cell, spec, key):
    if cell['mean'] is None:
        return '–'
    text = spec.format(cell['mean'])
    if cell['std'] is not None and key not in ('params', 'predicted_init_loss', 'log_n'):  # seed-free: no ± 0
        text += ' ± ' + spec.format(cell['std'])
    if cell.get('seeds_reached', 0) < cell.get('seeds_probed', 0):
        text += f" ({cell['seeds_reached']} of {cell['seeds_probed']} seeds)"
    return text


def fmt_interval(diff, low, high, decimals=3):
    if diff is None:
        return '–'
    if low is None:
        return f"{diff:+.{decimals}f}"
    text = f"{diff:+.{decimals}f} [{low:+.{decimals}f}, {high:+.{decimals}f}]"
    return f"**{text}**" if low > 0 or high < 0 else text


def table_lines(info, headers, modes, cell):
    """A markdown table with a row per mode of modes ({mode: cells}), labelled as in info, and a
    column per header; cell(cells, i) gives the text of column i."""
    lines = ['| mode | ' + ' | '.join(headers) + ' |', '|---|' + '---:|' * len(headers)]
    for mode, cells in modes.items():
        lines.append(f"| {info['labels'][mode]} | " + ' | '.join(cell(cells, i) for i in range(len(headers))) + ' |')
    return lines


def column_table(info, columns, modes, tokens=None):
    """table_lines over columns [(key, header, format)], each cell as fmt writes it. tokens: a token count's key
    per column, for the bucket tables, whose headers give the count of the first row's runs (every run of an
    ablation is evaluated on the same tokens)."""
    first = next(iter(info['modes'].values()))
    headers = [header if tokens is None else f"{header} ({first[tokens[i]]['mean'] or 0:,.0f} tokens)"
               for i, (_, header, _) in enumerate(columns)]
    return table_lines(info, headers, modes, lambda cells, i: fmt(cells[columns[i][0]], columns[i][2], columns[i][0]))


# How a difference table's intervals are made, for its heading: paired where the seeds pair the runs.
PAIRED = ("mean of the per-seed differences, [95 % interval by Student's t on n - 1 degrees of freedom: each seed "
          "gives both rows the same data order and evaluation batches, so the runs pair] and, after it, Welch's "
          "interval, which ignores the pairing; **bold** where the paired interval excludes zero")
WELCH = "mean over seeds, [95 % interval by Welch's t]; **bold** where the interval excludes zero"


def versus_table(info, columns, versus, welch=None):
    """The rows of a difference table ({mode: {key: interval}}) over columns [(key, header, ...)]; with welch (the
    same shape), each cell is the paired interval as fmt_interval writes it followed by Welch's, where it has one."""
    both = {mode: {key: (interval, (welch or {}).get(mode, {}).get(key)) for key, interval in cells.items()}
            for mode, cells in versus.items()}

    def cell(cells, i):
        paired, other = cells.get(columns[i][0], ((None, None, None), None))
        decimals = DIFF_DECIMALS.get(columns[i][0], 3)
        return fmt_interval(*paired, decimals=decimals) + (
            f" (Welch [{other[1]:+.{decimals}f}, {other[2]:+.{decimals}f}])" if other and other[1] is not None else "")
    return table_lines(info, [header for _, header, *_ in columns], both, cell)


def versus_lines(info, heading, columns, versus, welch):
    """A difference table under its heading, whose {} says how its intervals are made (PAIRED where welch is given);
    nothing where there is no difference (no such base row, or no other row)."""
    return ["", heading.format(PAIRED if welch else WELCH), "", *versus_table(info, columns, versus, welch)] \
        if versus else []


def markdown(info):
    cfg, seeds = info['config'], info['seeds']
    lines = [
        f"# Tie-mode ablation: {info['dataset']} (vocab {info['vocab_size']})", "",
        f"{cfg['n_layer']} layers, {cfg['n_head']} heads, width {cfg['n_embd']}, context {cfg['block_size']}, "
        f"batch {cfg['batch_size']} x {cfg['gradient_accumulation_steps']}, {info['max_iters']} iterations, "
        + (f"Muon for the blocks' matrices (lr {cfg['muon_lr']:g}, momentum {cfg['muon_momentum']:g}) and AdamW for "
           f"the rest, " if cfg.get('optimizer') == 'muon' else "AdamW, ") +
        f"lr {cfg['learning_rate']:g} (warmup {cfg['warmup_iters']}, cosine to {cfg['min_lr']:g} at "
        f"{cfg['lr_decay_iters'] or info['max_iters']}), init_std {cfg['init_std']:g}, "
        f"zero_init_residual={str(cfg['zero_init_residual']).lower()}, emb_scale={str(cfg['emb_scale']).lower()}, "
        f"dropout {cfg['dropout']:g}; "
        + (f"{len(seeds)} seeds ({', '.join(map(str, seeds))}), mean ± std over seeds."
           if len(seeds) > 1 else f"one seed ({seeds[0]})."), ""]
    lines += column_table(info, COLUMNS, info['modes'])
    if info.get('floor'):
        lines += ["", *floor_lines(info['floor'])]
    repeat = (f"{info['repeat_rate']:.3g}, mean over seeds" if info['repeat_rate'] is not None
              else "not measured: these runs predate the copy probe")
    untie = "" if info['untie_iter'] is None else (
        f"{info['labels'][UNTIE_ROW]}: the {UNTIE_ROW} runs, tie_mode=tied until iteration {info['untie_iter']} = "
        f"round({fraction_text(cfg['untie_at'])} x {info['max_iters']}) and with a head of its own from there on (its "
        "params count both matrices); the other rows never untie. ")
    versus, welch = info.get('versus_untied'), info.get('versus_untied_welch')
    lines += versus_lines(info, "Difference from untied (mode minus untied, {}):",
                          [column for column in COLUMNS if column[0] in VERSUS_UNTIED], versus, welch)
    if has_buckets := any(cells[key]['mean'] is not None
                          for cells in info['modes'].values() for key, _, _ in BUCKET_COLUMNS):
        lines += ["", "Validation loss by the target token's count in train.bin (final checkpoint, whole validation "
                      "split; tokens in each bucket in the header; '–' where a bucket is empty):", ""]
        lines += column_table(info, BUCKET_COLUMNS, info['modes'], BUCKET_TOKENS)
        lines += versus_lines(info, "The same, mode minus untied ({}):", BUCKET_COLUMNS, versus, welch)
    lines += versus_lines(info, "Difference from tied (mode minus tied, {}):", VERSUS_TIED, info.get('versus_tied'),
                          info.get('versus_tied_welch'))
    lines += best_point_lines(info, versus, welch)
    lines += gradient_source_lines(info)
    lines += lens_lines(info)
    if aligned := {mode: cells for mode, cells in info['modes'].items() if cells['cka_emb']['mean'] is not None}:
        lines += ["", "Alignment of each run's final shared matrix (pit: its memory U) with the same seed's untied "
                      "run, by linear CKA (blind to rotations and scale of the hidden space; 1 = the same geometry), "
                      "beside the CKA of two independent random matrices of that shape:", ""]
        lines += column_table(info, ALIGNMENT_COLUMNS, aligned)
        lines += ["", "CKA to the untied head minus CKA to the untied embedding, per seed, then mean "
                      "[95 % interval by Student's t over seeds]:", ""]
        lines += [f"- {info['labels'][mode]}: {head_minus_embedding(cells)}" for mode, cells in aligned.items()]
    if other := info.get('versus_other'):
        differs = ', '.join(f"{key}={this!r} here, {that!r} there" for key, (this, that) in other['differs'].items())
        lines += ["", f"This ablation minus `{other['out_dir']}`, mode by mode "
                      f"({PAIRED if other.get('paired') else WELCH + ': the two have other seeds or evaluation batches'})"
                      f"; the settings that differ: {differs or 'none'}:", ""]
        lines += versus_table(info, [column for column in COLUMNS + BUCKET_COLUMNS if column[0] in VERSUS_UNTIED],
                              other['modes'], other.get('welch'))
    lines += [
        "", "Initial loss (step 0): the loss of the first training batch, before any update; initial val loss: the "
        f"evaluation at iteration 0 ({cfg['eval_iters']} fixed batches); predicted (*): "
        "init_loss.predicted_initial_loss for this model, which assumes identity blocks (zero_init_residual) and "
        f"uniformly random tokens. Train loss @f: {info['loss_at_fraction']}. Val loss at end: the evaluation after "
        "the last iteration. copy_prob: the probability the model gives to the next token being the current one, on "
        "the validation batches, at iteration 0 and at the end; unlearned copy by: the first evaluation (every "
        f"{cfg['eval_interval']} iterations) at which copy_prob is below twice the text's repeat rate ({repeat}), '–' "
        "if none; where not every seed got there, the mean is over those that did. " + untie +
        "At iteration: the evaluation with the best val loss; val - train at end: the two losses of the last "
        f"evaluation (positive: overfitting). Spikes: logged steps whose grad_norm exceeds {GRAD_SPIKE_FACTOR} x the "
        f"median of the previous {SPIKE_WINDOW} logged values, or whose step loss exceeds their median + "
        f"{LOSS_SPIKE_SIGMAS} x 1.4826 x their median absolute deviation; consecutive spiking steps count once, the "
        f"first {SPIKE_MIN_HISTORY} logged steps are not judged; '–' for runs from before grad_norm. "
        + (f"Buckets: {info['buckets']}. " if has_buckets else "") +
        "tokens/s: median over the logged iterations (a shared machine makes it indicative only).",
        "", f"Command: `{info['command']}`", "", f"Machine: {info['machine']}", "",
        f"Trained: {info.get('trained_on', 'unrecorded')}", ""]
    return '\n'.join(lines)


def best_point_lines(info, versus, welch):
    """The best point (best.pt: the weights at each run's lowest validation loss) scored on the whole split, by
    bucket, and against untied; then what the evaluation shared across runs, and what older runs lack."""
    lines = []
    if any(cells['best_val_loss_all']['mean'] is not None for cells in info['modes'].values()):
        lines += ["", "At the best point: each run's best.pt (its weights at the evaluation with the lowest validation "
                      "loss) scored like the final checkpoint above, on the whole validation split, by bucket:", ""]
        lines += column_table(info, BEST_BUCKET_COLUMNS, info['modes'], BEST_BUCKET_TOKENS)
        lines += versus_lines(info, "The same, mode minus untied ({}):", BEST_BUCKET_COLUMNS, versus, welch)
    eval_seeds = info['eval_seeds']
    lines += ["", (f"Every run was evaluated on the same fixed batches (eval_seed {eval_seeds[0]}), whatever its "
                   f"seed and mode." if len(eval_seeds) == 1 else
                   f"The runs were evaluated on batches of {len(eval_seeds)} different seeds ({', '.join(map(str, eval_seeds))}): "
                   f"runs made before --eval_seed drew them from their own seed, so their best points (best val loss, "
                   f"at iteration) are each scored on other tokens.")
              + (f" {info['runs_without_best']} run(s) have no best.pt (made before it was kept, or never "
                 f"better than before training, iteration 0): '–' in the best-point table." if info['runs_without_best'] else "")]
    diverged = [f"{mode} seed {seed} at iteration {at}" for mode, cells in info['modes'].items()
                for seed, at in zip(info['seeds'], cells.get('diverged_at', {}).get('per_seed', [])) if at is not None]
    if diverged:
        lines += ['', f"Diverged (a non-finite loss stopped the run, so it has no final loss: '–'): {', '.join(diverged)}."]
    return lines


def gradient_source_lines(info):
    """Claim 11: grad_out / grad_in over the first EARLY_FRACTION of training, mean and range over seeds."""
    if not (probed := {mode: values for mode, cells in info['modes'].items() if 'grad_ratio_early' in cells
                       and (values := [v for v in cells['grad_ratio_early']['per_seed'] if v is not None])}):
        return []
    lines = ["", f"Where the gradient of the token matrix comes from in the first {100 * EARLY_FRACTION:g} % of "
                 "training: the norm of its output-side part over that of its input-side part, summed over the "
                 "logged steps (untied: the head's gradient over the embedding's), mean [lowest, highest seed]:", ""]
    lines += [f"- {info['labels'][mode]}: {statistics.fmean(values):.2f} [{min(values):.2f}, {max(values):.2f}]"
              + ("; 95 % interval of the mean by Student's t: [{1:.2f}, {2:.2f}]".format(*mean_interval(values))
                 if len(values) > 1 else "")
              for mode, values in probed.items()]
    return lines


def lens_lines(info):
    """Claim 17: the tuned lens per layer, mean ± std over seeds, the logit lens beside it, and how far each layer
    is from the run's own final loss (the gap) as mode minus untied, paired by seed."""
    layers = info['config']['n_layer'] + 1
    if not (lensed := lensed_rows(info)):
        return []
    names = ['embedding'] + [f'block {layer}' for layer in range(1, layers)]
    lines = ["", "Tuned lens (lab/tuned_lens.py, final checkpoint, whole validation split): each layer's loss through "
                 "an affine translator trained, with the model frozen, to match the final distribution; the last "
                 "layer is the model itself:", ""]
    lines += table_lines(info, names, lensed, lambda cells, i: fmt(cells[f'lens_tuned_{i}'], '{:.3f}', ''))
    lines += ["", "The plain logit lens (no translator: each layer read by the final norm and head as they are):", ""]
    lines += table_lines(info, names, lensed, lambda cells, i: fmt(cells[f'lens_logit_{i}'], '{:.3f}', ''))
    if 'untied' in lensed:
        base = lensed['untied']
        lines += ["", "How far each layer still is from its run's own final loss (tuned lens minus final loss), mode "
                      "minus untied [95 % interval of the per-seed differences by Student's t: the seeds pair the "
                      "runs]; positive: that layer holds less of the final prediction than untied's does:", ""]
        lines += table_lines(info, names[:-1], {mode: cells for mode, cells in lensed.items() if mode != 'untied'},
                             lambda cells, i: fmt_interval(*paired_interval(cells[f'lens_gap_{i}']['per_seed'],
                                                                           base[f'lens_gap_{i}']['per_seed'])))
    return lines


def mean_interval(values):
    """(mean, low, high): the 95 % confidence interval of the mean of two or more values by Student's t."""
    mean, std = mean_std(values)
    half = t_975(len(values) - 1) * std / math.sqrt(len(values))
    return mean, mean - half, mean + half


def head_minus_embedding(cells):
    """Claim 10's number for one mode: is its matrix closer to untied's head than to its embedding?"""
    diff, low, high = paired_interval(cells['cka_head']['per_seed'], cells['cka_emb']['per_seed'])
    return f"{diff:+.3f} (one seed)" if low is None else f"{diff:+.3f} [{low:+.3f}, {high:+.3f}]"


def write_csv(path, rows):
    with atomic_path(path) as tmp, open(tmp, 'w', newline='') as f:
        writer = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        writer.writeheader()
        writer.writerows(rows)
