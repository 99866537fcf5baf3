"""What a run does to its model outside the optimizer's step: `--untie_at`'s split of the shared matrix at its
iteration and pit's retraction after every step, carried with the gradient-source probe by `Instruments`, the one
object train.py's loop calls around each step."""

import contextlib

from lib.optimizers import untie_head
from lib.probes import GradSources


class Instruments:
    """What train.py's loop calls around each optimizer step, each piece optional: the gradient-source probe on the
    steps it logs or evaluates (metrics.csv's grad_in and grad_out), --untie_at's split, pit's retraction of its token
    memory onto orthonormal columns. The copy probe needs no attaching: the evaluation reads it from its logits."""

    def __init__(self, model, optimizer, scaler, cfg):
        self.model, self.optimizer = model, optimizer
        self.untie_iter = round(cfg['untie_at'] * cfg['max_iters']) if cfg['untie_at'] is not None else None
        self.grad_sources = GradSources(model, scaler) if cfg['grad_probe'] else None  # off: a speed run's
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
        self.probed = bool(probe and self.grad_sources)
        return self.grad_sources if self.probed else contextlib.nullcontext()

    def after_step(self):
        """After the optimizer's step: pit's retraction; (grad_in, grad_out) of a probed step, else None."""
        self.model.after_optimizer_step()
        return self.grad_sources.norms() if self.probed else None
