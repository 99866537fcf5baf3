"""What one finished ablation run says: its result.json and metrics.csv read back into the numbers
the summary compares (the loss at fractions of training, the best point, spikes, the copy probe, linear CKA
against untied), and its validation loss by how often the target token occurs in train.bin."""

import json
import math
import os
import statistics

import torch

from lib import run_files
from lab.ablation_grid import model_config
from lib.atomic_files import atomic_write_bytes
from lib.command_line import UserError
from lib.init_loss_formula import predicted_initial_loss
from lib.device import pick_device
from lab.tuned_lens import whole_split_batches
from lib.prepared_data import load_splits


# The table's "loss after f of the budget" is the mean training step loss over the logged iterations
# within a factor WINDOW of iteration round(f * max_iters): evaluations happen only every eval_interval,
# and one batch is noisy. E.g. for 600 iterations: 1 % -> iterations 5-7, 10 % -> 48-75, 100 % -> 480-599.
FRACTIONS = (0.01, 0.1, 1.0)
WINDOW = 1.25
EARLY_FRACTION = 0.2  # "early in training" for the gradient-source ratio


def read_result(path):
    try:
        with open(path, encoding='utf-8') as f:
            result = json.load(f)
        result['config'], result['summary']
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise UserError(f"{path} is unreadable ({e}); delete its folder to train that run again") from None
    return result


def load_best(path):
    """The model of a best.pt (on the CPU), and the file's contents; a damaged file is a UserError."""
    try:
        saved = torch.load(path, map_location='cpu', weights_only=True)
    except Exception as e:
        raise UserError(f"{path} is unreadable, truncated or corrupted ({type(e).__name__}); delete it, or train "
                        f"the run again to have the best point") from None
    run_files.check_current(saved, path)
    return run_files.model_from_checkpoint(saved, path), saved


def linear_cka(X, Y):
    """Linear CKA (Kornblith et al. 2019, arXiv 1905.00414) between two matrices whose rows are the same
    tokens: with each column centred, |X^T Y|_F^2 / (|X^T X|_F |Y^T Y|_F). It is blind to any rotation
    (orthogonal map) or rescaling of either hidden space, so it compares what two matrices say about
    the tokens, not the coordinates two independently trained models happen to use. 1 for the same
    geometry; two independent random matrices give the floor that random_cka_floor measures."""
    X = X.double() - X.double().mean(0)
    Y = Y.double() - Y.double().mean(0)
    return ((X.t() @ Y).norm() ** 2 / ((X.t() @ X).norm() * (Y.t() @ Y).norm())).item()


def random_cka_floor(n, d, draws=4, seed=0):
    """Mean linear CKA of two independent N(0, 1) n x d matrices: what 'no relation at all' scores at this
    shape. It is far from 0 where n is not much larger than d (with n <= d it is near 1: any two sets
    of n points in general position in d >= n dimensions have almost the same centred Gram matrix)."""
    generator = torch.Generator().manual_seed(seed)
    values = [linear_cka(torch.randn(n, d, generator=generator), torch.randn(n, d, generator=generator))
              for _ in range(draws)]
    return sum(values) / len(values)


def read_metrics(run_dir):
    path = os.path.join(run_dir, 'metrics.csv')
    try:
        return run_files.read_metrics(path)
    except OSError as e:
        raise UserError(f"cannot read {path} ({e.strerror}); delete {run_dir} to train that run again") from None


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
    return value > median + LOSS_SPIKE_SIGMAS * 1.4826 * statistics.median(abs(v - median) for v in window)  # the MAD


def count_spikes(values, is_spike):
    """The number of spikes (see SPIKE_WINDOW) in values, in iteration order; None entries (steps not logged with that
    column) are skipped, and a run with no values at all (a metrics.csv from before the column) gives None, not 0."""
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
    numbers = dict(params=result['summary']['params'], init_step_loss=rows[0]['step_loss'],
                   init_val_loss=rows[0]['val_loss'], log_n=math.log(vocab_size),
                   predicted_init_loss=predicted_initial_loss(model_config(dict(cfg, tie_mode=tie_mode), vocab_size)))
    for f in FRACTIONS:
        numbers[f'train_loss_{f:g}'] = loss_near(rows, max(1, round(f * max_iters)), max_iters - 1)
    numbers['final_val_loss'] = result['summary'].get('val_loss')  # none where the run diverged
    numbers['best_val_loss'] = result['summary'].get('best_val_loss')
    evals = sorted((r for r in rows if r['val_loss'] is not None), key=lambda r: r['iter'])
    # The earliest evaluation with the lowest val_loss: where early stopping would have kept the model.
    numbers['best_val_iter'] = min(evals, key=lambda r: r['val_loss'])['iter'] if evals else None
    last = evals[-1] if evals else None
    numbers['gap_at_end'] = (last['val_loss'] - last['train_loss']
                             if last is not None and last['train_loss'] is not None else None)
    steps = sorted(rows, key=lambda r: r['iter'])
    numbers['grad_spikes'] = count_spikes([r['grad_norm'] for r in steps], grad_spike)
    numbers['loss_spikes'] = count_spikes([r['step_loss'] for r in steps], loss_spike)
    # Claim 11 (Lopardo et al. 2026): which end feeds the shared matrix early on? The norms of its gradient's
    # output and input parts (lib/probes.GradSources; for untied, the head's and the embedding's), summed over
    # the logged steps of the first EARLY_FRACTION of training, as one ratio.
    early = [r for r in steps if r['iter'] < EARLY_FRACTION * max_iters and r['grad_in'] and r['grad_out'] is not None]
    numbers['grad_ratio_early'] = sum(r['grad_out'] for r in early) / sum(r['grad_in'] for r in early) if early else None
    probed = [r for r in rows if r['copy_prob'] is not None]  # the evaluations, in a run newer than the probe
    numbers['init_copy_prob'] = next((r['copy_prob'] for r in probed if r['iter'] == 0), None)
    numbers['unlearned_copy_iter'] = unlearned_copy_iter(rows)
    numbers['final_copy_prob'] = max(probed, key=lambda r: r['iter'])['copy_prob'] if probed else None
    numbers['probed'] = bool(probed)  # tells "never unlearned" (an iteration of None) from "not measured"
    # The median over logged steps: the machine may be shared, and a single window can stall.
    speeds = [r['tokens_per_sec'] for r in rows if r['iter'] > 0]  # none where a run diverged at iteration 1
    numbers['tokens_per_sec'] = statistics.median(speeds) if speeds else None
    return numbers


# Validation loss by how often the target token occurs in train.bin (do tied rows help rare tokens, as the shared row
# gets gradient from both ends?). (key, header, least count, count below which): a token seen 10 times falls in '10-99'.
BUCKETS = (('lt10', 'seen < 10', 0, 10), ('10_99', 'seen 10-99', 10, 100), ('100_999', 'seen 100-999', 100, 1000),
           ('ge1000', 'seen ≥ 1000', 1000, None))
BUCKET_EDGES = [least for _, _, least, _ in BUCKETS[1:]]

# The second table: validation loss over the whole split and per bucket (key, header, format), and the tokens in each.
BUCKET_COLUMNS = [('val_loss_all', 'whole split', '{:.3f}')] + \
    [(f'val_loss_{key}', header, '{:.3f}') for key, header, *_ in BUCKETS]
BUCKET_TOKENS = ['tokens_all'] + [f'tokens_{key}' for key, *_ in BUCKETS]
BUCKET_FILE = 'freq_buckets.json'  # in the run's folder: evaluated once, read back by later summaries
BEST_BUCKET_FILE = 'freq_buckets_best.json'  # the same for best.pt
# The same columns for best.pt: "at the best point", scored on the whole split rather than eval_iters batches.
BEST_BUCKET_COLUMNS = [('best_' + key, header, spec) for key, header, spec in BUCKET_COLUMNS]
BEST_BUCKET_TOKENS = ['best_' + key for key in BUCKET_TOKENS]
MAX_BUCKET_TARGETS = 1 << 18       # the whole validation split up to this many targets, else its start


class BucketData:
    """The dataset as the frequency buckets need it, read once, and only if some run has no BUCKET_FILE yet."""

    def __init__(self, cfg):
        self.cfg, self._loaded = cfg, None

    def get(self):
        if self._loaded is None:
            splits, meta = load_splits(dict(self.cfg, block_size=1))  # any window fits: the checks only
            counts = torch.bincount(splits['train'], minlength=meta['vocab_size'])
            bucket = torch.bucketize(counts, torch.tensor(BUCKET_EDGES), right=True)  # token id -> its bucket
            self._loaded = splits['val'], bucket, meta
        return self._loaded


def loss_by_frequency(model, val, bucket, block_size, device):
    """(summed cross-entropy, token count) per bucket over the first min(len(val) - 1, MAX_BUCKET_TARGETS)
    targets of val, each predicted once, from non-overlapping windows of block_size (the last one shorter)."""
    import torch.nn.functional as F
    sums, counts = torch.zeros(len(BUCKETS), dtype=torch.float64), torch.zeros(len(BUCKETS), dtype=torch.int64)
    model.eval()
    with torch.no_grad():
        for x, y in whole_split_batches(val, block_size, MAX_BUCKET_TARGETS):
            logits, _ = model(x.to(device))
            loss = F.cross_entropy(logits.float().flatten(0, 1), y.to(device).flatten(), reduction='none')
            b = bucket[y.flatten()]
            sums.index_add_(0, b, loss.double().cpu())
            counts += torch.bincount(b, minlength=len(BUCKETS))
    return sums.tolist(), counts.tolist()


def read_cache(path, made_from, *keys):
    """The values of keys in the cache file at path when it was made from made_from, else None: none yet, an
    unreadable one or one made from other files, to be made again (the file is only a cache)."""
    try:
        with open(path, encoding='utf-8') as f:
            saved = json.load(f)
        return [saved[key] for key in keys] if saved['made_from'] == made_from else None
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_cache(path, made_from, **values):
    atomic_write_bytes(path, (json.dumps(dict(made_from=made_from, **values)) + '\n').encode())


def same_weights_as_checkpoint(run_dir, best, made_from):
    """The checkpoint's cached (loss sums, token counts) when best.pt's weights (best: its contents) are the
    checkpoint's, bit for bit, as they are whenever a run's lowest validation loss is its last evaluation: most
    short runs, where scoring best.pt again would cost a third of a run (two forward passes over the split
    against three of the training tokens'). made_from: best.pt's cache key. None otherwise, or while the
    checkpoint has no cache made from it now with the same data and buckets."""
    ckpt_path = os.path.join(run_dir, 'ckpt.pt')
    try:
        stat = os.stat(ckpt_path)
        cached = read_cache(os.path.join(run_dir, BUCKET_FILE),
                            dict(made_from, ckpt_size=stat.st_size, ckpt_mtime_ns=stat.st_mtime_ns), 'loss_sums', 'tokens')
        if cached is None:
            return None
        final = run_files.load_checkpoint(ckpt_path, 'cpu')['model']
    except Exception:  # no checkpoint, or an unreadable one: best.pt is scored on its own
        return None
    same = final.keys() == best['model'].keys() and all(torch.equal(final[k], best['model'][k]) for k in final)
    return cached if same else None


def bucket_numbers(run_dir, data, cfg, best=False):
    """The run's validation loss per bucket (None where a bucket is empty) and its token counts, for its final
    checkpoint, or with best=True for best.pt (the weights at its lowest validation loss; keys prefixed
    'best_'): from the cache file when it describes that file there now, else by evaluating it (float32, on
    cfg's device) and writing the cache. A run without that file (best.pt: made before it was kept, or no
    evaluation beat iteration 0's) gets None."""
    prefix = 'best_' if best else ''
    ckpt_path = os.path.join(run_dir, run_files.BEST_FILE if best else 'ckpt.pt')
    if not os.path.exists(ckpt_path):
        return {prefix + key: None for key in [key for key, *_ in BUCKET_COLUMNS] + BUCKET_TOKENS}
    stat = os.stat(ckpt_path)
    made_from = dict(ckpt_size=stat.st_size, ckpt_mtime_ns=stat.st_mtime_ns, dataset=cfg['dataset'],
                     max_targets=MAX_BUCKET_TARGETS, edges=BUCKET_EDGES)
    path = os.path.join(run_dir, BEST_BUCKET_FILE if best else BUCKET_FILE)
    if (cached := read_cache(path, made_from, 'loss_sums', 'tokens')) is None:
        if best:
            model, kept = load_best(ckpt_path)
            # the best point is the last: its numbers are the checkpoint's, not scored twice
            cached = same_weights_as_checkpoint(run_dir, kept, made_from)
        else:
            model = run_files.model_from_checkpoint(run_files.load_checkpoint(ckpt_path, 'cpu'), ckpt_path)
        if cached is None:
            val, bucket, _ = data.get()
            device = pick_device(cfg['device'])
            cached = loss_by_frequency(model.to(device), val, bucket, model.config.block_size, device)
        write_cache(path, made_from, loss_sums=cached[0], tokens=cached[1])
    sums, counts = cached
    # The buckets pooled: the loss over the whole split, far less noisy than eval_iters batches.
    numbers = {prefix + 'val_loss_all': sum(sums) / sum(counts), prefix + 'tokens_all': sum(counts)}
    for (key, *_), total, count in zip(BUCKETS, sums, counts):
        numbers[f'{prefix}val_loss_{key}'] = total / count if count else None
        numbers[f'{prefix}tokens_{key}'] = count
    return numbers


# Claim 10 of the verdict table (Lopardo et al. 2026): is the tied matrix closer to an untied model's
# head than to its embedding? Each tied-family run's final shared matrix (pit: its memory U) against
# the same seed's untied run, by linear CKA, beside the CKA of two random matrices of that shape.
ALIGNMENT_COLUMNS = [('cka_emb', 'CKA to untied embedding', '{:.3f}'), ('cka_head', 'CKA to untied head', '{:.3f}'),
                     ('cka_floor', 'random floor', '{:.3f}')]
ALIGNMENT_FILE = 'alignment.json'  # in the run's folder, reused while both checkpoints are unchanged


def alignment_numbers(run_dir, untied_dir):
    """The ALIGNMENT_COLUMNS of one run against the untied run of its seed (None where either checkpoint
    is missing). Read from ALIGNMENT_FILE when it describes the two checkpoints there now."""
    paths = [os.path.join(folder, 'ckpt.pt') for folder in (run_dir, untied_dir)] if untied_dir else []
    if not paths or not all(os.path.exists(path) for path in paths):
        return dict.fromkeys(key for key, *_ in ALIGNMENT_COLUMNS)
    made_from = [[os.stat(path).st_size, os.stat(path).st_mtime_ns] for path in paths]
    cache = os.path.join(run_dir, ALIGNMENT_FILE)
    if cached := read_cache(cache, made_from, 'numbers'):
        return cached[0]
    shared, untied = (run_files.load_checkpoint(path, 'cpu')['model'] for path in paths)
    W = shared['token_embedding_table.weight']
    numbers = dict(cka_emb=linear_cka(W, untied['token_embedding_table.weight']),
                   cka_head=linear_cka(W, untied['lm_head.weight']), cka_floor=random_cka_floor(*W.shape))
    write_cache(cache, made_from, numbers=numbers)
    return numbers


def checkpoint_numbers(run_dir, data, cfg, diverged, untied_dir):
    """What is scored on a run's checkpoints: its final and best loss by bucket, and its alignment with the untied
    run of its seed. For a run that diverged (ablate.py's result) nothing: its checkpoint, if any, is from before
    the loss went non-finite; its iteration instead, and no training loss past it."""
    if not diverged:
        return dict(bucket_numbers(run_dir, data, cfg), **bucket_numbers(run_dir, data, cfg, best=True),
                    **alignment_numbers(run_dir, untied_dir), diverged_at=None)
    empty = [key for key, *_ in BUCKET_COLUMNS + BEST_BUCKET_COLUMNS + ALIGNMENT_COLUMNS] + BUCKET_TOKENS
    return dict(dict.fromkeys(empty + BEST_BUCKET_TOKENS), diverged_at=diverged['iteration'],
                **{f'train_loss_{f:g}': None for f in FRACTIONS if f * cfg['max_iters'] > diverged['iteration']})


# Claim 17 (Lopardo et al. 2026): does tying make the early layers contribute less to the prediction? The
# tuned lens of a run's final checkpoint (lab/tuned_lens.py): per layer (0: the embedding's output, then each
# block's), the whole-split loss through a trained translator ('tuned') and through none ('logit'), and the
# tuned loss minus the run's own ('gap': how far that layer still is from the final prediction).
LENS_FILE = 'tuned_lens.json'  # in the run's folder, reused while ckpt.pt is unchanged


def lens_keys(n_layer):
    return [f'lens_{kind}_{layer}' for kind in ('tuned', 'logit', 'gap') for layer in range(n_layer + 1)]


def lensed_rows(info):
    """{mode: its cells} of a summary's rows that went through the tuned lens; a summary made before the lens has
    no lens keys at all."""
    return {mode: cells for mode, cells in info['modes'].items()
            if cells.get('lens_tuned_0', {}).get('mean') is not None}


def lens_numbers(run_dir, cfg):
    """The lens_keys of one run's ckpt.pt: from LENS_FILE when it describes that file there now, else by training
    its translators (on cfg's device, about a minute on one thread for experiment 5's BPE model) and writing it.
    None for every key where the run has no checkpoint."""
    from lab import tuned_lens
    ckpt_path = os.path.join(run_dir, 'ckpt.pt')
    if not os.path.exists(ckpt_path):
        return dict.fromkeys(lens_keys(cfg['n_layer']))
    stat = os.stat(ckpt_path)
    made_from = dict(ckpt_size=stat.st_size, ckpt_mtime_ns=stat.st_mtime_ns, dataset=cfg['dataset'],
                     steps=tuned_lens.LENS_STEPS, batch=tuned_lens.LENS_BATCH, lr=tuned_lens.LENS_LR,
                     seed=tuned_lens.LENS_SEED, max_targets=tuned_lens.LENS_MAX_TARGETS)
    path = os.path.join(run_dir, LENS_FILE)
    if cached := read_cache(path, made_from, 'lens'):
        lens = cached[0]
    else:
        lens = tuned_lens.tuned_lens_of_run(run_dir, cfg['data_dir'], pick_device(cfg['device']))
        write_cache(path, made_from, lens=lens)
    return {f'lens_{kind}_{layer}': value for layer, (tuned, logit) in enumerate(zip(lens['tuned'], lens['logit']))
            for kind, value in (('tuned', tuned), ('logit', logit), ('gap', tuned - lens['tuned'][-1]))}
