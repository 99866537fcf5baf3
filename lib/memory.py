"""How much memory a step needs and how much the device has, checked before anything is allocated, and the one
line that a failed allocation becomes. No device code: prepare.py uses it and starts without torch."""

import contextlib
import os
import re
import types

from lib.command_line import UserError

_OUT_OF_MEMORY = re.compile(r"out of memory|can't allocate memory|not enough memory|CUBLAS_STATUS_ALLOC_FAILED", re.I)
_ASKED = re.compile(r"(?:tried to allocate|unable to allocate) (\d+(?:\.\d+)?)\.? ?(bytes|[KMGTP]i?B)\b", re.I)


def format_bytes(n):
    """1536 -> '1.5 KiB'; binary units, as the allocators' own messages use."""
    if n < 1024:
        return f"{n:.0f} bytes"
    for unit in ("KiB", "MiB", "GiB", "TiB", "PiB"):
        n /= 1024
        if n < 1024 or unit == "PiB":
            return f"{n:.1f} {unit}"


def out_of_memory_reason(e):
    """A few words on e if it is a failed allocation ('could not allocate 72.8 TiB'), else None: torch's
    OutOfMemoryError (CUDA), the RuntimeError of its CPU, MPS and cuBLAS allocators, and Python's and numpy's
    MemoryError."""
    text = str(e)
    if not (isinstance(e, MemoryError) or type(e).__name__ == "OutOfMemoryError"
            or (isinstance(e, RuntimeError) and _OUT_OF_MEMORY.search(text))):
        return None
    if not (asked := _ASKED.search(text)):
        return "an allocation failed"
    amount, unit = asked.groups()
    return f"could not allocate {format_bytes(float(amount)) if unit.lower() == 'bytes' else amount + ' ' + unit}"


@contextlib.contextmanager
def out_of_memory_is_user_error(advice=None, message=None):
    """Inside the block, a failed allocation becomes a UserError, 'out of memory (REASON); ADVICE' (advice: the
    options to lower, or a function called only then to word them), or message(REASON); anything else passes."""
    try:
        yield
    except Exception as e:
        reason = out_of_memory_reason(e)
        if reason is None:
            raise
        if message is not None:
            raise UserError(message(reason)) from None
        raise UserError(f"out of memory ({reason}); {advice() if callable(advice) else advice}") from None


def device_memory(device):
    """All the memory a device has, in bytes: a GPU's total, or RAM plus swap for the CPU (Linux; elsewhere
    RAM alone) and for MPS, whose memory is the host's; None where unknown."""
    kind = device.split(":")[0]
    if kind == "cuda":
        import torch
        return torch.cuda.get_device_properties(device).total_memory
    if kind not in ("cpu", "mps"):
        return None
    try:
        with open("/proc/meminfo") as f:
            fields = dict(line.split(":", 1) for line in f)
        return sum(int(fields[key].split()[0]) * 1024 for key in ("MemTotal", "SwapTotal") if key in fields) or None
    except (OSError, ValueError):
        try:
            return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (AttributeError, ValueError, OSError):
            return None


# The most one process can map on x86-64 and arm64 Linux with 48-bit virtual addresses (128 TiB of user
# space): above it no allocator can say yes, whatever the machine, so sizes are checked against it too.
# Below it the answer is the machine's: a Linux that overcommits (vm.overcommit_memory=1, usual on GPU
# servers) grants any such request and lets the kernel's OOM killer end the process once the pages are
# touched, so the estimates below, not the allocator, are what refuse a size, before anything is allocated.
ADDRESS_SPACE = 2 ** 47


def memory_limit(device):
    """(bytes, words): what a size on this device is checked against, and how a message names it."""
    if (total := device_memory(device)) is None or total > ADDRESS_SPACE:
        return ADDRESS_SPACE, f"the {format_bytes(ADDRESS_SPACE)} one process can address"
    kind = 'memory' if device.startswith('cuda') else 'RAM and swap'
    return total, f"the {format_bytes(total)} of {kind} on {device}"


def memory_shortfall(need, device):
    """If need (bytes; a lower bound such as memory_floor below) is more than memory_limit, words for it:
    'at least 25.4 GiB, more than the 23.5 GiB of RAM and swap on cpu'; None if it fits. A step that fails
    this cannot run at all, so a script can say so before it allocates or writes anything."""
    limit, words = memory_limit(device)
    return None if need <= limit else f"at least {format_bytes(need)}, more than {words}"


def largest_that_fits(need, device, given):
    """The largest value v from 0 to given with need(v) within memory_limit (need: bytes as a function of one
    size, growing with it), for a message that says what is allowed; 0 if not even 0 fits."""
    limit = memory_limit(device)[0]
    low, high = 0, given  # the answer lies between them; where not even 0 fits, every middle fails and low stays 0
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if need(middle) <= limit else (low, middle - 1)
    return low


def matrix_params(config):
    """The parameters in the big matrices: 12 d^2 per layer, the embeddings, the head if untied."""
    L, d, n, T = config.n_layer, config.n_embd, config.vocab_size, config.block_size
    return 12 * L * d * d + n * d * (2 if config.tie_mode == 'untied' else 1) + T * d


def memory_floor(config, batch_size, dtype, training=True):
    """A lower bound, in bytes, on the memory one step of this model needs on batch_size sequences of block_size tokens;
    dtype is the compute dtype ('float32', or 'bfloat16'/'float16' under autocast). Only what must exist at once is
    counted, at its smallest size, so a device with less memory in all cannot run the step, whatever the kernels:
      training: weights, gradients and AdamW's two moments (16 bytes a parameter, all fp32), plus per
        token each layer's MLP hidden layer (4d values, kept for the backward pass) and the logits;
      inference: the weights, and per token the larger of what one block holds (sampling_floor) and the
        logits with their fp32 log-probabilities (the blocks' activations are gone by then).
    The parameters counted are matrix_params'."""
    L, d, n = config.n_layer, config.n_embd, config.vocab_size
    value = 2 if dtype in ('bfloat16', 'float16') else 4
    tokens = batch_size * config.block_size
    if training:
        return 16 * matrix_params(config) + tokens * (4 * L * d + n) * value
    return 4 * matrix_params(config) + tokens * max(_block_bytes(d, value), n * (value + 4))


def _block_bytes(d, value):
    # Per token, inside a block without gradients: the residual stream (fp32 even under autocast, as the
    # embeddings are) and the MLP's 4d hidden layer, which exist together.
    return 4 * d + 4 * d * value


def sampling_floor(config, num_samples, prompt_tokens, new_tokens, dtype):
    """A lower bound, in bytes, on what sample.generate needs: the weights (fp32), the prompt batch and the
    whole output (int64, allocated before the first token), and at its last step, on a context of up to
    block_size tokens, the larger of one block's activations and the fp32 logits of the last position."""
    total = prompt_tokens + new_tokens
    context = min(max(total - 1, 1), config.block_size)  # the last step's, cropped as generate crops it
    value = 2 if dtype in ('bfloat16', 'float16') else 4
    step = max(context * _block_bytes(config.n_embd, value), 4 * config.vocab_size) if new_tokens else 0
    return 4 * matrix_params(config) + 8 * num_samples * (prompt_tokens + total) + num_samples * step


def batch_memory_advice(cfg):
    """What to change when a training step does not fit in memory, with the values now."""
    return (f"--batch_size={cfg['batch_size']}, --block_size={cfg['block_size']}, --gradient_accumulation_steps="
            f"{cfg['gradient_accumulation_steps']}; use a smaller --batch_size or --block_size (a larger "
            f"--gradient_accumulation_steps keeps the tokens per iteration at no extra memory)")


def allowed_sizes(need, device, config, sizes):
    """'at most --n_layer=3 or --n_embd=500 fits here, the other sizes as they are': for each key of sizes (key -> the
    value given), the largest positive value whose need(config) is within memory_limit; '' if no key has one."""
    allowed = []
    for key, given in sizes.items():  # need() of a copy of config with one size changed, unchecked: an estimate only
        most = largest_that_fits(lambda v: need(types.SimpleNamespace(**dict(vars(config), **{key: v}))), device, given)
        if key == 'n_embd':  # a width the heads divide
            most -= most % config.n_head
        if most >= 1:
            allowed.append(f"--{key}={most}")
    return f"at most {' or '.join(allowed)} fits here, the other sizes as they are" if allowed else ""


def check_memory(model_config, cfg, device, dtype):
    """Refuse, before anything is allocated or written, a run that cannot fit in the device at all (memory_floor, a
    lower bound on one step's memory, against memory_limit). Absurd sizes would otherwise fail at some allocation, or on
    Linux fill the machine until the kernel's OOM killer ends the process without a word. A run let through here may
    still run out of memory; the training loop then says so in one line too."""
    if short := memory_shortfall(memory_floor(model_config, 0, dtype), device):
        allowed = allowed_sizes(lambda c: memory_floor(c, 0, dtype), device, model_config,
                                dict(n_layer=cfg['n_layer'], n_embd=cfg['n_embd']))
        raise UserError(f"the model (n_layer={cfg['n_layer']}, n_embd={cfg['n_embd']}, vocab_size={cfg['vocab_size']}) "
                        f"needs {short}, for its weights, gradients and AdamW state alone; use a smaller --n_layer "
                        f"or --n_embd" + (f" ({allowed})" if allowed else ""))
    # A step's micro-batches are all drawn before its first forward (x and y, int64: 16 bytes a token), this
    # process's share of them under torchrun.
    ranks = int(os.environ.get('WORLD_SIZE', '1'))
    accum = max(1, cfg['gradient_accumulation_steps'] // ranks)
    need = lambda b, a=accum: memory_floor(model_config, b, dtype) + 16 * a * b * cfg['block_size']  # noqa: E731
    short = memory_shortfall(need(cfg['batch_size']), device)
    if short and accum > 1 and not memory_shortfall(need(cfg['batch_size'], 1), device):
        most = largest_that_fits(lambda a: need(cfg['batch_size'], a), device, accum) * ranks
        raise UserError(f"a training step needs {short}, with --gradient_accumulation_steps="
                        f"{cfg['gradient_accumulation_steps']}, whose micro-batches of --batch_size="
                        f"{cfg['batch_size']} x --block_size={cfg['block_size']} tokens are drawn before its first "
                        f"forward; at most --gradient_accumulation_steps={most} fits here")
    if short:
        most = largest_that_fits(need, device, cfg['batch_size'])
        allowed = (f"at most --batch_size={most} fits here at --block_size={cfg['block_size']}" if most else
                   f"not even --batch_size=1 fits here at --block_size={cfg['block_size']}")
        raise UserError(f"a training step needs {short}, with {batch_memory_advice(cfg)}; {allowed}")
