"""Probes: what the tying mechanism looks like while a model trains, measured on a batch and
logged to metrics.csv (how much of a copying machine the model is), and pit's two matrices
as an untied model would hold them; and the Instruments object through which train.py carries them all."""

import contextlib
import math

import torch

from lib.init_loss_formula import predicted_initial_loss
from lib.optimizers import untie_head
from model import TIE_MODES


def copy_probe(logits, idx, targets):
    """How much of a copying machine the model is on one batch (docs/initial-loss.md: at init a tied
    model predicts "the next token is this token"). logits (B, T, n) for inputs idx (B, T) and next
    tokens targets (B, T). Returns the means over positions of
        copy_prob    the probability given to the current token, softmax(z)_i;
        repeat_rate  how often the next token really is the current one (what a perfect model gives it);
        self_margin  the current token's logit minus the mean logit, z_i - mean_k z_k (~ d*sigma at init
                     for plain tying with identity blocks, the self term of (*))."""
    logits = logits.float()
    self_logit = logits.gather(-1, idx[..., None])[..., 0]                        # (B, T)
    return dict(copy_prob=(self_logit - logits.logsumexp(-1)).exp().mean().item(),
                repeat_rate=(targets == idx).float().mean().item(),
                self_margin=(self_logit - logits.mean(-1)).mean().item())


def start_line(config, tie_mode, val_loss, probe, copying):
    """train.py's first line of a fresh run: its first evaluation beside what it means. A uniform guess scores log n,
    (*) predicts this mode's start (docs/initial-loss.md), and the copy probe says whether the head copies its input
    (copying: it gives the current token three times what the text's repeats or a uniform guess would), as plain
    tying's does."""
    why = "the head copies its input, the current token scoring far above every other" if copying \
        else TIE_MODES[tie_mode].what
    return (f"start: val loss {val_loss:.2f} against log n = {math.log(config.vocab_size):.2f} for a uniform guess; "
            f"(*) predicts {predicted_initial_loss(config):.2f} for {tie_mode}: {why}; {100 * probe['copy_prob']:.0f} % "
            f"of the probability on the current token, which comes next {100 * probe['repeat_rate']:.0f} % of the time")


@torch.no_grad()
def pit_matrices(model):
    """pit as an untied model holds it: the input matrix (rows S^-1 u_i, n x d) and the head U S."""
    U, L = model.token_embedding_table.weight, model.pit.cholesky()
    return model.pit.lift(U[None])[0], U @ L @ L.t()


class GradSources:
    """Where the shared matrix's gradient comes from (docs/2026-remedies.md, "`grad_in` and `grad_out`"), for one
    optimizer step: grad_in, the norm of the part that comes through the input lookup, and grad_out, the norm of the
    rest (the head's side). Used as a context around the step's forward and backward passes:

        with probe:                      # hooks on the lookup and on the ends' weights, while the step runs
            ... forward, backward, clip, step ...
        probe.norms()                    # from what the hooks kept: any time before the next step

    The lookup W[idx] sends its output's gradient G (B, T, C) into W's rows by index_add: the input part is
    exactly that scatter, summed over the step's micro-batches, and the output part is the whole gradient minus
    it. The whole gradient is kept as the backward pass hands it to W (a hook on the weight, before clipping and
    the optimizer touch .grad), so the loop's step needs no hook of its own. For `untied` the two are two
    matrices, and their own gradients' norms are reported, so the columns compare across modes. With
    --input_grad_scale k both modes report the input part as the matrix receives it, k times what the loss sends
    (the scale acts between the lookup and the blocks), so grad_out / grad_in is the balance the optimizer sees.
    A float16 GradScaler's factor (scaler) is divided out. Costs two n x d buffers and a scatter per micro-batch,
    and only on the steps it is used for."""

    def __init__(self, model, scaler=None):
        self.model, self.scaler = model, scaler
        self.table = model.token_embedding_table
        self.input_part, self.whole, self._handles = None, {}, []

    def _on_lookup(self, module, inputs, output):
        if not output.requires_grad:
            return
        idx = inputs[0].reshape(-1)

        # Under torch.compile, setting self.input_part here is a graph break on probed steps (and one more
        # compile, as the hook comes and goes). The break stays: a variant that index_adds into one persistent
        # buffer traces without a break, and reports 0 from the second compiled step on
        # (torch 2.13, CPU inductor). tests/test_mechanism.py compares the columns with eager's.
        def scatter(grad):
            part = torch.zeros_like(self.table.weight, dtype=torch.float32)
            part.index_add_(0, idx, grad.reshape(-1, grad.size(-1)).float())
            self.input_part = part if self.input_part is None else self.input_part + part
        output.register_hook(scatter)

    def _keeper(self, name):
        def keep(grad):  # what this backward pass adds to the weight's .grad: summed over the micro-batches
            self.whole[name] = grad.float() if name not in self.whole else self.whole[name] + grad.float()
            if self.scaler is not None and self.scaler.is_enabled():
                self.grad_scale = self.scaler.get_scale()  # the factor of this backward pass, before update()
        return keep

    def __enter__(self):
        self.input_part, self.whole, self.grad_scale = None, {}, 1.0
        model = self.model
        if model.is_tied:
            self._handles.append(self.table.register_forward_hook(self._on_lookup))
            self._handles.append(self.table.weight.register_hook(self._keeper('table')))
        else:
            self._handles += [self.table.weight.register_hook(self._keeper('table')),
                              model.lm_head.weight.register_hook(self._keeper('head'))]
        return self

    def __exit__(self, *exc):
        for handle in self._handles:
            handle.remove()
        self._handles = []

    @torch.no_grad()
    def norms(self):
        """(grad_in, grad_out) as floats."""
        grad_scale, whole = self.grad_scale, self.whole
        distributed = torch.distributed.is_available() and torch.distributed.is_initialized()
        if distributed:  # as DDP averages .grad over the ranks
            for grad in whole.values():
                torch.distributed.all_reduce(grad)
                grad /= torch.distributed.get_world_size()
        if not self.model.is_tied:
            return tuple(whole[name].norm().item() / grad_scale if name in whole else 0.0 for name in ('table', 'head'))
        if 'table' not in whole:
            return 0.0, 0.0
        input_part = self.input_part if self.input_part is not None else torch.zeros_like(whole['table'])
        if distributed:  # the scatter above saw this rank's batches only
            torch.distributed.all_reduce(input_part)
            input_part /= torch.distributed.get_world_size()
        return input_part.norm().item() / grad_scale, (whole['table'] - input_part).norm().item() / grad_scale


class Instruments:
    """The research instruments a training run carries, each optional and attached here, in one place:
    - the gradient-source probe (GradSources), on the steps the loop logs or evaluates: metrics.csv's grad_in and
      grad_out;
    - --untie_at: at that iteration the shared matrix becomes two (lib/optimizers.untie_head), and the loop wraps
      the model again (compile and DDP fix their parameters when they wrap);
    - pit's retraction of its token memory onto orthonormal columns after every optimizer step
      (model.GPT.after_optimizer_step; nothing for the other modes).
    The copy probe needs no attaching: the evaluation reads it from the logits it computes anyway (copy_probe)."""

    def __init__(self, model, optimizer, scaler, cfg):
        self.model, self.optimizer = model, optimizer
        self.untie_iter = round(cfg['untie_at'] * cfg['max_iters']) if cfg['untie_at'] is not None else None
        self.grad_sources = GradSources(model, scaler)
        self.probed = False

    def unties_now(self, iter_num):
        """--untie_at: True at the iteration where the shared matrix is split (the loop then wraps the model)."""
        if iter_num != self.untie_iter or not self.model.is_tied:
            return False
        untie_head(self.model, self.optimizer)
        return True

    def watching(self, probe):
        """Around one optimizer step: the gradient-source probe where probe is true (on every DDP rank alike: its
        all-reduce needs them all)."""
        self.probed = probe
        return self.grad_sources if probe else contextlib.nullcontext()

    def after_step(self):
        """After the optimizer's step: pit's retraction; (grad_in, grad_out) of a probed step, else None."""
        self.model.after_optimizer_step()
        return self.grad_sources.norms() if self.probed else None
