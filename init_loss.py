"""
The initial-loss table: for one model shape, every tie mode with emb_scale off/on and
zero_init_residual off/on, the cross-entropy measured at initialisation next to the value
predicted by DESIGN.md equation (*), generalised below.

    python init_loss.py                                  # GPT-2 small shape, about a minute on 2 CPU cores
    python init_loss.py --vocab_size=65 --n_embd=384 --n_layer=6 --n_head=6
    python init_loss.py --json                           # one JSON object per row

The measurement: mean cross-entropy of the freshly initialised model (dropout 0) on batches
of uniformly random tokens, averaged over several seeds (each seed draws new weights and a
new batch). Uniform tokens make log n the loss of a perfect "know-nothing" model, and the
next token equals the current one only 1/n of the time, as in (*).
"""

import json
import math
import sys
import time

import torch

from common import (UserError, memory_shortfall, out_of_memory_is_user_error, parse_config, parse_modes, pick_device,
                    run_cli)
from model import GPT, GPTConfig, TIE_MODES, memory_floor

DEFAULTS = dict(
    vocab_size=50257, n_embd=768, n_layer=12, n_head=12,  # GPT-2 small
    block_size=64,          # context measured; short to keep the table near a minute on a CPU
    batch_size=2,           # sequences per seed
    seeds=3,                # weight draws averaged per row
    init_std=0.02,
    shuffle_groups=4,
    modes=','.join(TIE_MODES),
    device='cpu',
    json=False,
)


def predicted_initial_loss(cfg):
    """Equation (*) of DESIGN.md, generalised to what this model has at its input and head.

    Let t be the token embedding's std (init_std, or log(n)/d under small_init) and s the input
    scale (sqrt(d) with emb_scale, else 1). The final norm sees x = s*w_i + p_pos, p of std
    sigma = init_std, and returns h with |h| = sqrt(d) along x. Then
        self term   a = w_i . h  = d*t * s / sqrt(s^2 + (sigma/t)^2)
        other terms z_k = w_k . h ~ N(0, v),  v = d * (std of the head's rows)^2
    and, the target being almost never the input token,
        loss ~ log( e^a + (n - 1) e^(v/2) ).
    The remedies change a and v:
        untied, proj, bert   a = 0 (a cross term), v = d*sigma^2
        shuffle              a = 0 (S[w_i] . w_i pairs different coordinates)
        shufflenet           a scaled by (fixed points of the shuffle) / d
        logit_scale          h scaled by d^-1/2: a and v both shrink (a/sqrt(d), v/d)
    This assumes identity blocks (zero_init_residual); with GPT-2's init the branches add to x
    and the table shows how far the model departs from it.
    """
    n, d, sigma = cfg.vocab_size, cfg.n_embd, cfg.init_std
    t = math.log(n) / d if cfg.tie_mode == 'small_init' else sigma
    s = math.sqrt(d) if cfg.emb_scale else 1.0
    a = d * t * s / math.sqrt(s ** 2 + (sigma / t) ** 2)
    v = d * t ** 2
    if cfg.tie_mode in ('untied', 'proj', 'bert', 'shuffle'):
        a, v = 0.0, d * sigma ** 2
    elif cfg.tie_mode == 'shufflenet':
        g = cfg.shuffle_groups
        perm = torch.arange(d).view(g, d // g).t().flatten()
        a *= (perm == torch.arange(d)).sum().item() / d
    elif cfg.tie_mode == 'logit_scale':
        a, v = a / math.sqrt(d), v / d
    return float(torch.logaddexp(torch.tensor(a, dtype=torch.float64),
                                 torch.tensor(math.log(n - 1) + v / 2, dtype=torch.float64)))


@torch.inference_mode()
def measure_initial_losses(cfg, seeds, batch_size, device='cpu'):
    """Cross-entropy at init on uniformly random tokens, as {emb_scale: (mean, std over seeds)}.

    emb_scale only changes the forward pass, so both settings are measured on the same weights
    and batches (a paired comparison), and each seed costs one initialisation, not two. The
    model is built once and re-initialised per seed with init_weights(), the same code the
    constructor runs.
    """
    model = GPT(cfg).to(device).eval()
    losses = {False: [], True: []}
    for seed in range(seeds):
        torch.manual_seed(seed)
        model.init_weights()
        idx = torch.randint(cfg.vocab_size, (batch_size, cfg.block_size + 1), device=device)
        for emb_scale in losses:
            model.config.emb_scale = emb_scale
            _, loss = model(idx[:, :-1], targets=idx[:, 1:])
            losses[emb_scale].append(loss.item())
    model.config.emb_scale = cfg.emb_scale
    result = {}
    for emb_scale, values in losses.items():
        values = torch.tensor(values, dtype=torch.float64)
        result[emb_scale] = (values.mean().item(), values.std().item() if seeds > 1 else 0.0)
    return result


def memory_advice(args):
    return (f"--batch_size={args['batch_size']}, --block_size={args['block_size']}, --vocab_size={args['vocab_size']}, "
            f"--n_embd={args['n_embd']}, --n_layer={args['n_layer']}; use smaller values")


def check_memory(cfg, args):
    """Refuse a shape that cannot fit in the device at all, before allocating anything (see train.check_memory)."""
    short = memory_shortfall(memory_floor(cfg, args['batch_size'], 'float32', training=False), args['device'])
    if short:
        raise UserError(f"measuring needs {short}, with {memory_advice(args)}")


def main(argv):
    args = parse_config(DEFAULTS, argv)
    modes = parse_modes(args['modes'], 'modes', TIE_MODES)
    for key in ('seeds', 'batch_size'):
        if args[key] < 1:
            raise UserError(f"--{key} must be a positive integer, got {args[key]}")
    if args['vocab_size'] < 2:  # log(n - 1) in (*), and a loss that is 0 for any model
        raise UserError(f"--vocab_size must be at least 2, got {args['vocab_size']}")
    args['device'] = pick_device(args['device'])
    model_keys = ('vocab_size', 'n_embd', 'n_layer', 'n_head', 'block_size', 'init_std', 'shuffle_groups')
    log_n = math.log(args['vocab_size'])
    out = sys.stdout
    if not args['json']:
        print(f"initial loss at init: vocab {args['vocab_size']}, width {args['n_embd']}, "
              f"{args['n_layer']} layers, {args['n_head']} heads, sigma {args['init_std']}, "
              f"{args['seeds']} seeds x {args['batch_size']} x {args['block_size']} random tokens; "
              f"log n = {log_n:.3f}", file=out)
        print(f"{'tie_mode':<12} {'emb_scale':<9} {'residual':<9} {'measured':>15} {'predicted':>9} "
              f"{'meas/pred':>9} {'meas-log n':>10}", file=out)
    started = time.time()
    for zero_init_residual in (True, False):
        rows = {False: [], True: []}  # printed grouped by emb_scale, measured together per mode
        for mode in modes:
            try:
                cfg = GPTConfig(tie_mode=mode, zero_init_residual=zero_init_residual, dropout=0.0, bias=False,
                                **{k: args[k] for k in model_keys})
            except ValueError as e:
                raise UserError(str(e)) from None
            check_memory(cfg, args)
            with out_of_memory_is_user_error(lambda: memory_advice(args)):
                losses = measure_initial_losses(cfg, args['seeds'], args['batch_size'], args['device'])
            for emb_scale, (measured, spread) in losses.items():
                cfg.emb_scale = emb_scale
                rows[emb_scale].append((mode, measured, spread, predicted_initial_loss(cfg)))
        for emb_scale, mode_rows in rows.items():
            for mode, measured, spread, predicted in mode_rows:
                if args['json']:
                    print(json.dumps(dict(tie_mode=mode, emb_scale=emb_scale, zero_init_residual=zero_init_residual,
                                          vocab_size=args['vocab_size'], n_embd=args['n_embd'],
                                          n_layer=args['n_layer'], init_std=args['init_std'],
                                          measured=round(measured, 4), measured_std=round(spread, 4),
                                          predicted=round(predicted, 4), log_n=round(log_n, 4))), file=out, flush=True)
                else:
                    residual = 'zero' if zero_init_residual else 'gpt2'
                    print(f"{mode:<12} {str(emb_scale).lower():<9} {residual:<9} {measured:>8.3f} ± {spread:<5.3f}"
                          f" {predicted:>9.3f} {measured / predicted:>9.3f} {measured - log_n:>+10.3f}",
                          file=out, flush=True)
    if not args['json']:
        print(f"({time.time() - started:.0f} s; residual 'zero' = zero_init_residual, the premise of (*); "
              f"'gpt2' = GPT-2's init, where (*) is not expected to hold)", file=out)


if __name__ == '__main__':
    run_cli(main)
