"""Which evaluation batches a run was scored on. train.estimate_loss draws them from a generator of their own,
seeded with --eval_seed and never the training one, so an evaluation does not move the data order. The seed is
the same for every --seed and tie mode (the default: 11337, the batches that a run with the default seed always
used), so that the runs of an ablation, whatever their seed, are scored on the same tokens and their best points
compare. Runs made before eval_seed existed drew them with seed + EVAL_SEED_OFFSET, each seed its own.
"""

EVAL_SEED_OFFSET = 10_000  # how runs made before --eval_seed seeded their evaluation batches: seed + this


def recorded_eval_seed(saved_cfg):
    """The eval_seed a run was made with, from its recorded config; a run older than the key used seed + offset."""
    return saved_cfg['eval_seed'] if 'eval_seed' in saved_cfg else saved_cfg['seed'] + EVAL_SEED_OFFSET
