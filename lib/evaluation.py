"""A run's evaluation: the mean loss of each split over the same eval_iters batches every time, and
the copy probe on the validation ones.

The batches come from a generator of their own, seeded with --eval_seed and never the training one,
so an evaluation does not move the data order. The seed is the same for every --seed and tie mode
(the default: 11337, the batches that a run with the default seed always used), so that the runs of
an ablation, whatever their seed, are scored on the same tokens and their best points compare.
Runs made before eval_seed existed drew them with seed + EVAL_SEED_OFFSET, each seed its own.
"""

import torch

from lib.prepared_data import get_batch
from lib.probes import copy_probe


EVAL_SEED_OFFSET = 10_000  # how runs made before --eval_seed seeded their evaluation batches: seed + this


def recorded_eval_seed(saved_cfg):
    """The eval_seed a run was made with, from its recorded config; a run older than the key used seed + offset."""
    return saved_cfg['eval_seed'] if 'eval_seed' in saved_cfg else saved_cfg['seed'] + EVAL_SEED_OFFSET


@torch.no_grad()
def estimate_loss(model, splits, cfg, ctx, device):
    """({split: mean loss}, {copy_prob, repeat_rate, self_margin} on the validation batches) over the same
    cfg['eval_iters'] batches of each split every time; the probe (lib/probes.copy_probe) reads the logits the
    loss needs anyway."""
    model.eval()
    losses, probe = {}, dict(copy_prob=0.0, repeat_rate=0.0, self_margin=0.0)
    for split, tokens in splits.items():
        generator = torch.Generator().manual_seed(cfg['eval_seed'])
        total = 0.0
        for _ in range(cfg['eval_iters']):
            x, y, _ = get_batch(tokens, cfg['batch_size'], cfg['block_size'], generator)
            x, y = x.to(device), y.to(device)
            with ctx:
                logits, loss = model(x, y)
            total += loss.item()
            if split == 'val':
                for key, value in copy_probe(logits, x, y).items():
                    probe[key] += value / cfg['eval_iters']
        losses[split] = total / cfg['eval_iters']
    model.train()
    return losses, probe
