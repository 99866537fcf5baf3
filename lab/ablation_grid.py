"""The grid an ablation trains: its rows (every tie mode, and tied-then-untied), the train.py
config of each run, and which settings must match for a finished run to be reused."""

import json
import re
from fractions import Fraction
from typing import NamedTuple

from lib.command_line import UserError
from model import MODEL_KEYS, GPTConfig, TIE_MODES


# The row that is no tie mode: tie_mode='tied' with train.py's untie_at (see the docstring). Its name
# is also its folder's, so no spaces or commas; the table and figure call it row_label(...).
UNTIE_ROW = 'tied_untie'
MODES = (*TIE_MODES, UNTIE_ROW)  # the default --modes, in order
# And one asked for by name: tie_mode='untied' with train.py's --head_init=zero, nanochat's and modded-nanogpt's head.
ZERO_HEAD_ROW = 'untied_zero'
ROWS = (*MODES, ZERO_HEAD_ROW)  # what --modes accepts, besides the scaled rows below

# A row may add, after its mode, settings of its own (each at most once, in any order):
#   _igsK  the token lookup's gradient times K (train.py --input_grad_scale=K, model.ScaleGrad; claim 12,
#          Lopardo et al. 2026, arXiv 2603.26663), e.g. tied_igs2
#   _eX    the token table's rate (the shared matrix's when tied) X times --learning_rate (train.py --embed_lr)
#   _hY    an untied head's rate Y times --learning_rate (train.py --head_lr): untied, tied_untie and pit (its S)
# e.g. untied_e10_h0.3, tied_e3, tied_untie_e3. A setting a row does not name is the ablation's own, so one
# ablate command sweeps rates with the same seeds and data order in every cell.
ROW_SETTINGS = {'igs': 'input_grad_scale', 'e': 'embed_mult', 'h': 'head_mult'}
_ROW_SETTING = re.compile(r'_(igs|e|h)([0-9]+(?:\.[0-9]*)?(?:e[-+]?[0-9]+)?)')
# A --modes entry: a mode (tied_untie before tied: the longest that the settings after it fit), then its settings
_ROW = re.compile(f"({'|'.join(sorted(ROWS, key=len, reverse=True))})((?:{_ROW_SETTING.pattern})*)")
ROW_FORMS = "MODE_igsK (input gradient times K), MODE_eX (embed rate X x learning_rate), MODE_hY (head rate)"


class Row(NamedTuple):
    tie_mode: str
    input_grad_scale: float = None   # None: the ablation's --input_grad_scale
    unties: bool = False             # the tied_untie row
    zero_head: bool = False          # the untied_zero row
    embed_mult: float = None         # None: the ablation's --embed_lr
    head_mult: float = None          # None: the ablation's --head_lr


def parse_row(name):
    """The Row of a --modes entry, or None where it names no row (an unknown mode or setting, a setting twice,
    a value that is not a positive finite number)."""
    match, settings = _ROW.fullmatch(name), {}
    if match is None:
        return None
    for setting in _ROW_SETTING.finditer(match.group(2)):
        value = float(setting.group(2))
        if setting.group(1) in settings or not 0 < value < float('inf'):
            return None
        settings[setting.group(1)] = value
    base = match.group(1)
    return Row({UNTIE_ROW: 'tied', ZERO_HEAD_ROW: 'untied'}.get(base, base), unties=base == UNTIE_ROW,
               zero_head=base == ZERO_HEAD_ROW, **{ROW_SETTINGS[key]: value for key, value in settings.items()})


def check_row(name):
    """A row that parses but cannot be trained: a head rate where the head is the token table."""
    row = parse_row(name)
    if row.head_mult is not None and row.tie_mode not in ('untied', 'pit') and not row.unties:
        raise UserError(f"--modes has {name}, a head rate for tie_mode {row.tie_mode}, whose head and token table "
                        f"are one matrix with one rate: give it an embed rate (_eX) instead")


ABLATE_KEYS = ('modes', 'seeds', 'quick', 'versus', 'jobs', 'tuned_lens')

# Keys that do not change what a run computes; all others must match to skip or resume a run.
BOOKKEEPING_KEYS = ('out_dir', 'init_from', 'progress')

# Keys newer than some finished runs' result.json, with the value those runs were made with: head_init (every
# head was drawn normal before it), gelu_approx and input_grad_scale; untie_at, which runs made before the tied_untie
# row do not record (none of them untied); the optimizer's, from before --optimizer (all AdamW at one rate) and
# --muon_qkv (fused); pad_vocab: 'auto', which left the head unpadded on the CPUs that made them, as 'auto' still
# does there.
LEGACY_RUN_KEYS = dict(head_init='normal', gelu_approx='none', input_grad_scale=1.0, untie_at=None, pad_vocab='auto',
                       optimizer='adamw', embed_lr=None, head_lr=None, muon_qkv='fused', ends_decay='coupled')
MUON_KEYS = ('muon_lr', 'muon_momentum', 'muon_qkv')  # read by Muon runs only: an AdamW run matches whatever they are

# Which evaluation batches a run was scored on. train.estimate_loss draws them from a generator of their own, seeded
# with --eval_seed and never the training one, the same for every --seed and tie mode (the default, 11337, is what a
# run with the default seed always used), so that the runs of an ablation, whatever their seed, are scored on the same
# tokens and their best points compare. Runs made before eval_seed existed drew them with seed + EVAL_SEED_OFFSET.
EVAL_SEED_OFFSET = 10_000


def recorded_eval_seed(saved_cfg):
    """The eval_seed a run was made with, from its recorded config; a run older than the key used seed + offset."""
    return saved_cfg['eval_seed'] if 'eval_seed' in saved_cfg else saved_cfg['seed'] + EVAL_SEED_OFFSET


def untie_iter(cfg):
    """The iteration at which the tied_untie row unties, as train.py computes it."""
    return round(cfg['untie_at'] * cfg['max_iters'])


def fraction_text(x):
    """2/3 for 0.666..., 1/2 for 0.5; a fraction with no small denominator as it was given (0.667)."""
    f = Fraction(x).limit_denominator(12)
    return f"{f.numerator}/{f.denominator}" if abs(float(f) - x) < 1e-9 else f"{x:g}"


def row_label(mode, untie_at):
    """The name a reader sees in the table and the figure."""
    row = parse_row(mode)
    label = f"tied, untied at {fraction_text(untie_at)}" if row.unties else row.tie_mode
    label += ", zero head" if row.zero_head else ''
    settings = ('input grad', row.input_grad_scale), ('embed lr', row.embed_mult), ('head lr', row.head_mult)
    return label + ''.join(f", {words} ×{value:g}" for words, value in settings if value is not None)


def model_config(run_cfg, vocab_size):
    """The run's GPTConfig, checked now rather than minutes into the ablation (e.g. an odd width for shuffle)."""
    try:
        return GPTConfig(**{k: run_cfg[k] if k in run_cfg else LEGACY_RUN_KEYS[k]  # a run from before the key
                            for k in MODEL_KEYS if k != 'vocab_size'},
                         vocab_size=run_cfg['vocab_size'] or vocab_size)
    except ValueError as e:
        raise UserError(f"tie_mode={run_cfg['tie_mode']}: {e}") from None


def recorded_config(run_cfg):
    """What a run is made with, as it is stored in result.json (through JSON, so comparisons are fair)."""
    return json.loads(json.dumps({k: v for k, v in run_cfg.items() if k not in BOOKKEEPING_KEYS}))
