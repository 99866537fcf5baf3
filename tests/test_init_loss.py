"""init_loss.py: the measurement itself."""

from init_loss import measure_initial_losses
from model import GPTConfig


def tied_config(shape, **overrides):
    return GPTConfig(**{**shape, 'block_size': 64, 'tie_mode': 'tied', 'bias': False, 'dropout': 0.0,
                        'zero_init_residual': True, **overrides})


def test_measuring_leaves_the_callers_config_as_it_was():
    # The measurement flips emb_scale on the model's config, which is the caller's object.
    cfg = tied_config(dict(vocab_size=65, n_embd=32, n_layer=1, n_head=2), emb_scale=False)
    measure_initial_losses(cfg, seeds=1, batch_size=1)
    assert cfg.emb_scale is False
