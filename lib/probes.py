"""Probes, and nothing else, each measuring what the tying mechanism looks like while a model trains and changing
nothing: the copy probe (how much of a copying machine the model is, from an evaluation's logits) and the
gradient-source probe (where the shared matrix's gradient comes from, over one optimizer step). What a run does
to its model, the untie and pit's retraction, is lib/interventions.py's."""

import torch


def copy_probe(logits, idx, targets, rows=1):
    """How much of a copying machine the model is on one batch (docs/initial-loss.md: at init a tied
    model predicts "the next token is this token"). logits (B, T, n) for inputs idx (B, T) and next
    tokens targets (B, T). Returns the means over positions of
        copy_prob    the probability given to the current token, softmax(z)_i;
        repeat_rate  how often the next token really is the current one (what a perfect model gives it);
        self_margin  the current token's logit minus the mean logit, z_i - mean_k z_k (~ d*sigma at init
                     for plain tying with identity blocks, the self term of (*)).
    A few positions at a time in float32: the whole batch's would add 2 * B * T * n * 4 bytes to a training step's
    peak (5 GB at B 12, T 1024 and GPT-2's vocabulary); each position's numbers are the same either way."""
    copy_prob, self_margin = (torch.empty(idx.shape, device=logits.device) for _ in 'cs')  # (B, T)
    for b in range(0, idx.size(0), rows):  # rows of the batch a chunk
        z = logits[b:b + rows].float()                                            # (rows, T, n)
        self_logit = z.gather(-1, idx[b:b + rows, :, None])[..., 0]               # (rows, T)
        copy_prob[b:b + rows] = (self_logit - z.logsumexp(-1)).exp()
        self_margin[b:b + rows] = self_logit - z.mean(-1)
    return dict(copy_prob=copy_prob.mean().item(), repeat_rate=(targets == idx).float().mean().item(),
                self_margin=self_margin.mean().item())


def copying_share(probe, vocab_size):
    """copy_prob while the head copies its input, else None: copying is giving the current token three times what
    the text's repeats, or a uniform guess, would earn it (plain tying's start does; a trained model does not)."""
    return probe['copy_prob'] if probe['copy_prob'] > 3 * max(probe['repeat_rate'], 1 / vocab_size) else None


class GradSources:
    """Where the shared matrix's gradient comes from (docs/2026-remedies.md, "`grad_in` and `grad_out`"), for one
    optimizer step: grad_in, the norm of the part that comes through the input lookup, and grad_out, the norm of the
    rest (the head's side). Used as a context around the step's forward and backward passes:

        with probe:                      # hooks on the lookup and on the ends' weights, while the step runs
            ... forward, backward, clip, step ...
        probe.norms()                    # from what the hooks kept: any time before the next step

    The lookup W[idx] sends its output's gradient G (B, T, C) into W's rows by index_add: the input part is exactly that
    scatter, summed over the step's micro-batches, and the output part is the whole gradient minus it. The whole
    gradient is kept as the backward pass hands it to W (a hook on the weight, before clipping and the optimizer touch
    .grad), so the loop's step needs no hook of its own. For `untied` the two are two matrices, and their own gradients'
    norms are reported, so the columns compare across modes. With --input_grad_scale k both modes report the input part
    as the matrix receives it, k times what the loss sends (the scale acts between the lookup and the blocks), so
    grad_out / grad_in is the balance the optimizer sees. A float16 GradScaler's factor (scaler) is divided out. Costs
    two n x d buffers and a scatter per micro-batch, and only on the steps it is used for."""

    def __init__(self, model, scaler=None):
        self.model, self.scaler, self._handles = model, scaler, []
        self.table = model.token_embedding_table

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
        self._handles.append(self.table.weight.register_hook(self._keeper('table')))
        if self.model.is_tied:
            self._handles.append(self.table.register_forward_hook(self._on_lookup))
        else:
            self._handles.append(self.model.lm_head.weight.register_hook(self._keeper('head')))
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
