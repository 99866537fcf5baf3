"""
Sample text from a trained model.

    python sample.py                                   # from out/ckpt.pt
    python sample.py --out_dir=out-shakespeare-char --start="ROMEO:" --num_samples=5
    python sample.py --start=FILE:prompt.txt --temperature=0.8 --top_k=200

The checkpoint carries the tokenizer (characters or GPT-2 BPE), so no data folder is needed.
"""

import os

import torch

from common import (UserError, autocast_context, check_seed, out_of_memory_is_user_error, out_of_memory_reason,
                    parse_config, pick_device, pick_dtype, run_cli)
from model import GPT, GPTConfig
from prepare import get_codec
from train import load_checkpoint

DEFAULTS = dict(
    out_dir='out',
    start='\n',             # the prompt, or FILE:path to read it from a file
    num_samples=3,
    max_new_tokens=500,
    temperature=0.8,        # 1.0 samples the model's distribution, lower is more conservative, 0 is greedy
    top_k=200,              # keep only the top_k most likely tokens; 0 keeps all
    seed=1337,
    device='auto',
    dtype='auto',
)
SEPARATOR = '-' * 15


def read_prompt(start):
    if not start.startswith('FILE:'):
        return start
    path = start[len('FILE:'):]
    try:
        with open(path, encoding='utf-8') as f:
            return f.read()
    except FileNotFoundError:
        raise UserError(f"--start=FILE:{path}: no such file") from None
    except UnicodeDecodeError as e:
        raise UserError(f"--start=FILE:{path} is not UTF-8 text (bad byte at offset {e.start})") from None
    except OSError as e:
        raise UserError(f"--start=FILE:{path}: {e.strerror}") from None


def build_model(ckpt, path):
    """The model a checkpoint describes, with its weights. Settings that the weights (or this model.py) do not
    fit, from an edited checkpoint or another version, are a UserError naming the first misfit."""
    try:
        model = GPT(GPTConfig(**ckpt['model_args']))
        model.load_state_dict(ckpt['model'])
    except (TypeError, ValueError, RuntimeError) as e:
        if out_of_memory_reason(e):
            raise
        reason = ' '.join(str(e).split()).removeprefix('Error(s) in loading state_dict for GPT: ')
        reason = reason if len(reason) <= 200 else reason[:197] + '...'
        raise UserError(f"checkpoint {path} does not fit the model of this model.py ({reason}); it was edited or "
                        f"written by another version") from None
    return model


def generate_samples(cfg):
    """The samples as a list of strings, each the prompt followed by max_new_tokens new tokens."""
    for key in ('num_samples', 'max_new_tokens', 'top_k'):
        if cfg[key] < (1 if key == 'num_samples' else 0):
            raise UserError(f"--{key} must be {'positive' if key == 'num_samples' else 'zero or more'}, got {cfg[key]}")
    if not 0 <= cfg['temperature'] < float('inf'):  # nan fails this too
        raise UserError(f"--temperature must be a finite number, zero or more, got {cfg['temperature']}")
    check_seed(cfg['seed'])
    prompt = read_prompt(cfg['start'])
    if not prompt:
        raise UserError("--start is empty; give some text to continue, e.g. --start='\\n'")
    device = pick_device(cfg['device'])
    dtype = pick_dtype(cfg['dtype'], device)
    ckpt = load_checkpoint(os.path.join(cfg['out_dir'], 'ckpt.pt'), device)
    encode, decode = get_codec(ckpt['meta'])
    ids = encode(prompt)  # UserError naming characters the vocabulary lacks

    advice = (f"--num_samples={cfg['num_samples']}, --max_new_tokens={cfg['max_new_tokens']} on {device}; use "
              f"smaller values")
    with out_of_memory_is_user_error(advice):
        model = build_model(ckpt, os.path.join(cfg['out_dir'], 'ckpt.pt'))
        model.to(device).eval()
        torch.manual_seed(cfg['seed'])
        ctx = autocast_context(device, dtype)  # generate() already runs without gradients
        x = torch.tensor(ids, dtype=torch.long, device=device)[None, :].repeat(cfg['num_samples'], 1)  # (B, T)
        with ctx:
            out = model.generate(x, cfg['max_new_tokens'], temperature=cfg['temperature'],
                                 top_k=cfg['top_k'] or None)
    return [decode(row.tolist()) for row in out]


def main(argv):
    for text in generate_samples(parse_config(DEFAULTS, argv)):
        print(text)
        print(SEPARATOR)


if __name__ == '__main__':
    run_cli(main)
