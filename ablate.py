"""
The tie-mode ablation: train every --tie_mode with the same data order, seed, schedule and
budget, one run after another, and compare their losses, curves and copy probes. One more row
is no tie mode of its own: tied_untie, "tied, untied at 2/3", trains with --tie_mode=tied until
iteration round(untie_at * max_iters) and with a head of its own after (train.py --untie_at;
ablate.py's --untie_at, 2/3 by default, sets that row's fraction and no other run's).

    python ablate.py                                   # experiment 1: train.py's small char-level model, every mode
    python ablate.py config/ablate_char.py             # the same sized for a 2-core CPU (3 seeds, fewer iterations)
    python ablate.py config/ablate_bpe.py --zero_init_residual=true --out_dir=out-ablation-bpe-zero
    python ablate.py --modes=tied,untied,shuffle --seeds=3
    python ablate.py --modes=tied,tied_untie --untie_at=0.5   # untie halfway instead of at 2/3
    python ablate.py --quick                           # smoke test: a tiny model, seconds per mode
    python ablate.py config/ablate_char_sigma.py --versus=out-ablation-char-sigma-noscale  # + this minus that

Every train.py key is accepted and given to every run, except tie_mode (use --modes) and
init_from (ablate.py decides it). Each run is train.train itself, the loop of train.py, in
out_dir/<mode>-seed<seed>/. The data order depends only on the seed, so for one seed every mode
sees the same batches, and the evaluation batches are the same for all.

The tied_untie row (out_dir/tied_untie-seed<seed>/) asks whether a late untie, the recipe of
the GPT-2 speed-run record (model.GPT.untie), keeps what tying gives early and frees the head
for the end. It is the `tied` run of the same seed, batch for batch, up to the untie, so the two
rows differ only by what happens after it. Every other run trains with untie_at=None.

Stopping and starting again: a finished run leaves result.json (with the settings it was made
with) and is skipped when the command is run again; an interrupted run continues from its last
checkpoint; a run made with different settings stops the ablation with an error instead of
mixing results. So Ctrl-C and re-running the same command loses at most one eval_interval.

Writes to out_dir:
    ablation.csv      every logged iteration of every run (mode, seed, iter, losses, lr, tokens/s, fingerprint,
                      and train.py's copy probe: copy_prob, repeat_rate, self_margin, grad_norm)
    summary.md        one row per mode: parameters, initial loss next to the predicted one and log n,
                      loss after 1 %, 10 % and 100 % of the budget, validation loss, copy_prob at the start
                      and the end and the iteration by which the copying start is unlearned, the best val
                      loss's iteration, val minus train loss at the end, grad_norm and loss spikes, tokens/s;
                      and a second table: val loss by how often the target token occurs in train.bin
    summary.json      the same numbers, per seed and as mean and std over seeds
    <mode>-seed<seed>/freq_buckets.json   the frequency-bucket evaluation of that run's final checkpoint,
                      made by the first summary that needs it and reused while the checkpoint is unchanged
    loss_curves.png   every mode on one figure: the whole run, the second half zoomed in, and copy_prob
                      against the text's own repeat rate (needs matplotlib)

"Unlearned copy by" is the first evaluated iteration at which copy_prob (the probability the model
gives to "the next token is this token") is below twice repeat_rate (how often the validation text
really repeats its token, what a calibrated model would give): from there on the model copies no
more than the text calls for, within a factor 2. A tied model with identity blocks starts near
copy_prob 1 (DESIGN.md, (*)); the other modes start near 1/n, which is below the line wherever
the text repeats more than one token in 2n.
"""

import csv
import json
import math
import os
import platform
import shlex
import statistics
import sys
import time
from fractions import Fraction

import plumbing
import train
from common import UserError, atomic_path, atomic_write_bytes, parse_modes, pick_device, pick_dtype, run_cli
from init_loss import predicted_initial_loss
from model import GPTConfig, TIE_MODES
from prepare import load_meta

# The row that is no tie mode: tie_mode='tied' with train.py's untie_at (see the docstring). Its name
# is also its folder's, so no spaces or commas; the table and figure call it row_label(...).
UNTIE_ROW = 'tied_untie'
MODES = (*TIE_MODES, UNTIE_ROW)  # what --modes accepts, in the default order

# train.py's keys, minus the two ablate.py decides per run, plus its own. log_interval=1 (train.py: 10)
# because the table's 1 % point and the first hundred steps of the curves need every step.
DEFAULTS = {k: v for k, v in train.DEFAULTS.items() if k not in ('tie_mode', 'init_from')}
DEFAULTS.update(
    out_dir='out-ablation',
    log_interval=1,
    modes=','.join(MODES),      # comma separated, trained in this order
    seeds=1,                    # the runs use seed, seed+1, ..., seed+seeds-1
    quick=False,                # the preset below
    untie_at=2 / 3,             # the tied_untie row only (train.py's default, None, means never untie)
    versus='',                  # another ablation's out_dir: the summary adds this one minus that one, per mode
)
ABLATE_KEYS = ('modes', 'seeds', 'quick', 'versus')

# --quick: a tiny model and a few tens of iterations, seconds per mode, for tests and smoke checks.
# These keys are set unless given on the command line; everything else keeps its value.
QUICK = dict(n_layer=1, n_head=2, n_embd=32, block_size=32, batch_size=8, max_iters=30, lr_decay_iters=None,
             warmup_iters=3, eval_interval=10, eval_iters=2, log_interval=1, out_dir='out-ablation-quick')

# Keys that do not change what a run computes; all others must match to skip or resume a run.
BOOKKEEPING_KEYS = ('out_dir', 'init_from', 'progress')
# Keys newer than some finished runs, with the value those runs were made with: plumbing's model keys,
# and untie_at, which runs made before the tied_untie row do not record (none of them untied).
LEGACY_RUN_KEYS = dict(plumbing.LEGACY_MODEL_ARGS, untie_at=None)

# The table's "loss after f of the budget" is the mean training step loss over the logged iterations
# within a factor WINDOW of iteration round(f * max_iters): evaluations happen only every eval_interval,
# and one batch is noisy. E.g. for 600 iterations: 1 % -> iterations 5-7, 10 % -> 48-75, 100 % -> 480-599.
FRACTIONS = (0.01, 0.1, 1.0)
WINDOW = 1.25

CSV_FIELDS = ('mode', 'seed', 'iter', 'step_loss', 'train_loss', 'val_loss', 'lr', 'tokens_per_sec',
              'data_fingerprint', 'copy_prob', 'repeat_rate', 'self_margin', 'grad_norm')
# metrics.csv columns read as numbers; runs older than the copy probe lack the last four (None then).
METRIC_KEYS = ('step_loss', 'train_loss', 'val_loss', 'tokens_per_sec', 'copy_prob', 'repeat_rate', 'self_margin',
               'grad_norm')


def parse_args(argv):
    for arg in argv:
        if arg.startswith('--tie_mode'):
            raise UserError("ablate.py trains several tie modes: use --modes=a,b,c instead of --tie_mode")
        if arg.startswith('--init_from'):
            raise UserError("ablate.py decides --init_from itself: re-run the same command to resume an ablation")
        if arg.startswith('--untie_at='):
            # train.py's parser judges the value first, so a bad one (1.5, 0, abc) gets train.py's own
            # message; ablate.py's float default would otherwise word some of them its own way.
            if train.parse_train_args([arg])['untie_at'] is None:
                raise UserError(f"{arg}: ablate.py's untie_at is the fraction at which the {UNTIE_ROW} row "
                                f"unties (no other row ever does); to train no such row, leave {UNTIE_ROW} out "
                                f"of --modes")
    cfg = train.parse_train_args(argv, DEFAULTS)  # the same checks as train.py
    if cfg['quick']:
        given = {arg[2:].partition('=')[0] for arg in argv if arg.startswith('--')}
        cfg.update({k: v for k, v in QUICK.items() if k not in given})
    cfg['modes'] = ','.join(parse_modes(cfg['modes'], 'modes', MODES))  # a mode named twice is trained once
    if cfg['seeds'] < 1:
        raise UserError(f"--seeds must be a positive integer, got {cfg['seeds']}")
    if cfg['max_iters'] < 1:
        raise UserError(f"--max_iters must be at least 1 for an ablation, got {cfg['max_iters']}")
    # parse_train_args has checked untie_at's range with train.py's message. What train.py cannot know:
    # rounded to an iteration, a fraction near 1 may untie after the last step, and the row labelled
    # "untied" would be a copy of the tied one.
    if UNTIE_ROW in cfg['modes'].split(',') and untie_iter(cfg) >= cfg['max_iters']:
        raise UserError(f"--untie_at={cfg['untie_at']:g} unties at iteration {untie_iter(cfg)} of --max_iters="
                        f"{cfg['max_iters']}, after the last step, so {UNTIE_ROW} would never untie; use a smaller "
                        f"--untie_at or more --max_iters")
    if cfg['versus']:  # checked now, not after hours of training
        other_modes = read_other_summary(cfg['versus'])['modes']
        if not set(cfg['modes'].split(',')) & set(other_modes):
            raise UserError(f"--versus={cfg['versus']}: no mode in common with --modes={cfg['modes']} (it has "
                            f"{','.join(other_modes)}); compare ablations that train the same modes")
    return cfg


def untie_iter(cfg):
    """The iteration at which the tied_untie row unties, as train.py computes it."""
    return round(cfg['untie_at'] * cfg['max_iters'])


def fraction_text(x):
    """2/3 for 0.666..., 1/2 for 0.5; a fraction with no small denominator as it was given (0.667)."""
    f = Fraction(x).limit_denominator(12)
    return f"{f.numerator}/{f.denominator}" if abs(float(f) - x) < 1e-9 else f"{x:g}"


def row_label(mode, untie_at):
    """The name a reader sees in the table and the figure."""
    return f"tied, untied at {fraction_text(untie_at)}" if mode == UNTIE_ROW else mode


def plan_runs(cfg):
    """(mode, seed, run_cfg) for every run, in training order: the train.py config of each run."""
    base = {k: v for k, v in cfg.items() if k not in ABLATE_KEYS}
    runs = []
    for mode in cfg['modes'].split(','):
        untie = mode == UNTIE_ROW
        for k in range(cfg['seeds']):
            seed = cfg['seed'] + k
            # untie_at reaches the tied_untie row only; every other run is trained as if it were not given.
            run_cfg = dict(base, tie_mode='tied' if untie else mode, untie_at=cfg['untie_at'] if untie else None,
                           seed=seed, init_from='scratch', out_dir=os.path.join(cfg['out_dir'], f'{mode}-seed{seed}'))
            runs.append((mode, seed, run_cfg))
    return runs


def model_config(run_cfg, vocab_size):
    """The run's GPTConfig, checked now rather than minutes into the ablation (e.g. an odd width for shuffle)."""
    try:
        return GPTConfig(**{k: run_cfg[k] for k in plumbing.MODEL_KEYS if k != 'vocab_size'},
                         vocab_size=run_cfg['vocab_size'] or vocab_size)
    except ValueError as e:
        raise UserError(f"tie_mode={run_cfg['tie_mode']}: {e}") from None


def recorded_config(run_cfg):
    """What a run is made with, as it is stored in result.json (through JSON, so comparisons are fair)."""
    return json.loads(json.dumps({k: v for k, v in run_cfg.items() if k not in BOOKKEEPING_KEYS}))


def check_same_config(wanted, saved, where, run_dir):
    """Refuse to skip or resume a run made with other settings: its results would be mixed with these."""
    # A key newer than the run (LEGACY_RUN_KEYS) counts with the value the run was made with.
    differ = [k for k in wanted if saved.get(k, LEGACY_RUN_KEYS.get(k)) != wanted[k]
              and not (k == 'vocab_size' and wanted[k] is None)]
    if differ:
        key = differ[0]
        more = f" (and {len(differ) - 1} more: {', '.join(differ[1:])})" if len(differ) > 1 else ""
        raise UserError(f"{where} was made with {key}={saved.get(key)!r}, but this ablation asks for "
                        f"{key}={wanted[key]!r}{more}; use another --out_dir, or delete {run_dir} to train it again")


# ---------------------------------------------------------------- training

def run_all(cfg, runs, bar):
    """Train what is not trained yet. Returns {'trained': [...], 'resumed': [...], 'skipped': [...]} of (mode, seed)."""
    from tqdm import tqdm
    done = dict(trained=[], resumed=[], skipped=[])
    for i, (mode, seed, run_cfg) in enumerate(runs, 1):
        run_dir = run_cfg['out_dir']
        wanted = recorded_config(run_cfg)
        result_path = os.path.join(run_dir, 'result.json')
        ckpt_path = os.path.join(run_dir, 'ckpt.pt')
        if os.path.exists(result_path):
            result = read_result(result_path)
            check_same_config(wanted, result['config'], result_path, run_dir)
            tqdm.write(f"{mode} seed {seed}: finished earlier, skipped ({result_path})")
            bar.update(cfg['max_iters'])
            done['skipped'].append((mode, seed))
            continue
        if os.path.exists(ckpt_path):
            # Interrupted midway: continue from the checkpoint, which train.py restores exactly
            # (weights, optimizer, RNG and data order), if it was made with these settings.
            ckpt = plumbing.load_checkpoint(ckpt_path, 'cpu')
            check_same_config(wanted, ckpt.get('config', {}), ckpt_path, run_dir)
            run_cfg = dict(run_cfg, init_from='resume')
            bar.update(ckpt['iter_num'])
            tqdm.write(f"{mode} seed {seed}: resuming from iteration {ckpt['iter_num']} ({ckpt_path})")
            del ckpt
        bar.set_description(f"{mode} seed {seed} [{i}/{len(runs)}]")
        summary = train.train(run_cfg, progress=bar)  # the bar replaces train.py's own printing
        result = dict(mode=mode, seed=seed, config=wanted, resumed=run_cfg['init_from'] == 'resume',
                      summary={k: v for k, v in summary.items() if k not in ('model', 'out_dir')})
        # Written last and atomically: its presence means the run is complete.
        atomic_write_bytes(result_path, (json.dumps(result, indent=1) + '\n').encode())
        done['resumed' if result['resumed'] else 'trained'].append((mode, seed))
        tqdm.write(f"{mode} seed {seed}: val loss {summary['val_loss']:.4f} (best {summary['best_val_loss']:.4f}) "
                   f"after {summary['iters']} iterations, {summary['wall_s']:.0f} s")
    return done


def read_result(path):
    try:
        with open(path, encoding='utf-8') as f:
            result = json.load(f)
        result['config'], result['summary']
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise UserError(f"{path} is unreadable ({e}); delete its folder to train that run again") from None
    return result


def read_metrics(run_dir):
    path = os.path.join(run_dir, 'metrics.csv')
    try:
        return plumbing.read_metrics(path)
    except OSError as e:
        raise UserError(f"cannot read {path} ({e.strerror}); delete {run_dir} to train that run again") from None


# ---------------------------------------------------------------- summaries

def number(text):
    return float(text) if text not in ('', None) else None


def loss_near(rows, center, last_iter):
    """Mean step loss over the logged iterations in [center / WINDOW, center * WINDOW] (see WINDOW)."""
    lo, hi = center / WINDOW, min(center * WINDOW, last_iter)
    values = [r['step_loss'] for r in rows if lo <= r['iter'] <= hi and r['step_loss'] is not None]
    if not values:  # a log_interval coarser than the window: take the nearest logged step
        nearest = min((r for r in rows if r['step_loss'] is not None), key=lambda r: abs(r['iter'] - center))
        values = [nearest['step_loss']]
    return sum(values) / len(values)


def unlearned_copy_iter(rows):
    """The first evaluated iteration at which copy_prob < 2 * repeat_rate (see the docstring), or None:
    never within the run, or a metrics.csv from before the copy probe."""
    return min((r['iter'] for r in rows if r.get('copy_prob') is not None and r.get('repeat_rate') is not None
                and r['copy_prob'] < 2 * r['repeat_rate']), default=None)


# Spikes (is tied training less stable than untied?): a logged step is a spike when its value stands far
# above the previous SPIKE_WINDOW logged values; a run of consecutive spiking steps counts once, so a
# loss that stays up for a few steps after one bad update is one spike. The first SPIKE_MIN_HISTORY
# logged steps are not judged: there is no past to compare them with.
SPIKE_WINDOW = 100
SPIKE_MIN_HISTORY = 10
GRAD_SPIKE_FACTOR = 4   # grad_norm > 4 x the median of the previous window
LOSS_SPIKE_SIGMAS = 4   # step_loss > median + 4 robust sigmas (1.4826 x the median absolute deviation)


def grad_spike(value, window):
    return value > GRAD_SPIKE_FACTOR * statistics.median(window)


def loss_spike(value, window):
    # A decreasing loss sits below the window's median, so the trend of training never counts.
    median = statistics.median(window)
    mad = statistics.median(abs(v - median) for v in window)
    return value > median + LOSS_SPIKE_SIGMAS * 1.4826 * mad


def count_spikes(values, is_spike):
    """The number of spikes (see SPIKE_WINDOW) in values, in iteration order; None entries (steps not logged
    with that column) are skipped, and a run with no values at all (a metrics.csv from before the column) gives
    None, not 0."""
    history, count, inside = [], 0, False
    for value in values:
        if value is None:
            continue
        window = history[-SPIKE_WINDOW:]
        spike = len(window) >= SPIKE_MIN_HISTORY and is_spike(value, window)
        count += spike and not inside
        inside = spike
        history.append(value)
    return count if history else None


def run_numbers(rows, result, tie_mode, cfg, vocab_size):
    """The numbers of one run for the table."""
    max_iters = cfg['max_iters']
    first = rows[0]
    numbers = dict(
        params=result['summary']['params'],
        init_step_loss=first['step_loss'],
        init_val_loss=first['val_loss'],
        predicted_init_loss=predicted_initial_loss(model_config(dict(cfg, tie_mode=tie_mode), vocab_size)),
        log_n=math.log(vocab_size),
    )
    for f in FRACTIONS:
        numbers[f'train_loss_{f:g}'] = loss_near(rows, max(1, round(f * max_iters)), max_iters - 1)
    numbers['final_val_loss'] = result['summary']['val_loss']
    numbers['best_val_loss'] = result['summary']['best_val_loss']
    evals = sorted((r for r in rows if r['val_loss'] is not None), key=lambda r: r['iter'])
    # The earliest evaluation with the lowest val_loss: where early stopping would have kept the model.
    numbers['best_val_iter'] = min(evals, key=lambda r: r['val_loss'])['iter'] if evals else None
    last = evals[-1] if evals else None
    numbers['gap_at_end'] = (last['val_loss'] - last['train_loss']
                             if last is not None and last['train_loss'] is not None else None)
    steps = sorted(rows, key=lambda r: r['iter'])
    numbers['grad_spikes'] = count_spikes([r['grad_norm'] for r in steps], grad_spike)
    numbers['loss_spikes'] = count_spikes([r['step_loss'] for r in steps], loss_spike)
    probed = [r for r in rows if r['copy_prob'] is not None]  # the evaluations, in a run newer than the probe
    numbers['init_copy_prob'] = next((r['copy_prob'] for r in probed if r['iter'] == 0), None)
    numbers['unlearned_copy_iter'] = unlearned_copy_iter(rows)
    numbers['final_copy_prob'] = max(probed, key=lambda r: r['iter'])['copy_prob'] if probed else None
    numbers['probed'] = bool(probed)  # tells "never unlearned" (an iteration of None) from "not measured"
    # The median over logged steps: the machine may be shared, and a single window can stall.
    numbers['tokens_per_sec'] = statistics.median(r['tokens_per_sec'] for r in rows if r['iter'] > 0)
    return numbers


# Validation loss by how often the target token occurs in train.bin (do tied rows help rare tokens, as the
# shared row gets gradient from both ends?). (key, header, least count, count below which): a token seen
# 10 times falls in '10-99'.
BUCKETS = (('lt10', 'seen < 10', 0, 10), ('10_99', 'seen 10-99', 10, 100), ('100_999', 'seen 100-999', 100, 1000),
           ('ge1000', 'seen ≥ 1000', 1000, None))
BUCKET_EDGES = [least for _, _, least, _ in BUCKETS[1:]]
# The second table: validation loss over the whole split and per bucket (key, header, format), and the tokens in each.
BUCKET_COLUMNS = [('val_loss_all', 'whole split', '{:.3f}')] + \
    [(f'val_loss_{key}', header, '{:.3f}') for key, header, *_ in BUCKETS]
BUCKET_TOKENS = ['tokens_all'] + [f'tokens_{key}' for key, *_ in BUCKETS]
BUCKET_FILE = 'freq_buckets.json'  # in the run's folder: evaluated once, read back by later summaries
MAX_BUCKET_TARGETS = 1 << 18       # the whole validation split up to this many targets, else its start
BUCKET_BATCH = 32                  # windows per forward pass


class BucketData:
    """The dataset as the frequency buckets need it, read once, and only if some run has no BUCKET_FILE yet."""

    def __init__(self, cfg):
        self.cfg, self._loaded = cfg, None

    def get(self):
        if self._loaded is None:
            import numpy as np
            import torch
            splits, meta = train.load_splits(dict(self.cfg, block_size=1))  # any window fits: the checks only
            counts = torch.bincount(splits['train'], minlength=meta['vocab_size'])
            bucket = torch.from_numpy(np.digitize(counts.numpy(), BUCKET_EDGES))  # token id -> its bucket
            self._loaded = splits['val'], bucket, meta
        return self._loaded


def loss_by_frequency(model, val, bucket, block_size, device):
    """(summed cross-entropy, token count) per bucket over the first min(len(val) - 1, MAX_BUCKET_TARGETS)
    targets of val, each predicted once, from non-overlapping windows of block_size (the last one shorter)."""
    import torch
    import torch.nn.functional as F
    n = min(len(val) - 1, MAX_BUCKET_TARGETS)
    full = n // block_size
    pieces = [(val[:full * block_size].view(full, block_size), val[1:full * block_size + 1].view(full, block_size))]
    if n > full * block_size:
        pieces.append((val[full * block_size:n].view(1, -1), val[full * block_size + 1:n + 1].view(1, -1)))
    sums = torch.zeros(len(BUCKETS), dtype=torch.float64)
    counts = torch.zeros(len(BUCKETS), dtype=torch.int64)
    model.eval()
    with torch.no_grad():
        for x_all, y_all in pieces:
            for i in range(0, len(x_all), BUCKET_BATCH):
                x, y = x_all[i:i + BUCKET_BATCH], y_all[i:i + BUCKET_BATCH]
                logits, _ = model(x.to(device))
                loss = F.cross_entropy(logits.float().flatten(0, 1), y.to(device).flatten(), reduction='none')
                b = bucket[y.flatten()]
                sums.index_add_(0, b, loss.double().cpu())
                counts += torch.bincount(b, minlength=len(BUCKETS))
    return sums.tolist(), counts.tolist()


def bucket_numbers(run_dir, data, cfg):
    """The run's validation loss per bucket (None where a bucket is empty) and its token counts: from
    BUCKET_FILE when it describes the checkpoint there now, else by evaluating that checkpoint (float32,
    on cfg's device) and writing BUCKET_FILE. A run without a checkpoint gets None everywhere."""
    ckpt_path = os.path.join(run_dir, 'ckpt.pt')
    if not os.path.exists(ckpt_path):
        return dict.fromkeys([key for key, *_ in BUCKET_COLUMNS] + BUCKET_TOKENS)
    stat = os.stat(ckpt_path)
    made_from = dict(ckpt_size=stat.st_size, ckpt_mtime_ns=stat.st_mtime_ns, dataset=cfg['dataset'],
                     max_targets=MAX_BUCKET_TARGETS, edges=BUCKET_EDGES)
    path = os.path.join(run_dir, BUCKET_FILE)
    try:
        with open(path, encoding='utf-8') as f:
            saved = json.load(f)
        if saved['made_from'] == made_from:
            sums, counts = saved['loss_sums'], saved['tokens']
        else:
            saved = None
    except (OSError, ValueError, KeyError, TypeError):
        saved = None  # none yet, or unreadable: evaluate again; the file is only a cache
    if saved is None:
        val, bucket, _ = data.get()
        device = pick_device(cfg['device'])
        model = plumbing.model_from_checkpoint(plumbing.load_checkpoint(ckpt_path, 'cpu'), ckpt_path).to(device)
        sums, counts = loss_by_frequency(model, val, bucket, model.config.block_size, device)
        atomic_write_bytes(path, (json.dumps(dict(made_from=made_from, loss_sums=sums, tokens=counts)) + '\n').encode())
    # The buckets pooled: the final checkpoint's loss over the whole split, far less noisy than eval_iters batches.
    numbers = dict(val_loss_all=sum(sums) / sum(counts), tokens_all=sum(counts))
    for (key, *_), total, count in zip(BUCKETS, sums, counts):
        numbers[f'val_loss_{key}'] = total / count if count else None
        numbers[f'tokens_{key}'] = count
    return numbers


def mean_std(values):
    values = [v for v in values if v is not None]
    if not values:
        return None, None
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else None)


# Student's t, two-sided 95 % (the 0.975 quantile), for 1 to 30 degrees of freedom.
T_975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
         2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def t_975(df):
    """The 0.975 quantile of Student's t at a (fractional, Welch) df: linear between the table's whole
    degrees, and 1.96 + 2.4/df beyond 30 (within 0.002 of the exact value there)."""
    if df >= len(T_975):
        return 1.96 + 2.4 / df
    lo = max(1, math.floor(df))
    hi = min(lo + 1, len(T_975))
    return T_975[lo - 1] + (df - lo) * (T_975[hi - 1] - T_975[lo - 1])


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


# The columns compared with untied, seed against seed of each mode: a difference is called real only
# when its 95 % interval excludes zero.
# The bucket losses (BUCKET_COLUMNS) have a table of their own, and so their differences.
VERSUS_UNTIED = ('init_step_loss', 'train_loss_0.1', 'final_val_loss', 'best_val_loss', 'best_val_iter', 'gap_at_end',
                 'grad_spikes', 'loss_spikes', *(key for key, *_ in BUCKET_COLUMNS))
DIFF_DECIMALS = dict(best_val_iter=0, grad_spikes=1, loss_spikes=1)  # counts; every loss difference gets 3


def differences(cells, base):
    """{key: (difference, low, high)}: one mode's cells minus another's (base), seeds against seeds, over the
    VERSUS_UNTIED columns. A key with no value on either side (an empty bucket, runs from before grad_norm,
    a summary.json older than the column) is left out."""
    return {key: interval for key in VERSUS_UNTIED if key in cells and key in base
            and (interval := welch_interval(cells[key]['per_seed'], base[key]['per_seed']))[0] is not None}


def versus_untied(table):
    """{mode: {key: (difference, low, high)}} against the untied row, where there is one."""
    if 'untied' not in table:
        return {}
    return {mode: differences(cells, table['untied']) for mode, cells in table.items() if mode != 'untied'}


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


def versus_other(info, out_dir):
    """This ablation minus another (e.g. the same recipe without emb_scale), mode by mode over the VERSUS_UNTIED
    columns, seed sets against seed sets: {'out_dir', 'differs': {key: [this, that]}, 'modes': {mode: {key:
    (difference, low, high)}}}. Only the modes both have; what differs between the two configs is listed, so
    that the table says what the difference is the effect of."""
    other = read_other_summary(out_dir)
    modes = {mode: differences(cells, other['modes'][mode]) for mode, cells in info['modes'].items()
             if mode in other['modes']}
    differs = {key: [value, other['config'].get(key)] for key, value in info['config'].items()
               if key not in ABLATE_KEYS and other['config'].get(key) != value}
    return dict(out_dir=out_dir, differs=differs, modes=modes)


def machine_line():
    import torch
    cpu = platform.processor() or ''
    try:
        with open('/proc/cpuinfo') as f:
            cpu = next((line.split(':', 1)[1].strip() for line in f if line.startswith('model name')), cpu)
    except OSError:
        pass
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
    for mode, seed, run_cfg in runs:
        result = read_result(os.path.join(run_cfg['out_dir'], 'result.json'))
        raw = read_metrics(run_cfg['out_dir'])
        for r in raw:
            csv_rows.append(dict({k: r.get(k, '') for k in CSV_FIELDS if k not in ('mode', 'seed')}, mode=mode, seed=seed))
        # r.get: a metrics.csv older than a column has no such key, and its cells count as empty.
        rows = [dict({k: number(r.get(k)) for k in METRIC_KEYS}, iter=int(r['iter'])) for r in raw]
        numbers = run_numbers(rows, result, run_cfg['tie_mode'], cfg, vocab_size)
        numbers.update(bucket_numbers(run_cfg['out_dir'], data, cfg))
        per_mode.setdefault(mode, []).append(numbers)
        curves.setdefault(mode, []).append(rows)
    table = {}
    for mode, seed_numbers in per_mode.items():
        table[mode] = {}
        for key in [key for key, _, _ in COLUMNS + BUCKET_COLUMNS] + BUCKET_TOKENS:
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
    modes = list(per_mode)
    info = dict(
        command='python ablate.py ' + shlex.join(argv),
        machine=machine_line(),
        dataset=cfg['dataset'], vocab_size=vocab_size, seeds=seeds, max_iters=max_iters,
        config={k: v for k, v in cfg.items() if k not in BOOKKEEPING_KEYS},
        loss_at_fraction=(f"mean training step loss over the logged iterations within a factor {WINDOW} of "
                          f"iteration round(f * max_iters), the last iteration at most: " +
                          ', '.join(f"{100 * f:g} % -> {iteration_range(c, max_iters)}" for f, c in points.items())),
        labels={mode: row_label(mode, cfg['untie_at']) for mode in modes},
        untie_iter=untie_iter(cfg) if UNTIE_ROW in modes else None,
        repeat_rate=statistics.fmean(repeat_rates) if repeat_rates else None,
        unlearned_copy=("the first evaluated iteration at which copy_prob < 2 * repeat_rate; mean and std over "
                        "the seeds that reached it (seeds_reached of seeds_probed)"),
        modes=table,
        versus_untied=versus_untied(table),
        versus_other=None,
        buckets=(f"validation loss of the final checkpoint by how often the target token occurs in train.bin, "
                 f"over the whole validation split (at most its first {MAX_BUCKET_TARGETS:,} targets), each target "
                 f"once, in non-overlapping windows of block_size; per-token cross-entropy averaged per bucket, and over "
                 f"all of them (whole split)"),
    )
    return csv_rows, info, curves


SEED_FREE = ('params', 'predicted_init_loss', 'log_n')  # the same for every seed: no ± 0


def fmt(cell, spec, key):
    if cell['mean'] is None:
        return '–'
    text = spec.format(cell['mean'])
    if cell['std'] is not None and key not in SEED_FREE:
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


def versus_table(info, columns, versus):
    """The rows of a difference table ({mode: {key: interval}}) over columns [(key, header)]."""
    return table_lines(info, [header for _, header in columns], versus,
                       lambda cells, i: fmt_interval(*cells.get(columns[i][0], (None, None, None)),
                                                     decimals=DIFF_DECIMALS.get(columns[i][0], 3)))


def markdown(info):
    cfg = info['config']
    seeds = info['seeds']
    lines = [
        f"# Tie-mode ablation: {info['dataset']} (vocab {info['vocab_size']})",
        "",
        f"{cfg['n_layer']} layers, {cfg['n_head']} heads, width {cfg['n_embd']}, context {cfg['block_size']}, "
        f"batch {cfg['batch_size']} x {cfg['gradient_accumulation_steps']}, {info['max_iters']} iterations, "
        f"lr {cfg['learning_rate']:g} (warmup {cfg['warmup_iters']}, cosine to {cfg['min_lr']:g} at "
        f"{cfg['lr_decay_iters'] or info['max_iters']}), init_std {cfg['init_std']:g}, "
        f"zero_init_residual={str(cfg['zero_init_residual']).lower()}, emb_scale={str(cfg['emb_scale']).lower()}, "
        f"dropout {cfg['dropout']:g}; "
        + (f"{len(seeds)} seeds ({', '.join(map(str, seeds))}), mean ± std over seeds."
           if len(seeds) > 1 else f"one seed ({seeds[0]})."),
        "",
    ]
    lines += table_lines(info, [header for _, header, _ in COLUMNS], info['modes'],
                         lambda cells, i: fmt(cells[COLUMNS[i][0]], COLUMNS[i][2], COLUMNS[i][0]))
    repeat = (f"{info['repeat_rate']:.3g}, mean over seeds" if info['repeat_rate'] is not None
              else "not measured: these runs predate the copy probe")
    untie = ""
    if info['untie_iter'] is not None:
        untie = (f"{info['labels'][UNTIE_ROW]}: the {UNTIE_ROW} runs, tie_mode=tied until iteration "
                 f"{info['untie_iter']} = round({fraction_text(cfg['untie_at'])} x {info['max_iters']}) and with "
                 "a head of its own from there on (its params count both matrices); the other rows never untie. ")
    versus = info.get('versus_untied')
    if versus:
        lines += ["", "Difference from untied (mode minus untied, mean over seeds, [95 % interval by Welch's t]; "
                      "**bold** where the interval excludes zero):", ""]
        lines += versus_table(info, [(key, header) for key, header, _ in COLUMNS if key in VERSUS_UNTIED], versus)
    has_buckets = any(cells[key]['mean'] is not None
                      for cells in info['modes'].values() for key, _, _ in BUCKET_COLUMNS)
    if has_buckets:
        # The counts are those of the first row's runs: every run of an ablation is evaluated on the same tokens.
        tokens = next(iter(info['modes'].values()))
        lines += ["", "Validation loss by the target token's count in train.bin (final checkpoint, whole validation "
                      "split; tokens in each bucket in the header; '–' where a bucket is empty):", ""]
        lines += table_lines(info, [f"{header} ({tokens[count]['mean'] or 0:,.0f} tokens)"
                                    for (_, header, _), count in zip(BUCKET_COLUMNS, BUCKET_TOKENS)], info['modes'],
                             lambda cells, i: fmt(cells[BUCKET_COLUMNS[i][0]], BUCKET_COLUMNS[i][2],
                                                  BUCKET_COLUMNS[i][0]))
        if versus:
            lines += ["", "The same, mode minus untied [95 % interval by Welch's t]:", ""]
            lines += versus_table(info, [(key, header) for key, header, _ in BUCKET_COLUMNS], versus)
    other = info.get('versus_other')
    if other:
        differs = ', '.join(f"{key}={this!r} here, {that!r} there" for key, (this, that) in other['differs'].items())
        lines += ["", f"This ablation minus `{other['out_dir']}`, mode by mode (mean over seeds, [95 % interval by "
                      f"Welch's t]; **bold** where it excludes zero); the settings that differ: "
                      f"{differs or 'none'}:", ""]
        lines += versus_table(info, [(key, header) for key, header, _ in COLUMNS + BUCKET_COLUMNS
                                     if key in VERSUS_UNTIED], other['modes'])
    lines += [
        "",
        "Initial loss (step 0): the loss of the first training batch, before any update; initial val loss: the "
        f"evaluation at iteration 0 ({cfg['eval_iters']} fixed batches); predicted (*): "
        "init_loss.predicted_initial_loss for this model, which assumes identity blocks (zero_init_residual) "
        "and uniformly random tokens. "
        f"Train loss @f: {info['loss_at_fraction']}. Val loss at end: the evaluation after the last iteration. "
        "copy_prob: the probability the model gives to the next token being the current one, on the validation "
        "batches, at iteration 0 and at the end; unlearned copy by: the first evaluation (every "
        f"{cfg['eval_interval']} iterations) at which copy_prob is below twice the text's repeat rate "
        f"({repeat}), '–' if none; where not every seed got there, the mean is over those that did. " + untie +
        "At iteration: the evaluation with the best val loss; val - train at end: the two losses of the last "
        "evaluation (positive: overfitting). Spikes: logged steps whose grad_norm exceeds "
        f"{GRAD_SPIKE_FACTOR} x the median of the previous {SPIKE_WINDOW} logged values, or whose step loss "
        f"exceeds their median + {LOSS_SPIKE_SIGMAS} x 1.4826 x their median absolute deviation; consecutive "
        f"spiking steps count once, the first {SPIKE_MIN_HISTORY} logged steps are not judged; '–' for runs "
        "from before grad_norm. "
        + (f"Buckets: {info['buckets']}. " if has_buckets else "") +
        "tokens/s: median over the logged iterations (a shared machine makes it indicative only).",
        "",
        f"Command: `{info['command']}`",
        "",
        f"Machine: {info['machine']}",
        "",
    ]
    return '\n'.join(lines)


def write_csv(path, rows):
    with atomic_path(path) as tmp:
        with open(tmp, 'w', newline='') as f:
            writer = csv.DictWriter(f, fieldnames=CSV_FIELDS)
            writer.writeheader()
            writer.writerows(rows)


# ---------------------------------------------------------------- the figure

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
    try:
        import matplotlib
        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
    except ImportError:
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
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=90, format='png')
    plt.close(fig)
    return True


# ---------------------------------------------------------------- main

def ablate(cfg, argv=()):
    """Train and summarise the ablation that cfg (from parse_args) describes. Returns what run_all did
    plus the summary numbers."""
    from tqdm import tqdm
    started = time.time()
    meta = load_meta(os.path.join(cfg['data_dir'], cfg['dataset']))  # fails now, not after the first run
    runs = plan_runs(cfg)
    device = pick_device(cfg['device'])
    for _, _, run_cfg in runs[::cfg['seeds']]:
        run_cfg = dict(run_cfg, vocab_size=run_cfg['vocab_size'] or meta['vocab_size'])
        plumbing.check_memory(model_config(run_cfg, meta['vocab_size']), run_cfg, device,
                           pick_dtype(cfg['dtype'], device))
    os.makedirs(cfg['out_dir'], exist_ok=True)
    bar = tqdm(total=len(runs) * cfg['max_iters'], disable=not cfg['progress'], dynamic_ncols=True,
               unit='it', desc='ablation')
    try:
        done = run_all(cfg, runs, bar)
    except KeyboardInterrupt:
        bar.close()
        print("\nablation interrupted: finished runs are kept and the current one resumes from its last "
              "checkpoint; re-run the same command to continue", file=sys.stderr)
        raise
    bar.close()

    csv_rows, info, curves = summarize(cfg, runs, meta['vocab_size'], list(argv))
    if cfg['versus']:
        info['versus_other'] = versus_other(info, cfg['versus'])
    write_csv(os.path.join(cfg['out_dir'], 'ablation.csv'), csv_rows)
    table = markdown(info)
    atomic_write_bytes(os.path.join(cfg['out_dir'], 'summary.md'), table.encode())
    atomic_write_bytes(os.path.join(cfg['out_dir'], 'summary.json'), (json.dumps(info, indent=1) + '\n').encode())
    figure = os.path.join(cfg['out_dir'], 'loss_curves.png')
    has_figure = plot(figure, curves, info)
    print(table)
    print(f"{len(done['trained'])} runs trained, {len(done['resumed'])} resumed, {len(done['skipped'])} skipped "
          f"(finished earlier), in {time.time() - started:.0f} s; wrote {cfg['out_dir']}/ablation.csv, "
          f"summary.md, summary.json" + (", loss_curves.png" if has_figure else ""))
    if not has_figure:
        print("matplotlib is not installed, so there is no loss_curves.png; get it with: pip install matplotlib "
              "and re-run the same command (finished runs are not trained again)")
    return dict(done, info=info, figure=figure if has_figure else None)


def main(argv):
    ablate(parse_args(argv), argv)


if __name__ == '__main__':
    run_cli(main)
