"""The grid an ablation trains: its rows (every tie mode, and tied-then-untied), the train.py
config of each run, and which settings must match for a finished run to be reused."""

import json
from fractions import Fraction

from lib import run_files
from lib.command_line import UserError
from model import GPTConfig, TIE_MODES


# The row that is no tie mode: tie_mode='tied' with train.py's untie_at (see the docstring). Its name
# is also its folder's, so no spaces or commas; the table and figure call it row_label(...).
UNTIE_ROW = 'tied_untie'
MODES = (*TIE_MODES, UNTIE_ROW)  # what --modes accepts, in the default order, besides the scaled rows below

# Rows that scale the input side's gradient (train.py's --input_grad_scale=K, model.ScaleGrad): MODE_igsK, e.g.
# tied_igs2 is tie_mode=tied with the token lookup's gradient times 2 (claim 12 of the verdict table, Lopardo
# et al. 2026, arXiv 2603.26663). Every other row trains with the ablation's own --input_grad_scale.
SCALED_ROW = '_igs'


def parse_row(name):
    """(tie_mode, input_grad_scale or None, unties) of a --modes entry, or None where it names no row."""
    if name == UNTIE_ROW:
        return 'tied', None, True
    if name in TIE_MODES:
        return name, None, False
    base, found, scale = name.rpartition(SCALED_ROW)
    if not found or base not in TIE_MODES:
        return None
    try:
        k = float(scale)
    except ValueError:
        return None
    return (base, k, False) if 0 < k < float('inf') else None

ABLATE_KEYS = ('modes', 'seeds', 'quick', 'versus', 'jobs')


# Keys that do not change what a run computes; all others must match to skip or resume a run.
BOOKKEEPING_KEYS = ('out_dir', 'init_from', 'progress')


# Keys newer than some finished runs, with the value those runs were made with: run_files' model keys,
# and untie_at, which runs made before the tied_untie row do not record (none of them untied).
LEGACY_RUN_KEYS = dict(run_files.LEGACY_MODEL_ARGS, untie_at=None)


def untie_iter(cfg):
    """The iteration at which the tied_untie row unties, as train.py computes it."""
    return round(cfg['untie_at'] * cfg['max_iters'])


def fraction_text(x):
    """2/3 for 0.666..., 1/2 for 0.5; a fraction with no small denominator as it was given (0.667)."""
    f = Fraction(x).limit_denominator(12)
    return f"{f.numerator}/{f.denominator}" if abs(float(f) - x) < 1e-9 else f"{x:g}"


def row_label(mode, untie_at):
    """The name a reader sees in the table and the figure."""
    if mode == UNTIE_ROW:
        return f"tied, untied at {fraction_text(untie_at)}"
    tie_mode, scale, _ = parse_row(mode)
    return mode if scale is None else f"{tie_mode}, input grad ×{scale:g}"


def model_config(run_cfg, vocab_size):
    """The run's GPTConfig, checked now rather than minutes into the ablation (e.g. an odd width for shuffle)."""
    try:
        return GPTConfig(**{k: run_cfg[k] for k in run_files.MODEL_KEYS if k != 'vocab_size'},
                         vocab_size=run_cfg['vocab_size'] or vocab_size)
    except ValueError as e:
        raise UserError(f"tie_mode={run_cfg['tie_mode']}: {e}") from None


def recorded_config(run_cfg):
    """What a run is made with, as it is stored in result.json (through JSON, so comparisons are fair)."""
    return json.loads(json.dumps({k: v for k, v in run_cfg.items() if k not in BOOKKEEPING_KEYS}))
