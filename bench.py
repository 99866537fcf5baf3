"""Speed of training steps: forward + backward + optimizer, timed after a warm-up.

    python bench.py                                  # the default train.py recipe
    python bench.py config/train_shakespeare_char.py --device=cuda
    python bench.py --compare                        # fp32 vs bf16, every tie mode, AdamW vs Muon, the head padded or not
                                                     # (and eager vs compile on a GPU)
    python bench.py --compare --compare_compile=true # with the rows that compile first, on a CPU too

Prints ms/iter (median, min, max), tokens/s, training FLOPs per token (the shared matrix counted once, attention
included), achieved FLOP/s, MFU and peak memory. MFU is against the datasheet peak of a known GPU, or on a CPU against a
peak this script measures itself (the best of several large matmuls in the training dtype), so "how close to the limit"
is a number on every machine. With --compare, every setting is built in one process, the timing rounds are interleaved
so that noise from a shared machine hits all rows alike, and each row is given as a ratio to the first, which is what
train.py runs. On a CPU one row is the reference step, NanoGPT's: float32 with torch's for-loop AdamW.

The step timed is train.training_step, the same code train.py runs; batches are random
tokens (the cost of a step does not depend on their values)."""

import os
import platform
import statistics
import sys
import time
from contextlib import nullcontext, suppress

import torch

import train
from lib.command_line import UserError, parse_modes, run_cli
from lib.hf_gpt2 import pretrained_args
from lib.optimizers import build_optimizer
from lib.prepared_data import load_meta
from lib.run_files import load_checkpoint
from lib.probes import GradSources, copy_probe
from lib.training_run import compile_failure, make_model_config
from lib.device import autocast_context, cpu_has_native_bf16, pick_compile, pick_device, pick_dtype, pick_pad_vocab
from lib.memory import batch_memory_advice, check_memory, out_of_memory_is_user_error
from lib.throughput import flops_per_token, gpu_peak_flops
from model import GPT, MODEL_KEYS, TIE_MODES

DEFAULTS = dict(train.DEFAULTS,
                vocab_size=None,     # None: the prepared dataset's, else 65 (tiny shakespeare's characters)
                bench_warmup=10,     # untimed steps first (and compile, if on)
                bench_iters=30,      # timed steps per row
                rounds=10,           # with --compare: the timed steps are split into this many interleaved rounds
                compare=False,       # time every setting (dtypes, tie modes, optimizers, the probe) side by side
                compare_compile='auto',  # with --compare: also the torch.compile rows; auto: where train.py's
                                         # compile=auto would compile (CUDA), since each compiles first: slow on a CPU
                compare_modes=','.join(TIE_MODES),  # with --compare: the tie modes timed, comma separated
                grad_probe=False)    # every step as a logged step of train.py: the grad_in/grad_out probe and the
                                     # copy probe


def rss_now_and_peak():
    """Resident memory now and its peak since the last reset, in bytes (Linux), else (0, ru_maxrss)."""
    try:
        with open('/proc/self/status') as f:
            fields = dict(line.split(':', 1) for line in f)
        return int(fields['VmRSS'].split()[0]) * 1024, int(fields['VmHWM'].split()[0]) * 1024
    except (OSError, KeyError):
        import resource
        return 0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def peak_flops(device, dtype):
    """(FLOP/s, where the figure comes from): a GPU's datasheet, or on a CPU its practical ceiling, the best
    FLOP/s of a large square matmul in dtype measured here."""
    if device.startswith('cuda'):
        return gpu_peak_flops(device, dtype), 'datasheet'
    # An emulated bf16 matmul runs at about 1-2 GFLOP/s: 2048^3 would take seconds per repeat, and
    # 512^3 measures the same ceiling in a fraction of one.
    size = 512 if dtype == 'bfloat16' and not cpu_has_native_bf16() else 2048
    a, b = (torch.randn(size, size, dtype=getattr(torch, dtype)) for _ in range(2))
    a @ b  # warm up the kernels
    best = float('inf')
    for _ in range(5):
        start = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - start)
    return 2 * size ** 3 / best, f'measured {size}^3 matmul'


class Setting:
    """One row of the table: a model, its optimizer and the context to run its step in."""

    def __init__(self, cfg, name, device, fused_adamw=None):
        self.name, self.cfg, self.device = name, cfg, device
        self.dtype = pick_dtype(cfg['dtype'], device, warn=False)
        self.compiled = pick_compile(cfg['compile'], device)
        config = make_model_config(cfg)
        torch.manual_seed(cfg['seed'])
        self.raw_model = GPT(config).to(device)
        self.raw_model.config.pad_vocab_to = pick_pad_vocab(cfg['pad_vocab'], device)  # as train.py sets it
        self.model = torch.compile(self.raw_model) if self.compiled else self.raw_model
        self.optimizer = build_optimizer(self.raw_model, cfg, device.split(':')[0], fused=fused_adamw)
        self.scaler = torch.amp.GradScaler(device.split(':')[0], enabled=self.dtype == 'float16')
        self.ctx = autocast_context(device, self.dtype)
        self.generator = torch.Generator().manual_seed(cfg['seed'])
        self.tokens = torch.randint(config.vocab_size, (1_000_000,), generator=self.generator)
        self.grad_sources = GradSources(self.raw_model, self.scaler) if cfg['grad_probe'] else None
        self.times, self.memory = [], None

    def step(self):
        cfg = self.cfg
        batches = []
        for _ in range(cfg['gradient_accumulation_steps']):
            x, y, _ = train.get_batch(self.tokens, cfg['batch_size'], cfg['block_size'], self.generator)
            batches.append((x.to(self.device), y.to(self.device)))
        with self.grad_sources or nullcontext():  # train.py's logged step carries the probe (lib/interventions)
            train.training_step(self.model, self.optimizer, self.scaler, batches, self.ctx, cfg['grad_clip'],
                                measure_norm=True, probe=copy_probe if self.grad_sources else None)
        self.raw_model.after_optimizer_step()  # pit's retraction, as train.py's instruments run it
        if self.grad_sources:
            self.grad_sources.norms()

    def sync(self):
        if self.device.startswith('cuda'):
            torch.cuda.synchronize(self.device)

    def run(self, iters, untimed=0):
        for _ in range(untimed):  # after another row ran, its weights are back in the caches first
            self.step()
        for _ in range(iters):
            self.sync()
            start = time.perf_counter()
            self.step()
            self.sync()
            self.times.append(time.perf_counter() - start)

    def warm_up(self, iters):
        if cuda := self.device.startswith('cuda'):
            torch.cuda.reset_peak_memory_stats(self.device)
        else:  # Linux: writing 5 to clear_refs resets VmHWM, the peak RSS
            with suppress(OSError), open('/proc/self/clear_refs', 'w') as f:
                f.write('5')
        before = 0 if cuda else rss_now_and_peak()[0]
        for _ in range(iters):
            self.step()
        self.sync()
        # what a step adds on top of what was resident
        self.memory = (torch.cuda.max_memory_allocated(self.device) if cuda else rss_now_and_peak()[1]) - before


def main(argv):
    cfg = train.parse_train_args(argv, DEFAULTS, extra_choices=dict(compare_compile=('auto', 'true', 'false')))
    for key, least in (('bench_iters', 1), ('rounds', 1), ('bench_warmup', 0)):
        if cfg[key] < least:
            raise UserError(f"--{key} must be {'a positive integer' if least else 'zero or more'}, got {cfg[key]}")
    with out_of_memory_is_user_error(lambda: batch_memory_advice(cfg)):
        run_bench(cfg)


def take_shape_of_start(cfg):
    """--init_from names a model: time a fresh one of its shape (bench.py reads no weights, and a step costs
    the same whatever they are), said on a line of its own, rather than train.py's default shape."""
    start = cfg['init_from']
    if start == 'scratch':
        return
    if start == 'resume':
        shape = load_checkpoint(os.path.join(cfg['out_dir'], 'ckpt.pt'), 'cpu')['model_args']
    else:
        shape = pretrained_args(start)  # a GPT-2 name or folder, from its config alone
        shape = dict(shape, tie_mode=cfg['tie_mode'] if shape['tie_mode'] == 'tied' else 'untied')
        shape['block_size'] = min(cfg['block_size'], shape['block_size'])  # the windows train.py would draw
    cfg.update({key: shape[key] for key in MODEL_KEYS if key in shape})
    print(f"note: --init_from={start}: timing a fresh model of its shape ({cfg['n_layer']} layers, {cfg['n_head']} "
          f"heads, width {cfg['n_embd']}, vocab {cfg['vocab_size']}, tie_mode {cfg['tie_mode']}); bench.py reads "
          f"no weights", file=sys.stderr)


def vocab_size(cfg):
    """--vocab_size, else the prepared dataset's. Only train.py's default dataset may be missing (a fresh
    clone): then 65, tiny shakespeare's characters, said on a line of its own. A dataset named on the
    command line or in a config file must be there, as train.py would need it."""
    if cfg['vocab_size'] is not None:
        return cfg['vocab_size']
    data_dir = os.path.join(cfg['data_dir'], cfg['dataset'])
    named = (cfg['dataset'], cfg['data_dir']) != (DEFAULTS['dataset'], DEFAULTS['data_dir'])
    if not named and not os.path.exists(os.path.join(data_dir, 'meta.json')):
        print(f"note: no prepared data in {data_dir}, so vocab_size is 65 (tiny shakespeare's characters); "
              f"--vocab_size=N or --dataset=NAME times another", file=sys.stderr)
        return 65
    return load_meta(data_dir)['vocab_size']  # one line naming what is missing or broken


def run_bench(cfg):
    """Build the setting of every row, time them, print the table."""
    device = pick_device(cfg['device'])
    pick_dtype(cfg['dtype'], device)  # the one warning, if the chosen dtype is emulated here
    take_shape_of_start(cfg)
    cfg['vocab_size'] = vocab_size(cfg)

    def label(row_cfg):
        compiled = 'compile' if pick_compile(row_cfg['compile'], device) else 'eager'
        probe = ' + probes' if row_cfg['grad_probe'] else ''
        muon = ' + muon' if row_cfg['optimizer'] == 'muon' else ''
        padded = ' + padded vocab' if pick_pad_vocab(row_cfg['pad_vocab'], device) > 1 else ''
        return f"{row_cfg['tie_mode']}{muon}{probe}{padded} {pick_dtype(row_cfg['dtype'], device, warn=False)} {compiled}"

    # (name, settings, fused AdamW: None = as train.py chooses)
    settings = [(label(cfg) + (' (train.py)' if cfg['compare'] else ''), cfg, None)]
    if cfg['compare']:
        modes = parse_modes(cfg['compare_modes'], 'compare_modes', TIE_MODES)
        # NanoGPT's step on a CPU, the speed target's reference: the same model and maths in
        # float32, eager, with torch's default for-loop AdamW (it fuses only on CUDA).
        if not device.startswith('cuda'):
            settings.append(("reference: float32 eager loop-AdamW", dict(cfg, dtype='float32', compile='false'), False))
        # Where the CPU only emulates bf16 (no avx512_bf16 or AMX in use), a bf16 row would time
        # a path nobody should take, at a fifteenth of the speed: skipped, and said so.
        emulated_bf16 = device == 'cpu' and not cpu_has_native_bf16()
        if emulated_bf16:
            print("note: no bfloat16 rows: this CPU only emulates bf16 matmuls (no avx512_bf16 or AMX in use), "
                  "so --dtype=auto trains in float32 here", file=sys.stderr)
        for dtype in ('float32',) if emulated_bf16 or device.startswith('mps') else ('float32', 'bfloat16'):
            for compiled in ('false', 'true') if pick_compile(cfg['compare_compile'], device) else ('false',):
                row_cfg = dict(cfg, dtype=dtype, compile=compiled)
                if label(row_cfg) != label(cfg):
                    settings.append((label(row_cfg), row_cfg, None))
        settings += [(f"{mode}", dict(cfg, tie_mode=mode), None) for mode in modes if mode != cfg['tie_mode']]
        others = (
            # the other optimizer: Muon for the blocks' matrices (its Newton-Schulz iterations), or AdamW alone
            dict(cfg, optimizer='adamw' if cfg['optimizer'] == 'muon' else 'muon'),
            # train.py's logged step: the same step with the probes (where the shared gradient comes from; the copy)
            dict(cfg, grad_probe=not cfg['grad_probe']),
            # the head's matmul padded to a multiple of 64 rows, or not: this row's timings chose --pad_vocab's defaults
            dict(cfg, pad_vocab='false' if pick_pad_vocab(cfg['pad_vocab'], device) > 1 else 'true'))
        settings += [(label(row_cfg), row_cfg, None) for row_cfg in others]

    for _, row_cfg, _ in settings:  # a shape that cannot fit at all stops here, before any row is built
        check_memory(make_model_config(row_cfg), row_cfg, device, pick_dtype(row_cfg['dtype'], device))
    rows = []
    for name, row_cfg, fused_adamw in settings:
        row = Setting(row_cfg, name, device, fused_adamw)
        try:
            row.warm_up(cfg['bench_warmup'])
        except Exception as e:  # the first compiled steps build the kernels
            if not (reason := compile_failure(e) if row.compiled else None):
                raise
            if len(settings) == 1:
                raise UserError(f"{reason}; use --compile=false") from None
            print(f"skipped {name}: {reason}", file=sys.stderr)
            continue
        rows.append(row)
    # Short interleaved rounds: a noisy spell on a shared machine then hits every row alike.
    rounds = min(cfg['rounds'], cfg['bench_iters']) if cfg['compare'] else 1
    for r in range(rounds):
        for row in rows:
            row.run(cfg['bench_iters'] * (r + 1) // rounds - cfg['bench_iters'] * r // rounds, untimed=int(rounds > 1))

    tokens_per_iter = cfg['gradient_accumulation_steps'] * cfg['batch_size'] * cfg['block_size']
    peaks = {dtype: peak_flops(device, dtype) for dtype in dict.fromkeys(row.dtype for row in rows)}  # by first use
    if device.startswith('cuda'):
        machine = torch.cuda.get_device_name(device)
    else:
        machine = platform.processor() or platform.machine()
        with suppress(OSError, StopIteration), open('/proc/cpuinfo') as f:
            machine = next(line.split(':', 1)[1].strip() for line in f if line.startswith('model name'))
        machine += f", {os.cpu_count()} cores, {torch.get_num_threads()} torch threads"
    print(f"bench: {machine}, torch {torch.__version__}")
    print(f"shape: {cfg['n_layer']} layers, {cfg['n_head']} heads, width {cfg['n_embd']}, context {cfg['block_size']}, "
          f"vocab {cfg['vocab_size']}, {tokens_per_iter:,} tokens/iter; {cfg['bench_warmup']} warm-up + "
          f"{cfg['bench_iters']} timed iterations per row" + (f" in {rounds} interleaved rounds" if rounds > 1 else ""))
    print(f"{'setting':<36} {'params':>11} {'ms/iter med':>11} {'min':>7} {'max':>7} {'tokens/s':>10} "
          f"{'GFLOP/tok':>9} {'TFLOP/s':>8} {'MFU':>6} {'peak MB':>8} {'ratio':>6}")
    base = None
    for row in rows:
        median = statistics.median(row.times)
        peak = peaks[row.dtype][0]
        tokens_per_sec = tokens_per_iter / median
        flops = flops_per_token(row.raw_model, cfg['block_size'])
        achieved = flops * tokens_per_sec
        # A measured CPU peak is a floor of the true one: a step that beats it means the peak matmul
        # was slowed by the machine's noise, and a ratio above 100 % would be nonsense.
        pct = 100 * achieved / peak if peak else None
        # two significant digits below 0.1 %: a tiny model's MFU printed as 0.0% would read as nothing done
        mfu = 'n/a' if pct is None or pct > 100 else f"{pct:.1f}%" if pct >= 0.1 else f"{pct:.2g}%"
        base = base or tokens_per_sec
        print(f"{row.name:<36} {row.raw_model.num_params():>11,} {1000 * median:>11.2f} {1000 * min(row.times):>7.2f} "
              f"{1000 * max(row.times):>7.2f} {tokens_per_sec:>10,.0f} {flops / 1e9:>9.4f} {achieved / 1e12:>8.3f} "
              f"{mfu:>6} {row.memory / 2**20:>8.0f} {tokens_per_sec / base:>6.3f}")
    for dtype, (peak, source) in peaks.items():
        print(f"peak {dtype}: {peak / 1e12:.3g} TFLOP/s ({source})" if peak else f"peak {dtype}: unknown GPU")
    print("ratio: tokens/s relative to the first row, measured in this process; peak MB: memory a step adds "
          "(RSS on CPU, max allocated on GPU)")
    if reference := next((row for row in rows if row.name.startswith('reference')), None):
        speedup = statistics.median(reference.times) / statistics.median(rows[0].times)
        print(f"train.py's step is {speedup:.2f}x the reference step (NanoGPT's CPU step: float32, for-loop AdamW)")


if __name__ == '__main__':
    run_cli(main)
