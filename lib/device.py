"""The device a run computes on and the process around it: device and dtype choice, autocast, compile and
vocabulary padding, the DDP process group under torchrun, and Ctrl-C's save-then-stop."""

import contextlib
import os
import signal
import sys
import threading
from contextlib import contextmanager

import torch

from lib.command_line import UserError, put_back

def pick_device(device):
    """'auto' picks the best available device; an explicit one is checked, then passed through."""
    mps_available = hasattr(torch.backends, "mps") and torch.backends.mps.is_available()
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "mps" if mps_available else "cpu"
    kind = None
    with contextlib.suppress(RuntimeError):  # not a device at all
        kind = torch.device(device).type
    if kind not in ("cpu", "cuda", "mps"):  # torch parses xpu, meta, lazy, ...: no model here runs on them
        raise UserError(f"--device={device!r} is not a device this project runs on; use auto, cpu, cuda, cuda:N or mps")
    if kind == "cuda":
        if not torch.cuda.is_available():
            raise UserError(f"--device={device} but CUDA is not available here "
                            f"(torch {torch.__version__}); use --device=cpu or --device=auto")
        if (index := torch.device(device).index) is not None and index >= torch.cuda.device_count():
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
    """True where torch's CPU matmuls (oneDNN) multiply bf16 in hardware: x86 avx512_bf16 or AMX. There a bf16 matmul
    runs 2-3x as fast as fp32 (bench.py measures both peaks); elsewhere oneDNN emulates bf16 about 15x slower than
    native, slower than fp32, so --dtype=auto keeps float32. The answer follows what torch reports, not /proc/cpuinfo:
    oneDNN may be capped below the CPU's own level (ONEDNN_MAX_CPU_ISA=AVX2, as `ATEN_CPU_CAPABILITY=avx2` tests do),
    and then the cpuinfo flags are still there but the matmuls no longer use them."""
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
    return (contextlib.nullcontext() if dtype == "float32" else
            torch.autocast(device.split(":")[0], dtype=getattr(torch, dtype)))


def pick_compile(compile, device):
    """'auto' turns torch.compile on for CUDA only: on CPUs it measured no faster
    (docs/performance.md, "torch.compile across a grid")."""
    return compile == "true" or (compile == "auto" and device.split(":")[0] == "cuda")


def pick_pad_vocab(pad_vocab, device):
    """--pad_vocab as model.GPTConfig's pad_vocab_to: 64 (NanoGPT's multiple) or 1. 'auto' pads on CUDA only: an
    H100 ran GPT-2 small 8 % faster with 50,304 rows than with 50,257; on a CPU bench.py measured it 2-11 %
    slower (the copy of W is not repaid), so it stays off there (docs/performance.md, "A padded vocabulary")."""
    return 64 if pad_vocab == "true" or (pad_vocab == "auto" and device.split(":")[0] == "cuda") else 1


class Process:
    """Where this process trains: its device, its dtype and compile settings, and, under torchrun, its DDP rank and
    a gloo group beside the training's (on the CPU: agreeing on a stop waits for no GPU)."""
    ddp, rank, local_rank, world_size, cpu_group = False, 0, 0, 1, None

    @property
    def master(self):  # rank 0 alone evaluates, logs and writes the run's files
        return self.rank == 0


@contextmanager
def process_group(cfg):
    """Set up the process (under torchrun: join the DDP group, one GPU per rank) and tear it down. The device's
    settings for this run: its dtype (train.py builds the autocast that applies it), whether to compile, the padding
    of the head's matmul, and TF32 matmuls on CUDA (float32 weights, 10-bit mantissa products)."""
    proc = Process()
    proc.ddp = int(os.environ.get('RANK', -1)) != -1
    with contextlib.ExitStack() as stack:
        proc.on_exit = stack.callback  # what the run holds until it ends (its out_dir's lock)
        if proc.ddp:
            from torch.distributed import destroy_process_group, init_process_group, new_group
            proc.rank, proc.local_rank = int(os.environ['RANK']), int(os.environ['LOCAL_RANK'])
            proc.world_size = int(os.environ['WORLD_SIZE'])
            proc.device = f'cuda:{proc.local_rank}' if torch.cuda.is_available() else 'cpu'
            if proc.device.startswith('cuda'):
                torch.cuda.set_device(proc.device)
            init_process_group(backend='nccl' if proc.device.startswith('cuda') else 'gloo')
            stack.callback(destroy_process_group)
            proc.cpu_group = new_group(backend='gloo')
        else:
            proc.device = pick_device(cfg['device'])
        proc.dtype = pick_dtype(cfg['dtype'], proc.device)
        proc.compile = pick_compile(cfg['compile'], proc.device)
        proc.pad_vocab_to = pick_pad_vocab(cfg['pad_vocab'], proc.device)
        if proc.device.startswith('cuda'):
            torch.backends.cuda.matmul.allow_tf32 = True
            torch.backends.cudnn.allow_tf32 = True
        if cfg['gradient_accumulation_steps'] % proc.world_size:
            raise UserError(f"--gradient_accumulation_steps={cfg['gradient_accumulation_steps']} must be divisible "
                            f"by the number of processes ({proc.world_size})")
        yield proc


class StopRequest:
    """Whether Ctrl-C asked the run to stop: true from the iteration that asks on. Under torchrun every rank asks
    each time (one all-reduce of a flag) and all get the same answer, so every rank stops at one iteration, wherever
    the signal landed, and none leaves rank 0 waiting in an all-reduce of gradients."""

    def __init__(self, proc):
        self.group, self.signalled, self.agreed = proc.cpu_group, False, False

    def __bool__(self):
        if self.group is None or self.agreed:
            return self.agreed or self.signalled
        import torch.distributed as dist
        flag = torch.tensor([int(self.signalled)])
        dist.all_reduce(flag, op=dist.ReduceOp.MAX, group=self.group)
        self.agreed = bool(flag.item())
        return self.agreed


@contextmanager
def ctrl_c_saves(proc, run):
    """Ctrl-C sets the StopRequest this yields: the loop finishes its iteration, saves, then stops. A second
    Ctrl-C stops at once, which still loses nothing saved: a checkpoint being written is only a temp file until it
    is complete. Under torchrun every rank handles it, and SIGTERM too, which torchrun sends its ranks after a
    Ctrl-C. Only the main thread may set a handler; elsewhere (or where SIGINT is ignored, as under nohup) Ctrl-C
    keeps its usual meaning and the last checkpoint is what remains."""
    stop = StopRequest(proc)
    signals = (signal.SIGINT, signal.SIGTERM) if proc.ddp else (signal.SIGINT,)

    def on_signal(signum, frame):
        stop.signalled = True
        # a second Ctrl-C stops at once; torchrun's SIGTERM stays a request to stop, so that rank 0 gets to save
        signal.signal(signal.SIGINT, previous[signal.SIGINT])
        if proc.master:  # os.write, not print: the handler may run in the middle of tqdm writing to sys.stderr
            os.write(2, b"\nCtrl-C: finishing this iteration, then saving a checkpoint; Ctrl-C again stops at once\n")
    handle = (threading.current_thread() is threading.main_thread()
              and signal.getsignal(signal.SIGINT) is not signal.SIG_IGN)
    previous = {number: signal.signal(number, on_signal) for number in signals} if handle else {}
    try:
        yield stop
    except KeyboardInterrupt as e:
        if e.args:  # the loop's own "interrupted at iteration ..." after its save
            raise
        if not proc.master:  # under torchrun, Ctrl-C reaches every rank; rank 0 saves
            raise KeyboardInterrupt(f"rank {proc.rank} stopped; rank 0 writes the checkpoints") from None
        raise KeyboardInterrupt(f"stopped at once; {run.kept()}") from None  # a second Ctrl-C, or no handler
    finally:
        for number, handler in previous.items():
            put_back(number, handler)
