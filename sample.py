"""
Sample text from a trained model.

    python sample.py                                   # from out/ckpt.pt
    python sample.py --out_dir=out-shakespeare-char --start="ROMEO:" --num_samples=5
    python sample.py --start=FILE:prompt.txt --temperature=0.8 --top_k=200
    python sample.py --init_from=gpt2 --start="To be, or not to be"   # pretrained GPT-2 (transformers)

The checkpoint carries the tokenizer (characters or GPT-2 BPE), so no data folder is needed.
"""

import os
import stat

import torch
from torch.nn import functional as F

from lib.command_line import UserError, check_seed, parse_config, run_cli
from lib.hf_gpt2 import from_pretrained, pretrained_args, pretrained_meta
from lib.device import autocast_context, pick_device, pick_dtype
from lib.memory import format_bytes, largest_that_fits, memory_shortfall, out_of_memory_is_user_error, sampling_floor
from lib.run_files import load_checkpoint, model_from_checkpoint
from lib.prepared_data import get_codec
from model import GPTConfig

DEFAULTS = dict(
    init_from='resume',     # 'resume' (out_dir/ckpt.pt), or GPT-2: gpt2, gpt2-medium, gpt2-large, gpt2-xl, a folder
    out_dir='out',          # the run whose ckpt.pt samples (with init_from=resume)
    start='\n',             # the prompt, or FILE:path to read it from a file
    num_samples=3,          # samples printed, one after another
    max_new_tokens=500,     # tokens generated per sample
    temperature=0.8,        # 1.0 samples the model's distribution, lower is more conservative, 0 is greedy
    top_k=200,              # keep only the top_k most likely tokens; 0 keeps all
    seed=1337,              # the sampling's random draws
    device='auto',          # auto: cuda, then mps, then cpu
    dtype='auto',           # auto: as train.py picks it (bfloat16 where it is native, else float32)
)
SEPARATOR = '-' * 15


def generate_samples(cfg):
    """The samples as a list of strings, each the prompt followed by max_new_tokens new tokens."""
    prompt = checked_prompt(cfg)  # every setting checked first: a mistake is one line
    device = pick_device(cfg['device'])
    dtype = pick_dtype(cfg['dtype'], device)
    ckpt = None
    if cfg['init_from'] == 'resume':
        ckpt = load_checkpoint(os.path.join(cfg['out_dir'], 'ckpt.pt'), device)
        meta = ckpt['meta']
    else:
        if cfg['out_dir'] != DEFAULTS['out_dir']:  # it would be ignored: the user asked for two models
            raise UserError(f"--out_dir={cfg['out_dir']} names a run's checkpoint, but --init_from={cfg['init_from']} "
                            f"samples that model instead; drop one of the two")
        pretrained_args(cfg['init_from'])  # no GPT-2 by that name or in that folder: one line, before any note
        meta = pretrained_meta(cfg['init_from'])  # GPT-2's BPE, or the meta.json export.py wrote
    encode, decode = get_codec(meta)
    ids = encode(prompt)  # UserError naming characters the vocabulary lacks
    if (shape := model_shape(ckpt, cfg['init_from'])) is not None:
        check_memory(cfg, shape, len(ids), device, dtype)

    with out_of_memory_is_user_error(f"--num_samples={cfg['num_samples']}, --max_new_tokens={cfg['max_new_tokens']} "
                                     f"on {device}; use smaller values"):
        if cfg['init_from'] == 'resume':
            model = model_from_checkpoint(ckpt, os.path.join(cfg['out_dir'], 'ckpt.pt'))
        else:
            model = from_pretrained(cfg['init_from'])  # a hub name or a transformers folder
        model.to(device).eval()
        torch.manual_seed(cfg['seed'])
        x = torch.tensor(ids, dtype=torch.long, device=device)[None, :].repeat(cfg['num_samples'], 1)  # (B, T)
        with autocast_context(device, dtype):  # generate() already runs without gradients
            out = generate(model, x, cfg['max_new_tokens'], temperature=cfg['temperature'], top_k=cfg['top_k'] or None)
    return [decode(row.tolist()) for row in out]


@torch.no_grad()
def generate(model, idx, max_new_tokens, temperature=1.0, top_k=None):
    """Extend idx (B, T) by max_new_tokens tokens sampled from the model, one at a time, cropping the context to block_size.
    temperature=0 picks the most likely token; top_k None or 0 keeps every token (as sample.py's 0)."""
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 0):
        raise ValueError(f"top_k must be a positive integer, or 0 or None to keep every token, got {top_k!r}")
    B, T = idx.size()
    # The whole output at once: a length that cannot fit fails here, not hours into the loop.
    out = torch.empty((B, T + max_new_tokens), dtype=idx.dtype, device=idx.device)
    out[:, :T] = idx
    for t in range(T, T + max_new_tokens):
        logits, _ = model(out[:, max(0, t - model.config.block_size):t], last_only=True)
        logits = logits[:, -1, :].float()                          # (B, vocab_size)
        if temperature <= 0:
            idx_next = logits.argmax(dim=-1, keepdim=True)
        else:
            # Shifted so the largest logit is 0 before dividing: a tiny temperature then gives -inf
            # (probability 0) for the rest instead of inf - inf = nan in the softmax.
            logits = (logits - logits.max(dim=-1, keepdim=True).values) / temperature
            if top_k:  # None or 0: every token
                v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
                logits[logits < v[:, [-1]]] = -float('inf')
            idx_next = torch.multinomial(F.softmax(logits, dim=-1), num_samples=1)  # (B, 1)
        out[:, t] = idx_next[:, 0]
    return out


def main(argv):
    for text in generate_samples(parse_config(DEFAULTS, argv)):
        print(text)
        print(SEPARATOR)


# ---------------------------------------------------------------- the checks behind generate_samples: the prompt,
# the model's shape, the memory sampling needs

def checked_prompt(cfg):
    """The prompt to continue (--start, or the text of its FILE:path), once every setting is checked."""
    for key in ('num_samples', 'max_new_tokens', 'top_k'):
        if cfg[key] < (1 if key == 'num_samples' else 0):
            raise UserError(f"--{key} must be {'positive' if key == 'num_samples' else 'zero or more'}, got {cfg[key]}")
    if not 0 <= cfg['temperature'] < float('inf'):  # nan fails this too
        raise UserError(f"--temperature must be a finite number, zero or more, got {cfg['temperature']}")
    check_seed(cfg['seed'])
    if (prompt := cfg['start']).startswith('FILE:'):
        path = prompt[len('FILE:'):]
        if os.path.exists(path) and (stat.S_ISCHR(os.stat(path).st_mode) or stat.S_ISBLK(os.stat(path).st_mode)):
            raise UserError(f"--start=FILE:{path} is a device, which never ends; give a text file")  # /dev/zero
        # Its bytes and its text exist together while it is read (a quarter of a byte a byte at least): refused
        # before, where the machine cannot hold them.
        if short := memory_shortfall(os.path.getsize(path) * 5 // 4, 'cpu') if os.path.isfile(path) else None:
            raise UserError(f"--start=FILE:{path} has {format_bytes(os.path.getsize(path))}; reading it needs "
                            f"{short}; use a shorter prompt")
        try:
            with open(path, encoding='utf-8') as f:
                prompt = f.read()
        except FileNotFoundError:
            raise UserError(f"--start=FILE:{path}: no such file") from None
        except UnicodeDecodeError as e:
            raise UserError(f"--start=FILE:{path} is not UTF-8 text (bad byte at offset {e.start})") from None
        except OSError as e:
            raise UserError(f"--start=FILE:{path}: {e.strerror}") from None
    if not prompt:
        raise UserError("--start is empty; give some text to continue, e.g. --start='\\n'")
    return prompt


def model_shape(ckpt, init_from):
    """The GPTConfig that sampling will build, read without building it; None where the checkpoint's settings
    make no model (model_from_checkpoint then says what does not fit)."""
    if ckpt is None:
        args = pretrained_args(init_from)  # tie_mode as the weights were trained
    else:
        args = dict(ckpt['model_args'], **({'tie_mode': 'untied'} if ckpt.get('head_untied') else {}))
    try:
        return GPTConfig(**args)
    except (TypeError, ValueError):
        return None


def check_memory(cfg, shape, prompt_tokens, device, dtype):
    """Refuse sizes whose sampling cannot fit (lib.memory.sampling_floor) before the model is built or the
    output allocated: an allocator that overcommits would grant the output and the kernel would kill the
    process as it filled it."""
    def need(num_samples=cfg['num_samples'], max_new_tokens=cfg['max_new_tokens']):
        return sampling_floor(shape, num_samples, prompt_tokens, max_new_tokens, dtype)
    if short := memory_shortfall(need(0, 0), device):  # an edited checkpoint, or a pretrained folder's config.json
        raise UserError(f"the model to sample (n_layer={shape.n_layer}, n_embd={shape.n_embd}, vocab_size="
                        f"{shape.vocab_size}) needs {short} for its weights alone; sample it on a machine with more "
                        f"memory")
    if not (short := memory_shortfall(need(), device)):
        return
    allowed = [f"--{key}={most}" for key in ('num_samples', 'max_new_tokens')
               if (most := largest_that_fits(lambda v: need(**{key: v}), device, cfg[key])) >= 1]
    allowed = (f"at most {' or '.join(allowed)} fits here, the other as it is" if allowed else
               "not even one sample of one token fits here with this prompt; use a shorter one")
    raise UserError(f"sampling needs {short}, with --num_samples={cfg['num_samples']}, --max_new_tokens="
                    f"{cfg['max_new_tokens']} and a prompt of {prompt_tokens} token(s) on {device}; {allowed}")


if __name__ == '__main__':
    run_cli(main)
