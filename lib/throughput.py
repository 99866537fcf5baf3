"""How fast a run goes: training FLOPs per token, tokens per second over logging windows, and the MFU they
mean on a GPU whose datasheet peak is known."""

import statistics
import time
from contextlib import contextmanager

import torch

from model import TIE_MODES

def flops_per_token(model, seq_len=None):
    """Training FLOPs per token (forward + backward = 3x forward), PaLM appendix B style: 6 per weight that takes part
    in a matmul plus the attention scores and mixing, 12*L*C*T. The head matmul counts once: the embedding lookup on the
    input side is free, so a tied matrix costs the same compute as an untied head."""
    cfg = model.config
    T = seq_len or cfg.block_size
    matmul_weights = sum(p.numel() for p in model.blocks.parameters() if p.dim() == 2)  # the blocks' matrices
    matmul_weights += cfg.vocab_size * cfg.n_embd                       # the head
    matmul_weights += TIE_MODES[cfg.tie_mode].square_matmuls * cfg.n_embd ** 2  # proj's P, bert's dense
    return 6 * matmul_weights + 12 * cfg.n_layer * cfg.n_embd * T


class Throughput:
    """Tokens per second over logging windows, evaluation time paused out of them, and their MFU on a known GPU."""

    def __init__(self, model=None, block_size=None, device='cpu', dtype='float32'):
        self.started = time.time()
        self.window_start, self.window_tokens, self.rates, self.last = time.perf_counter(), 0, [], 0.0
        self.flops_per_token = flops_per_token(model, block_size) if model is not None else None
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

    def postfix(self, val=None, copy=None, **shown):
        """What the progress bar shows after the last window: the given values, tokens/s, the latest validation
        loss and the copy probe's share (if any), and the MFU (on a known GPU)."""
        shown['tok_s'] = f"{self.last:,.0f}"
        if val is not None:
            shown['val'] = f"{val:.4f}"
        if copy is not None:
            shown['copy'] = f"{100 * copy:.0f}%"
        if self.peak and self.flops_per_token:
            shown['mfu'] = f"{100 * self.flops_per_token * self.last / self.peak:.1f}%"
        return shown


# Dense bf16/fp16 tensor-core peaks from NVIDIA's datasheets, FLOP/s, for MFU.
GPU_PEAK_FLOPS = {'H200': 989e12, 'H100': 989e12, 'A100': 312e12, 'L40S': 362e12, 'L4': 121e12,
                  'A10G': 125e12, 'RTX 4090': 165e12, 'RTX 3090': 71e12, 'V100': 125e12, 'T4': 65e12}


def gpu_peak_flops(device, dtype):
    """The datasheet peak of a known GPU in 16-bit (None if unknown); fp32 runs at TF32 at best."""
    name = torch.cuda.get_device_name(device)
    for key, flops in GPU_PEAK_FLOPS.items():
        if key in name:
            return flops if dtype in ('bfloat16', 'float16') else flops / 2
    return None
