"""The machine a run is on: device and dtype choice, memory (lower bounds, out-of-memory
messages), the process (DDP, Ctrl-C) and throughput. torch is imported lazily where a script
that never builds a model (prepare.py, --help) should start quickly."""

import contextlib
import os
import re
import signal
import statistics
import sys
import threading
import time
import types
from contextlib import contextmanager

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
    """A few words on e if it is a failed allocation ('could not allocate 72.8 TiB'), else None.
    Recognises torch.OutOfMemoryError (CUDA; torch.cuda.OutOfMemoryError is the same class), the
    RuntimeError of torch's CPU allocator ("DefaultCPUAllocator: can't allocate memory", or "not
    enough memory" on Windows), MPS ("MPS backend out of memory") and cuBLAS, and MemoryError
    (Python's, and numpy's "Unable to allocate")."""
    text = str(e)
    if not (isinstance(e, MemoryError) or type(e).__name__ == "OutOfMemoryError"
            or (isinstance(e, RuntimeError) and _OUT_OF_MEMORY.search(text))):
        return None
    asked = _ASKED.search(text)
    if not asked:
        return "an allocation failed"
    amount, unit = asked.groups()
    return f"could not allocate {format_bytes(float(amount)) if unit.lower() == 'bytes' else amount + ' ' + unit}"


@contextlib.contextmanager
def out_of_memory_is_user_error(advice=None, message=None):
    """Inside the block, a failed allocation (see out_of_memory_reason) becomes a UserError: 'out of
    memory (REASON); ADVICE'. advice: text naming the options to lower, or a function returning it
    (called only then); or message: a function of REASON that words the whole line. Anything else
    passes through untouched."""
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
    total = device_memory(device)
    if total is None or total > ADDRESS_SPACE:
        return ADDRESS_SPACE, f"the {format_bytes(ADDRESS_SPACE)} one process can address"
    kind = 'memory' if device.startswith('cuda') else 'RAM and swap'
    return total, f"the {format_bytes(total)} of {kind} on {device}"


def memory_shortfall(need, device):
    """If need (bytes; a lower bound such as memory_floor below) is more than memory_limit, words for it:
    'at least 25.4 GiB, more than the 23.5 GiB of RAM and swap on cpu'; None if it fits. A step that fails
    this cannot run at all, so a script can say so before it allocates or writes anything."""
    limit, words = memory_limit(device)
    if need <= limit:
        return None
    return f"at least {format_bytes(need)}, more than {words}"


def largest_that_fits(need, device, given):
    """The largest value v from 0 to given with need(v) within memory_limit (need: bytes as a function of one
    size, growing with it), for a message that says what is allowed; 0 if not even 0 fits."""
    limit = memory_limit(device)[0]
    low, high = 0, given  # the answer lies between them
    if need(0) > limit:
        return 0
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if need(middle) <= limit else (low, middle - 1)
    return low


def matrix_params(config):
    """The parameters in the big matrices: 12 d^2 per layer, the embeddings, the head if untied."""
    L, d, n, T = config.n_layer, config.n_embd, config.vocab_size, config.block_size
    return 12 * L * d * d + n * d * (2 if config.tie_mode == 'untied' else 1) + T * d


def memory_floor(config, batch_size, dtype, training=True):
    """A lower bound, in bytes, on the memory one step of this model needs on batch_size sequences of
    block_size tokens; dtype is the compute dtype ('float32', or 'bfloat16'/'float16' under autocast).
    Only what must exist at once is counted, at its smallest size, so a device with less memory in
    all cannot run the step, whatever the kernels:
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


def pick_device(device):
    """'auto' picks the best available device; an explicit one is checked, then passed through."""
    import torch
    mps_available = hasattr(torch.backends, "mps") and torch.backends.mps.is_available()
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "mps" if mps_available else "cpu"
    try:
        kind = torch.device(device).type
    except RuntimeError:
        raise UserError(f"--device={device!r} is not a device; use auto, cpu, cuda, cuda:N or mps") from None
    if kind == "cuda":
        if not torch.cuda.is_available():
            raise UserError(f"--device={device} but CUDA is not available here "
                            f"(torch {torch.__version__}); use --device=cpu or --device=auto")
        index = torch.device(device).index
        if index is not None and index >= torch.cuda.device_count():
            raise UserError(f"--device={device} but only {torch.cuda.device_count()} CUDA device(s) are visible")
    if kind == "mps" and not mps_available:
        raise UserError("--device=mps but MPS is not available here; use --device=cpu or --device=auto")
    return device


DTYPES = ("auto", "float32", "bfloat16", "float16")


# oneDNN's instruction-set levels in rising order, as ONEDNN_MAX_CPU_ISA names them; bf16
# dot products are native from AVX512_CORE_BF16 on (AMX above it).
_ONEDNN_ISAS = ('SSE41', 'AVX', 'AVX2', 'AVX2_VNNI', 'AVX2_VNNI_2', 'AVX512_CORE', 'AVX512_CORE_VNNI',
                'AVX512_CORE_BF16', 'AVX512_CORE_FP16', 'AVX512_CORE_AMX', 'AVX512_CORE_AMX_FP16')


def cpu_has_native_bf16():
    """True where torch's CPU matmuls (oneDNN) multiply bf16 in hardware: x86 avx512_bf16 or AMX.
    There a bf16 matmul runs 2-3x as fast as fp32 (bench.py measures both peaks); elsewhere
    oneDNN emulates bf16 about 15x slower than native, slower than fp32, so --dtype=auto keeps
    float32. The answer follows what torch reports, not /proc/cpuinfo: oneDNN may be capped below
    the CPU's own level (ONEDNN_MAX_CPU_ISA=AVX2, as `ATEN_CPU_CAPABILITY=avx2` tests do), and
    then the cpuinfo flags are still there but the matmuls no longer use them."""
    import torch
    try:
        onednn_bf16 = torch.ops.mkldnn._is_mkldnn_bf16_supported()    # False under an AVX2 cap
        hardware_bf16 = torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported()
    except (AttributeError, RuntimeError):  # a torch without these probes, or built without oneDNN
        return False
    cap = os.environ.get('ONEDNN_MAX_CPU_ISA', '').upper()
    # oneDNN still calls bf16 "supported" under an AVX512_CORE cap, but only by emulating it.
    capped_below = cap in _ONEDNN_ISAS and _ONEDNN_ISAS.index(cap) < _ONEDNN_ISAS.index('AVX512_CORE_BF16')
    return bool(onednn_bf16 and hardware_bf16 and not capped_below)


def pick_dtype(dtype, device, warn=True):
    """'auto' picks the fastest safe dtype for the device; an explicit one is checked against it.
    An explicit bfloat16 on a CPU that would only emulate it still runs, after a one-line warning
    on stderr (warn=False for callers that say so themselves)."""
    if dtype not in DTYPES:
        raise UserError(f"--dtype={dtype!r} is not allowed; choose one of: {', '.join(DTYPES)}")
    kind = device.split(":")[0]
    if kind == "cuda":
        import torch
        bf16_ok = torch.cuda.is_bf16_supported()
        if dtype == "auto":
            return "bfloat16" if bf16_ok else "float16"
        if dtype == "bfloat16" and not bf16_ok:
            raise UserError("--dtype=bfloat16 but this GPU does not support it; use --dtype=float16 or --dtype=auto")
        return dtype
    if kind != "cpu":
        return "float32" if dtype == "auto" else dtype
    if dtype == "auto":
        return "bfloat16" if cpu_has_native_bf16() else "float32"
    if dtype == "float16":
        raise UserError("--dtype=float16 is not supported on cpu; use --dtype=float32 or --dtype=bfloat16")
    if dtype == "bfloat16" and warn and not cpu_has_native_bf16():
        print("warning: --dtype=bfloat16 on a CPU without native bf16 (no avx512_bf16 or AMX in use): torch "
              "emulates it, many times slower than float32; --dtype=auto picks float32 here", file=sys.stderr)
    return dtype


def autocast_context(device, dtype):
    """Mixed precision for a dtype from pick_dtype: autocast for 16-bit types, nothing for float32."""
    import torch
    if dtype == "float32":
        return contextlib.nullcontext()
    return torch.autocast(device.split(":")[0], dtype=getattr(torch, dtype))


def pick_compile(compile, device):
    """'auto' turns torch.compile on for CUDA only: on CPUs it measured no faster
    (docs/performance.md, "torch.compile across a grid")."""
    return compile == "true" or (compile == "auto" and device.split(":")[0] == "cuda")


def pick_pad_vocab(pad_vocab, device):
    """--pad_vocab as model.GPTConfig's pad_vocab_to: 64 (NanoGPT's multiple) or 1. 'auto' pads on CUDA only: an
    H100 ran GPT-2 small 8 % faster with 50,304 rows than with 50,257; on a CPU bench.py measured it 2-11 %
    slower (the copy of W is not repaid), so it stays off there (docs/performance.md, "A padded vocabulary")."""
    on = pad_vocab == "true" or (pad_vocab == "auto" and device.split(":")[0] == "cuda")
    return 64 if on else 1


def batch_memory_advice(cfg):
    """What to change when a training step does not fit in memory, with the values now."""
    return (f"--batch_size={cfg['batch_size']}, --block_size={cfg['block_size']}, --gradient_accumulation_steps="
            f"{cfg['gradient_accumulation_steps']}; use a smaller --batch_size or --block_size (a larger "
            f"--gradient_accumulation_steps keeps the tokens per iteration at no extra memory)")


def allowed_sizes(need, device, config, sizes):
    """'at most --n_layer=3 or --n_embd=500 fits here, the other sizes as they are': for each key of sizes
    (key -> the value given), the largest positive value whose need(config) is within memory_limit; '' if no
    key has one."""
    allowed = []
    for key, given in sizes.items():  # need() of a copy of config with one size changed, unchecked: an estimate only
        most = largest_that_fits(lambda v: need(types.SimpleNamespace(**dict(vars(config), **{key: v}))), device, given)
        if key == 'n_embd':  # a width the heads divide
            most -= most % config.n_head
        if most >= 1:
            allowed.append(f"--{key}={most}")
    return f"at most {' or '.join(allowed)} fits here, the other sizes as they are" if allowed else ""


def check_memory(model_config, cfg, device, dtype):
    """Refuse, before anything is allocated or written, a run that cannot fit in the device at all
    (memory_floor, a lower bound on one step's memory, against memory_limit). Absurd sizes would
    otherwise fail at some allocation, or on Linux fill the machine until the kernel's OOM killer ends
    the process without a word. A run let through here may still run out of memory; the training loop
    then says so in one line too."""
    short = memory_shortfall(memory_floor(model_config, 0, dtype), device)
    if short:
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


class Process:
    """Where this process trains: its device, its dtype and compile settings, and, under torchrun, its DDP rank."""
    ddp, rank, local_rank, world_size = False, 0, 0, 1

    @property
    def master(self):  # rank 0 alone evaluates, logs and writes the run's files
        return self.rank == 0


@contextmanager
def process_group(cfg):
    """Set up the process (under torchrun: join the DDP group, one GPU per rank) and tear it down. The device's
    settings for this run: its dtype, the autocast context that applies it, whether to compile, the padding of
    the head's matmul, and TF32 matmuls on CUDA (float32 weights, 10-bit mantissa products)."""
    import torch
    proc = Process()
    proc.ddp = int(os.environ.get('RANK', -1)) != -1
    with contextlib.ExitStack() as stack:
        if proc.ddp:
            from torch.distributed import destroy_process_group, init_process_group
            proc.rank, proc.local_rank = int(os.environ['RANK']), int(os.environ['LOCAL_RANK'])
            proc.world_size = int(os.environ['WORLD_SIZE'])
            proc.device = f'cuda:{proc.local_rank}' if torch.cuda.is_available() else 'cpu'
            if proc.device.startswith('cuda'):
                torch.cuda.set_device(proc.device)
            init_process_group(backend='nccl' if proc.device.startswith('cuda') else 'gloo')
            stack.callback(destroy_process_group)
        else:
            proc.device = pick_device(cfg['device'])
        proc.dtype = pick_dtype(cfg['dtype'], proc.device)
        proc.autocast = autocast_context(proc.device, proc.dtype)
        proc.compile = pick_compile(cfg['compile'], proc.device)
        proc.pad_vocab_to = pick_pad_vocab(cfg['pad_vocab'], proc.device)
        if proc.device.startswith('cuda'):
            torch.backends.cuda.matmul.allow_tf32 = True
            torch.backends.cudnn.allow_tf32 = True
        if cfg['gradient_accumulation_steps'] % proc.world_size:
            raise UserError(f"--gradient_accumulation_steps={cfg['gradient_accumulation_steps']} must be divisible "
                            f"by the number of processes ({proc.world_size})")
        yield proc


@contextmanager
def ctrl_c_saves(proc, run):
    """Ctrl-C sets the flag this yields: the loop finishes its iteration, saves, then stops. A second
    Ctrl-C stops at once, which still loses nothing saved: a checkpoint being written is only a temp
    file until it is complete. Only the main thread may set a handler; elsewhere (or where SIGINT is
    ignored, as under nohup) Ctrl-C keeps its usual meaning and the last checkpoint is what remains."""
    interrupted = []
    def on_sigint(signum, frame):
        interrupted.append(True)
        signal.signal(signal.SIGINT, previous_handler)
        # os.write, not print: the handler may run in the middle of tqdm writing to sys.stderr.
        os.write(2, b"\nCtrl-C: finishing this iteration, then saving a checkpoint; Ctrl-C again stops at once\n")
    handle = (proc.master and threading.current_thread() is threading.main_thread()
              and signal.getsignal(signal.SIGINT) is not signal.SIG_IGN)
    previous_handler = signal.signal(signal.SIGINT, on_sigint) if handle else None
    try:
        yield interrupted
    except KeyboardInterrupt as e:
        if e.args:  # the loop's own "interrupted at iteration ..." after its save
            raise
        if not proc.master:  # under torchrun, Ctrl-C reaches every rank; rank 0 saves
            raise KeyboardInterrupt(f"rank {proc.rank} stopped; rank 0 writes the checkpoints") from None
        raise KeyboardInterrupt(f"stopped at once; {run.kept()}") from None  # a second Ctrl-C, or no handler
    finally:
        if handle:
            signal.signal(signal.SIGINT, previous_handler)


def flops_per_token(model, seq_len=None):
    """Training FLOPs per token (forward + backward = 3x forward), PaLM appendix B style: 6 per
    weight that takes part in a matmul plus the attention scores and mixing, 12*L*C*T.
    The head matmul counts once: the embedding lookup on the input side is free, so a tied
    matrix costs the same compute as an untied head."""
    from model import TIE_MODES  # here: prepare.py imports this module and must not wait for torch
    cfg = model.config
    T = seq_len or cfg.block_size
    matmul_weights = sum(p.numel() for name, p in model.blocks.named_parameters()
                         if name.endswith('weight') and p.dim() == 2)
    matmul_weights += cfg.vocab_size * cfg.n_embd                       # the head
    matmul_weights += TIE_MODES[cfg.tie_mode].square_matmuls * cfg.n_embd ** 2  # proj's P, bert's dense
    return 6 * matmul_weights + 12 * cfg.n_layer * cfg.n_embd * T


class Throughput:
    """Tokens per second over logging windows, with evaluation time paused out of them, and the
    MFU they mean on a GPU whose datasheet peak is known."""

    def __init__(self, flops_per_token=None, device='cpu', dtype='float32'):
        self.started = time.time()
        self.window_start, self.window_tokens, self.rates = time.perf_counter(), 0, []
        self.last = 0.0
        self.flops_per_token = flops_per_token
        self.peak = gpu_peak_flops(device, dtype) if device.startswith('cuda') else None

    def elapsed(self):
        return time.time() - self.started

    @contextmanager
    def paused(self):
        paused_at = time.perf_counter()
        yield
        self.window_start += time.perf_counter() - paused_at

    def add(self, tokens):
        self.window_tokens += tokens

    def tick(self):
        """Close the window: its tokens/s, also kept for the run's median."""
        now = time.perf_counter()
        self.last = self.window_tokens / max(now - self.window_start, 1e-9)
        self.rates.append(self.last)
        self.window_start, self.window_tokens = now, 0
        return self.last

    def median(self):
        return statistics.median(self.rates) if self.rates else 0.0

    def postfix(self, val=None, **shown):
        """What the progress bar shows after the last window: the given values, tokens/s, the
        latest validation loss (if any) and the MFU (on a known GPU)."""
        shown['tok_s'] = f"{self.last:,.0f}"
        if val is not None:
            shown['val'] = f"{val:.4f}"
        if self.peak and self.flops_per_token:
            shown['mfu'] = f"{100 * self.flops_per_token * self.last / self.peak:.1f}%"
        return shown


# Dense bf16/fp16 tensor-core peaks from NVIDIA's datasheets, FLOP/s, for MFU.
GPU_PEAK_FLOPS = {'H200': 989e12, 'H100': 989e12, 'A100': 312e12, 'L40S': 362e12, 'L4': 121e12,
                  'A10G': 125e12, 'RTX 4090': 165e12, 'RTX 3090': 71e12, 'V100': 125e12, 'T4': 65e12}


def gpu_peak_flops(device, dtype):
    """The datasheet peak of a known GPU in 16-bit (None if unknown); fp32 runs at TF32 at best."""
    import torch
    name = torch.cuda.get_device_name(device)
    for key, flops in GPU_PEAK_FLOPS.items():
        if key in name:
            return flops if dtype in ('bfloat16', 'float16') else flops / 2
    return None
