"""The optimizers a run steps: AdamW alone (--optimizer=adamw), or AdamW for the tables, the head and the
gains with torch's Muon for the blocks' matrices (--optimizer=muon; which parameters go where is decided beside
the model, in model.GPT.optimizer_groups, next to its reason). Here: their settings and checks, one object that steps,
clears, saves and loads them together, a peak rate for each role (--embed_lr, --head_lr, --muon_lr) under
train.py's one schedule, and the untie of --untie_at.

Muon's learning-rate adjustment is torch's 'match_rms_adamw' (0.2 * sqrt(max(A, B)) for an A x B matrix, from
Moonshot's "Muon is Scalable for LLM Training", arXiv 2502.16982): it scales the orthogonalised update to the
size an AdamW update would have, so --muon_lr is in AdamW's units, the same weight decay carries over, and a
sweep of one is comparable with a sweep of the other. 'original' (Keller Jordan's sqrt(max(1, A/B))) gives a
smaller step for the same rate: match_rms_adamw / original is 0.2 * sqrt(max(A, B)) / sqrt(max(1, A/B)), 2.26
for the 128 x 128 matrices (and each 128 x 128 slice of q, k, v), 4.53 for the MLP's 512 x 128, so 'original'
would want rates 2.3-4.5x larger (about 0.02) to match muon_lr's default 8e-3 here.

A rate is also a decay: both optimizers decay a weight by lr * weight_decay a step, so an end's rate at x10 also decays
it ten times harder. --ends_decay says what a sweep of the ends' rates holds fixed (docs/experiment6.md,
"The controls"): 'coupled' (torch's, the default) the coefficient weight_decay; 'per_step' the decay per step,
weight_decay divided by the end's multiple of learning_rate; 'none' no decay on the token table and an untied head."""

import math

import torch
from torch.optim._muon import _adjust_lr, _zeropower_via_newtonschulz

from lib.command_line import UserError
from lib.device import cpu_has_native_bf16
from lib.run_files import older_version


OPTIMIZERS = ('adamw', 'muon')
MUON_QKV = ('split', 'fused')
ENDS_DECAY = ('coupled', 'per_step', 'none')
# The rates and schedule a resume goes on with: a checkpoint from before any of these keys cannot say its run's.
RESUMED_KEYS = ('learning_rate', 'min_lr', 'warmup_iters', 'lr_decay_iters', 'decay_lr', 'grad_clip', 'untie_at',
                'embed_lr', 'head_lr', 'muon_lr')
# These live in the optimizers' state, which a resume loads over whatever the command line says (torch's
# load_state_dict restores each group's weight_decay, betas and momentum): a different value would be ignored
# without a word, so it is refused in one line. muon_qkv is how the state was built.
KEPT_BY_THE_STATE = ('weight_decay', 'beta1', 'beta2', 'muon_momentum', 'muon_qkv', 'ends_decay')


def check_optimizer_args(cfg):
    """The optimizer keys of train.py's command line, each bad value a one-line error naming it."""
    for key in ('embed_lr', 'head_lr', 'muon_lr'):
        value = cfg.get(key)
        if value is None and key != 'muon_lr':
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
            allowed = "a positive finite number" + ("" if key == 'muon_lr' else ", or None (= --learning_rate)")
            raise UserError(f"--{key} must be {allowed}, got {value!r}")
        cfg[key] = float(value)
    if not 0 <= cfg['muon_momentum'] < 1:
        raise UserError(f"--muon_momentum must be at least 0 and below 1, got {cfg['muon_momentum']}")
    uses_own_rates = [f"--{key}" for key in ('embed_lr', 'head_lr') if cfg[key] is not None]
    uses_own_rates += ['--optimizer=muon'] if cfg['optimizer'] == 'muon' else []
    if uses_own_rates and cfg['learning_rate'] <= 0:
        # every group follows learning_rate's schedule, as a fraction of its peak: there must be a peak
        raise UserError(f"{' and '.join(uses_own_rates)} {'need' if len(uses_own_rates) > 1 else 'needs'} a positive --learning_rate (the schedule every rate "
                        f"follows), got {cfg['learning_rate']}")


def check_head_lr(cfg):
    """--head_lr needs a head of its own: untied, or tied until --untie_at (after a resume, the checkpoint's mode);
    or pit's S, the head's transform."""
    if cfg['head_lr'] is not None and cfg['tie_mode'] not in ('untied', 'pit') and cfg.get('untie_at') is None:
        raise UserError(f"--head_lr is for a head of its own, but --tie_mode={cfg['tie_mode']} makes the head and the "
                        f"token table one matrix, and one matrix has one rate: use --embed_lr for it")


def check_same_optimizer(ckpt, path):
    """A checkpoint whose optimizer state or settings an older version saved otherwise is a one-line error (which
    optimizer, rates and decays a resume goes on with: lib/training_run.resume_settings)."""
    if not all('role' in group for group in ckpt['optimizer'].get('adamw', ckpt['optimizer'])['param_groups']):
        raise older_version(path, "holds AdamW's state in groups without roles")
    if lacks := [f'config.{key}' for key in ('optimizer', *RESUMED_KEYS, *KEPT_BY_THE_STATE)
                 if key not in ckpt['config']]:
        raise older_version(path, f"lacks {', '.join(lacks)}")


# ---------------------------------------------------------------- Muon on a CPU

def newton_schulz(update, coefficients, steps, eps):
    """torch's quintic Newton-Schulz iteration towards the nearest semi-orthogonal matrix (U V^T of the update's
    SVD, roughly), the same arithmetic as torch.optim._muon's, in the update's own dtype (float32 here)."""
    a, b, c = coefficients
    x = update.T if update.size(0) > update.size(1) else update
    x = x / x.norm().clamp(min=eps)
    for _ in range(steps):
        gram = x @ x.T
        x = torch.addmm(x, torch.addmm(gram, gram, gram, beta=b, alpha=c), x, beta=a)
    return x.T if update.size(0) > update.size(1) else x


class SlicedMuon(torch.optim.Muon):
    """torch.optim.Muon, step for step (momentum, Nesterov, decoupled decay, the rate adjustment), with two
    changes. (1) maps: a matrix that stacks k maps (c_attn's q, k, v: k = 3) is orthogonalised a row block at a
    time, each block with its own rate adjustment, as k separate matrices would be. (2) the Newton-Schulz dtype:
    torch casts to bfloat16, the fast path on a GPU and on a CPU with native bf16; a CPU without it emulates those
    matmuls (71 ms instead of 2.5 ms for one 512 x 128 matrix, a default-recipe step of 563 ms against 90 ms;
    one thread, a Zen 4 capped at AVX2; docs/performance.md), so there it runs in float32 (newton_schulz above).
    With no maps and bfloat16 it is torch's Muon to the bit (tests/test_optimizers.py)."""

    def __init__(self, params, maps=None, float32=False, **settings):
        super().__init__(params, **settings)
        self.maps = maps or {}  # parameter -> number of maps stacked along its rows
        self.float32 = float32

    @classmethod
    def for_blocks(cls, model, groups, cfg, device_type):
        """Muon for the blocks' matrices (GPT.optimizer_groups' last group, 'muon') at --muon_lr and --muon_momentum."""
        # FOOTGUN: c_attn stacks q, k and v (3d x d) for one matmul, but they are three maps: Muon is told so, and
        # --muon_qkv=split orthogonalises each d x d slice on its own, as nanochat's separate q, k, v would be (fused,
        # experiment 6's, the stack as one matrix). Newton-Schulz in float32 on a CPU that emulates bf16 (above).
        split = cfg.get('muon_qkv', 'split') == 'split'
        maps = {block.attn.c_attn.weight: 3 for block in model.blocks} if split else None
        float32 = device_type == 'cpu' and not cpu_has_native_bf16()
        return cls(groups, maps=maps, float32=float32, lr=cfg['muon_lr'], momentum=cfg['muon_momentum'],
                   adjust_lr_fn='match_rms_adamw')

    def orthogonalise(self, update, group):
        if self.float32:
            return newton_schulz(update.float(), group['ns_coefficients'], group['ns_steps'], group['eps'])
        return _zeropower_via_newtonschulz(update, group['ns_coefficients'], group['ns_steps'], group['eps'])

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group['params']:
                if p.grad is None:
                    continue
                state = self.state[p]
                if 'momentum_buffer' not in state:
                    state['momentum_buffer'] = torch.zeros_like(p.grad)
                buffer = state['momentum_buffer']
                buffer.lerp_(p.grad, 1 - group['momentum'])
                update = p.grad.lerp(buffer, group['momentum']) if group['nesterov'] else buffer
                p.mul_(1 - group['lr'] * group['weight_decay'])
                for p_map, update_map in zip(p.chunk(self.maps.get(p, 1)), update.chunk(self.maps.get(p, 1))):
                    p_map.add_(self.orthogonalise(update_map, group).to(p.dtype),
                               alpha=-_adjust_lr(group['lr'], group['adjust_lr_fn'], p_map.shape))


# ---------------------------------------------------------------- the optimizers as one

class Optimizers:
    """AdamW, and Muon if there is one, stepped, cleared, saved and loaded as one optimizer: what train.py's
    step, torch's GradScaler (param_groups, step) and the checkpoint need of it."""

    def __init__(self, optimizers):
        self.optimizers = optimizers
        self.adamw = optimizers[0]
        self.muon = optimizers[1] if len(optimizers) > 1 else None

    @property
    def param_groups(self):
        return [group for optimizer in self.optimizers for group in optimizer.param_groups]

    def step(self):
        for optimizer in self.optimizers:
            optimizer.step()

    def zero_grad(self, set_to_none=True):
        for optimizer in self.optimizers:
            optimizer.zero_grad(set_to_none=set_to_none)

    def state_dict(self):
        """AdamW alone: AdamW's own state_dict, as checkpoints always held; with Muon, both under their names."""
        if self.muon is None:
            return self.adamw.state_dict()
        return {'adamw': self.adamw.state_dict(), 'muon': self.muon.state_dict()}

    def load_state_dict(self, saved):
        if 'adamw' in saved:
            if self.muon is None:
                raise ValueError("the checkpoint holds Muon's state too, and this run has no Muon")
            self.adamw.load_state_dict(saved['adamw'])
            self.muon.load_state_dict(saved['muon'])
            return
        if self.muon is not None:
            raise ValueError("the checkpoint holds no Muon state")
        self.adamw.load_state_dict(saved)


def build_optimizer(raw_model, cfg, device_type, fused=None):
    """The run's optimizers as one: AdamW for the model's groups (GPT.optimizer_groups, which says which parameter
    goes where and why), and with --optimizer=muon torch's Muon for the blocks' matrices. --ends_decay sets the
    decay of the token table and an untied head; set_rates, every step, each group's rate."""
    muon = cfg.get('optimizer', 'adamw') == 'muon'
    groups = raw_model.optimizer_groups(cfg['weight_decay'], muon)
    form, peaks, lr = cfg.get('ends_decay', 'coupled'), peak_rates(cfg), cfg['learning_rate']
    for group in groups:  # per_step: weight_decay over the end's multiple of learning_rate, a step's decay as at x1
        if group['role'] in ('embed', 'head') and group['weight_decay'] and form != 'coupled':
            multiple = peaks[group['role']] / lr if lr > 0 else 1.0
            group['weight_decay'] = 0.0 if form == 'none' else cfg['weight_decay'] / multiple
    # fused: one kernel for all tensors, not ~10 small ops each: 5 % of a CPU step (docs/performance.md)
    fused = device_type in ('cpu', 'cuda', 'mps') if fused is None else fused
    adamw = torch.optim.AdamW([group for group in groups if group['role'] != 'muon'], lr=lr,
                              betas=(cfg['beta1'], cfg['beta2']), fused=fused)
    matrices_muon = [SlicedMuon.for_blocks(raw_model, groups[-1:], cfg, device_type)] if muon else []
    return Optimizers([adamw, *matrices_muon])


# ---------------------------------------------------------------- a rate for each role

def peak_rates(cfg):
    """The peak rate of each group's role (GPT.optimizer_groups names them). The token table, and the shared
    matrix when tied: --embed_lr; an untied head: --head_lr, which after --untie_at defaults to the shared
    matrix's rate (the copy goes on as it went); Muon's matrices: --muon_lr; the rest: --learning_rate."""
    lr = cfg['learning_rate']
    embed = lr if cfg.get('embed_lr') is None else cfg['embed_lr']
    head = cfg.get('head_lr') or (embed if cfg.get('untie_at') is not None else lr)
    return dict(embed=embed, head=head, matrices=lr, gains=lr, muon=cfg.get('muon_lr', lr))


def set_rates(optimizer, cfg, lr_now):
    """Every group at its peak rate times the schedule's current fraction of its peak, lr_now / learning_rate:
    warmup and cosine scale every group alike. A group at learning_rate gets lr_now exactly (x * 1.0)."""
    peaks, lr = peak_rates(cfg), cfg['learning_rate']
    for group in optimizer.param_groups:
        group['lr'] = lr_now * (peaks[group['role']] / lr if lr > 0 else 1.0)


def untie_head(raw_model, optimizer):
    """--untie_at: the head gets its own copy of the shared matrix (model.untie) in AdamW's 'head' group, and
    a copy of the shared matrix's AdamW state (both moments and the step), so neither the logits nor the size
    of the next update jump."""
    shared = raw_model.token_embedding_table.weight
    head = raw_model.untie()
    adamw = optimizer.adamw
    next(group for group in adamw.param_groups if group['role'] == 'head')['params'].append(head)
    if shared in adamw.state:
        adamw.state[head] = {key: value.clone() for key, value in adamw.state[shared].items()}
