"""A training run's files read back: out_dir/ckpt.pt (everything an exact resume needs), best.pt (the weights at
the lowest validation loss) and metrics.csv (a row per logged iteration), each model built again as it was saved.
Every failure to read them becomes one UserError that says what to do. train.py's checkpoint() is what ckpt.pt
holds; lib/training_run.py's Run writes them."""

import csv
import os

import torch

from lib.command_line import UserError
from lib.memory import matrix_params, memory_shortfall, out_of_memory_reason
from model import MODEL_KEYS, GPT, GPTConfig


# What a resume (or sample.py) reads from a checkpoint, of the type train.py's checkpoint() writes (and more keys).
CHECKPOINT_KEYS = dict(model=dict, optimizer=dict, model_args=dict, config=dict, iter_num=int, best_val_loss=float,
                       rng=dict, data_fingerprint=int, meta=dict)


def load_checkpoint(path, device):
    if not os.path.exists(path):
        raise UserError(f"no checkpoint at {path}; train first, or point --out_dir at a run")
    try:
        ckpt = torch.load(path, map_location=device, weights_only=True, mmap=True)  # file-backed, not copied
        missing = [key for key in CHECKPOINT_KEYS if key not in ckpt]
    except Exception as e:
        # A truncated or corrupted file fails in many ways inside the unzipper or the unpickler;
        # the first sentence of torch's message is the useful part, the rest is about other cases.
        reason = str(e).strip().split('\n')[0].split('. ')[0]
        reason = reason if len(reason) <= 100 else reason[:97] + '...'
        raise UserError(f"checkpoint {path} is unreadable, truncated or corrupted ({type(e).__name__}: {reason}); "
                        f"delete it to train from scratch, or restore a copy") from None
    if missing:
        raise UserError(f"checkpoint {path} lacks {', '.join(missing)}; it was not written by this train.py")
    for key, kind in CHECKPOINT_KEYS.items():  # an edited (or crafted) file is one line, not a traceback further on
        if isinstance(ckpt[key], bool) or not isinstance(ckpt[key], kind) or (kind is int and ckpt[key] < 0):
            raise UserError(f"checkpoint {path} holds {key}={str(ckpt[key])[:40]!r}, not a {kind.__name__} train.py "
                            f"writes; it was not written by this train.py")
    check_current(ckpt, path)
    return ckpt


def check_current(ckpt, path):
    """A checkpoint (ckpt.pt or best.pt) in an older version's form is one line, whichever script reads it."""
    ckpt['model_args'].setdefault('head_init', 'normal')  # every head before the key was drawn N(0, sigma^2)
    if isinstance(cuda := ckpt.get('rng', {}).get('cuda'), list):  # every visible device's: rank 0's (its first) is
        ckpt['rng']['cuda'] = cuda[0] if cuda else None            # every rank's own (train.checkpoint)
    if lacks := [f'model_args.{key}' for key in MODEL_KEYS if key not in ckpt['model_args']]:
        raise older_version(path, f"lacks {', '.join(lacks)}")
    if old_names := [name for name in ckpt['model'] if name.startswith('pit_')]:
        raise older_version(path, f"names pit's parameters {' and '.join(old_names)}, not pit.lower and pit.log_diag")


def older_version(path, what):
    return UserError(f"checkpoint {path} {what}: it was written by an older version of this project, which this one "
                     f"does not read; train the run again")


# Beside ckpt.pt: the weights of the evaluation with the lowest validation loss, without the optimizer
# (a third of the size); lab/run_results.load_best reads it back.
BEST_FILE = 'best.pt'


def model_from_checkpoint(ckpt, path):
    """The trained model of a checkpoint (on the CPU; .to() it), tied or untied as it was saved.
    Settings that the weights (or this model.py) do not fit, from an edited checkpoint or another
    version, are a UserError naming the first misfit."""
    try:
        config = GPTConfig(**ckpt['model_args'])
        # Settings edited to a size the weights do not have would be built at that size before load_state_dict
        # could name the misfit: one the machine cannot hold is refused here, before anything is allocated.
        held = sum(t.numel() for t in ckpt['model'].values() if isinstance(t, torch.Tensor))
        asked = matrix_params(config)
        if short := memory_shortfall(4 * asked, 'cpu') if asked > held else None:
            raise ValueError(f"its model_args ask for at least {asked:,} parameters, whose weights need {short}, "
                             f"but the file holds {held:,}")
        model = GPT(config)
        if ckpt.get('head_untied'):  # after --untie_at the file holds two matrices: load each into its own
            model.untie()
        model.load_state_dict(ckpt['model'])
    except (TypeError, ValueError, RuntimeError) as e:
        if out_of_memory_reason(e):
            raise
        reason = ' '.join(str(e).split()).removeprefix('Error(s) in loading state_dict for GPT: ')
        reason = reason if len(reason) <= 200 else reason[:197] + '...'
        raise UserError(f"checkpoint {path} does not fit the model of this model.py ({reason}); it was edited or "
                        f"written by another version") from None
    return model


def read_metrics(path):
    """The rows of a metrics.csv as dicts of strings."""
    with open(path, newline='') as f:
        return list(csv.DictReader(f))
