"""The GPT-2-small verdict's plan (config/gpt2_small_verdict.py): its runs, tokens and arithmetic, and the hours,
disk and memory it takes on this machine's GPUs and on one and on eight H100s, from a measured speed:

    python lab/gpt2_small_plan.py [--gpus=G] [--tokens_per_s=T] [--corpus_tokens=N]

G: the GPUs to count (default: those this machine shows); T: one run's training tokens a second on one of them
(default: H100_TOKENS_S, measured); N: the prepared corpus's training tokens, for the disk (default: OpenWebText's).
ablate.py trains one run a GPU, so G GPUs take ceil(runs / G) rounds of one run's time."""

import math
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

CONFIG = os.path.join(ROOT, 'config', 'gpt2_small_verdict.py')
RATES = os.path.join(ROOT, 'config', 'gpt2_small_rates.py')  # the rates stage: CONFIG shorter, more rates
# One H100 80GB, this project at GPT-2 small compiled (bf16, context 1024, head padded): 39.31 ms for 16 x 1024
# tokens, 417k tokens a second (docs/performance.md, "On a GPU", docs/measure_gpu.sh of 2026-11-26).
H100_TOKENS_S = 417_000
OPENWEBTEXT_TOKENS = 9_035_582_198  # train.bin of OpenWebText by NanoGPT's data/openwebtext/prepare.py (its comment)
EVAL_SHARE = 0.02                   # evaluations and the whole-split scoring: about this share of a run's time


def plan(gpus=None, tokens_per_s=H100_TOKENS_S, corpus_tokens=OPENWEBTEXT_TOKENS):
    import torch
    import ablate
    from lab.experiment7_tables import build
    from lib.memory import format_bytes, memory_floor
    from lib.throughput import flops_per_token
    cfg = ablate.parse_args([CONFIG])
    runs = len(cfg['modes'].split(',')) * cfg['seeds']
    tokens = cfg['max_iters'] * cfg['batch_size'] * cfg['block_size'] * cfg['gradient_accumulation_steps']
    gpt = build(cfg, 'tied', 50257)
    run_hours = tokens / tokens_per_s * (1 + EVAL_SHARE) / 3600
    here = torch.cuda.device_count() if gpus is None else gpus
    lines = [f"{runs} runs ({cfg['modes']}, {cfg['seeds']} seeds), {tokens:,} tokens each "
             f"({tokens / gpt.num_params():.1f} a parameter; {gpt.num_params():,} parameters tied), "
             f"{tokens * flops_per_token(gpt, cfg['block_size']) / 1e18:.1f} EFLOP a run",
             f"one run at {tokens_per_s:,.0f} tokens/s: {run_hours:.1f} h"]
    for label, count in ((f"this machine's {here} GPU(s)", here), ('one H100', 1), ('eight H100s', 8)):
        if count:
            rounds = math.ceil(runs / count)
            lines.append(f"{label}: {rounds} round(s) of one run a GPU, {rounds * run_hours:.1f} h")
    floor = memory_floor(gpt.config, cfg['batch_size'], 'bfloat16')
    rates = ablate.parse_args([RATES])
    rate_runs = len(rates['modes'].split(',')) * rates['seeds']
    rate_hours = rate_runs * rates['max_iters'] / cfg['max_iters'] * run_hours
    lines.append(f"first, the rates stage: {rate_runs} runs of {rates['max_iters']} steps, {rate_hours:.1f} h on one "
                 f"H100, {math.ceil(rate_runs / 8) * rate_hours / rate_runs:.1f} h on eight")
    lines += [f"memory a GPU: at least {format_bytes(floor)} (weights, gradients, AdamW, a micro-batch's MLP "
              f"activations and logits; the rest of the activations come on top: 16 x 1024 tokens fit an 80 GB H100)",
              f"disk: the corpus's train.bin {format_bytes(2 * corpus_tokens)} (uint16), its .jsonl source about "
              f"twice that; a run's ckpt.pt and best.pt about {format_bytes(16 * gpt.num_params())}, "
              f"{format_bytes(runs * 16 * gpt.num_params())} for all"]
    return lines


def main(argv):
    from lib.command_line import UserError, parse_config
    args = parse_config(dict(gpus=-1, tokens_per_s=float(H100_TOKENS_S), corpus_tokens=OPENWEBTEXT_TOKENS), argv)
    if args['gpus'] < -1:  # -1: this machine's count; 0 plans this machine's share as none
        raise UserError(f"--gpus must be -1 (this machine's GPUs) or a count of GPUs, 0 or more, got {args['gpus']}")
    for key in ('tokens_per_s', 'corpus_tokens'):  # a divisor, or hours that cannot be negative
        if not 0 < args[key] < math.inf:
            raise UserError(f"--{key} must be a positive finite number, got {args[key]}")
    print(*plan(None if args['gpus'] < 0 else args['gpus'], args['tokens_per_s'], args['corpus_tokens']), sep='\n')


if __name__ == '__main__':
    from lib.command_line import run_cli
    run_cli(main)
