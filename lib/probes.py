"""Probes: what the tying mechanism looks like while a model trains, measured on a batch and
logged to metrics.csv (how much of a copying machine the model is)."""


def copy_probe(logits, idx, targets):
    """How much of a copying machine the model is on one batch (DESIGN.md: at init a tied model
    predicts "the next token is this token"). logits (B, T, n) for inputs idx (B, T) and next
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
