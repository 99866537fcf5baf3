"""
Train the GPT of model.py on a prepared dataset. NanoGPT-style: the defaults below, then an
optional config file, then --key=value overrides.

    python train.py                                    # small char-level model, a few minutes on a laptop CPU
    python train.py --tie_mode=shuffle                 # the same with a remedy for the tied head
    python train.py config/train_shakespeare_char.py   # the one-GPU recipe
    python train.py --init_from=resume                 # continue from out_dir/ckpt.pt
    torchrun --standalone --nproc_per_node=8 train.py config/train_shakespeare.py   # several GPUs (DDP)

Writes to out_dir: ckpt.pt (model, optimizer, config, iteration, RNG and data-order state,
written atomically) and metrics.csv (one row per logged iteration). Ctrl-C saves a final
checkpoint; a kill at any moment leaves the previous checkpoint whole.
"""

import csv
import io
import math
import os
import signal
import statistics
import threading
import time
import zlib
from contextlib import nullcontext, suppress

import numpy as np
import torch

from common import (UserError, atomic_torch_save, atomic_write_bytes, autocast_context, check_seed, memory_shortfall,
                    out_of_memory_is_user_error, out_of_memory_reason, parse_config, pick_compile, pick_device,
                    pick_dtype, remove_stale_temps, run_cli)
from model import GPT, GPTConfig, TIE_MODES, memory_floor
from prepare import check_token_ids, load_meta

DEFAULTS = dict(
    # I/O
    out_dir='out',
    dataset='shakespeare_char',     # data/<dataset>/ made by prepare.py
    data_dir='data',
    init_from='scratch',            # 'scratch' or 'resume' (from out_dir/ckpt.pt)
    eval_interval=250,
    eval_iters=20,                  # batches per split in each evaluation (the same batches every time)
    log_interval=10,
    progress=True,                  # the tqdm bar
    # data
    batch_size=12,
    block_size=64,
    gradient_accumulation_steps=1,  # summed over all DDP ranks
    # model (see model.GPTConfig)
    n_layer=4,
    n_head=4,
    n_embd=128,
    dropout=0.0,
    bias=False,
    vocab_size=None,                # None: the dataset's vocabulary
    init_std=0.02,
    tie_mode='tied',
    emb_scale=False,
    zero_init_residual=False,
    shuffle_groups=4,
    # AdamW and the learning-rate schedule: linear warmup, then cosine decay to min_lr
    learning_rate=1e-3,
    max_iters=2000,
    weight_decay=0.1,
    beta1=0.9,
    beta2=0.99,
    grad_clip=1.0,                  # 0 disables
    decay_lr=True,
    warmup_iters=100,
    lr_decay_iters=None,            # None: max_iters
    min_lr=1e-4,
    # system
    device='auto',                  # auto: cuda, then mps, then cpu
    dtype='auto',                   # auto: bfloat16 on GPUs that support it (else float16) and on CPUs with
                                    # native bf16 (avx512_bf16, AMX); float32 elsewhere
    compile='auto',                 # auto: on for CUDA, off elsewhere
    seed=1337,
)
CHOICES = dict(tie_mode=TIE_MODES, init_from=('scratch', 'resume'), compile=('auto', 'true', 'false'))
MODEL_KEYS = ('vocab_size', 'block_size', 'n_layer', 'n_head', 'n_embd', 'dropout', 'bias', 'init_std',
              'tie_mode', 'emb_scale', 'zero_init_residual', 'shuffle_groups')
METRICS_FIELDS = ('iter', 'step_loss', 'train_loss', 'val_loss', 'lr', 'tokens_per_sec', 'elapsed_s',
                  'data_fingerprint')
EVAL_SEED_OFFSET = 10_000  # evaluation batches come from their own generator, never the training one
# What a resume (or sample.py) reads from a checkpoint; checkpoint_state writes these and more.
CHECKPOINT_KEYS = ('model', 'optimizer', 'model_args', 'iter_num', 'best_val_loss', 'rng', 'data_fingerprint', 'meta')


def parse_train_args(argv, defaults=DEFAULTS):
    choices = dict(CHOICES, compile=CHOICES['compile'] + ('True', 'False', '1', '0'))
    cfg = parse_config(defaults, argv, choices)
    cfg['compile'] = {'True': 'true', '1': 'true', 'False': 'false', '0': 'false'}.get(cfg['compile'], cfg['compile'])
    for key in ('batch_size', 'block_size', 'gradient_accumulation_steps', 'eval_interval', 'eval_iters',
                'log_interval'):
        if cfg[key] < 1:
            raise UserError(f"--{key} must be a positive integer, got {cfg[key]}")
    for key in ('max_iters', 'warmup_iters'):
        if cfg[key] < 0:
            raise UserError(f"--{key} must be zero or more, got {cfg[key]}")
    for key in ('learning_rate', 'min_lr', 'weight_decay', 'grad_clip'):
        if not 0 <= cfg[key] < math.inf:  # nan fails this too
            raise UserError(f"--{key} must be a finite number, zero or more, got {cfg[key]}")
    for key in ('beta1', 'beta2'):  # AdamW's moment decays
        if not 0 <= cfg[key] < 1:
            raise UserError(f"--{key} must be at least 0 and below 1, got {cfg[key]}")
    check_seed(cfg['seed'])
    if cfg['vocab_size'] is not None and (not isinstance(cfg['vocab_size'], int) or cfg['vocab_size'] < 1):
        raise UserError(f"--vocab_size must be a positive integer or None, got {cfg['vocab_size']!r}")
    if cfg['lr_decay_iters'] is not None and (not isinstance(cfg['lr_decay_iters'], int) or cfg['lr_decay_iters'] < 1):
        raise UserError(f"--lr_decay_iters must be a positive integer or None, got {cfg['lr_decay_iters']!r}")
    return cfg


def get_lr(it, cfg):
    """Linear warmup for warmup_iters, then cosine decay from learning_rate to min_lr."""
    if not cfg['decay_lr']:
        return cfg['learning_rate']
    decay_iters = cfg['lr_decay_iters'] or cfg['max_iters']
    if it < cfg['warmup_iters']:
        return cfg['learning_rate'] * (it + 1) / (cfg['warmup_iters'] + 1)
    if it >= decay_iters:
        return cfg['min_lr']
    ratio = (it - cfg['warmup_iters']) / max(1, decay_iters - cfg['warmup_iters'])
    return cfg['min_lr'] + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (cfg['learning_rate'] - cfg['min_lr'])


# ---------------------------------------------------------------- data

def load_splits(cfg):
    """The prepared token arrays, read once into memory as int64 tensors, and the dataset's metadata."""
    data_dir = os.path.join(cfg['data_dir'], cfg['dataset'])
    meta = load_meta(data_dir)  # UserError naming the prepare.py command if missing
    splits = {}
    for split in ('train', 'val'):
        path = os.path.join(data_dir, f'{split}.bin')
        try:
            tokens = np.fromfile(path, dtype=np.dtype(meta['dtype']))
            check_token_ids(path, tokens, meta, data_dir)  # a stale meta.json: an IndexError in the model otherwise
            if len(tokens) <= cfg['block_size']:
                raise UserError(f"{path} has {len(tokens)} tokens, fewer than one context window plus one "
                                f"(--block_size={cfg['block_size']}); use a smaller --block_size or more text")
            splits[split] = torch.from_numpy(tokens.astype(np.int64))
        except OSError as e:
            raise UserError(f"cannot read {path}: {e.strerror}; re-create it with python prepare.py "
                            f"--dataset={cfg['dataset']}") from None
        except MemoryError as e:  # numpy's; both splits are held in memory as int64, 8 bytes a token
            raise UserError(f"out of memory ({out_of_memory_reason(e)}) reading {path}: train.py holds the "
                            f"prepared data in memory, 8 bytes a token; use less data or a machine with more "
                            f"memory") from None
    return splits, meta


def get_batch(tokens, batch_size, block_size, generator):
    """Random windows: x (B, T) and the next-token targets y (B, T), plus the window starts."""
    starts = torch.randint(len(tokens) - block_size, (batch_size,), generator=generator)  # (B,)
    offsets = starts[:, None] + torch.arange(block_size + 1)                               # (B, T+1)
    window = tokens[offsets]                                                               # (B, T+1)
    return window[:, :-1], window[:, 1:], starts


@torch.no_grad()
def estimate_loss(model, splits, cfg, ctx, device):
    """Mean loss on each split over the same eval_iters batches every time, so curves (and tie
    modes) are compared on identical data and an evaluation never disturbs the training RNG."""
    model.eval()
    losses = {}
    for split, tokens in splits.items():
        generator = torch.Generator().manual_seed(cfg['seed'] + EVAL_SEED_OFFSET)
        total = 0.0
        for _ in range(cfg['eval_iters']):
            x, y, _ = get_batch(tokens, cfg['batch_size'], cfg['block_size'], generator)
            with ctx:
                _, loss = model(x.to(device), y.to(device))
            total += loss.item()
        losses[split] = total / cfg['eval_iters']
    model.train()
    return losses


# ---------------------------------------------------------------- checkpoints and metrics

def load_checkpoint(path, device):
    if not os.path.exists(path):
        raise UserError(f"--init_from=resume but there is no checkpoint at {path}; train from scratch first "
                        f"or point --out_dir at the run to resume")
    try:
        ckpt = torch.load(path, map_location=device, weights_only=True)
        missing = [key for key in CHECKPOINT_KEYS if key not in ckpt]
        missing += [f'model_args.{key}' for key in MODEL_KEYS if 'model_args' in ckpt and key not in ckpt['model_args']]
    except Exception as e:
        if out_of_memory_reason(e):  # a sound checkpoint, onto a device that is full
            raise UserError(f"out of memory ({out_of_memory_reason(e)}) loading {path} onto {device}; free memory "
                            f"on {device}, or use another --device") from None
        # A truncated or corrupted file fails in many ways inside the unzipper or the unpickler;
        # the first sentence of torch's message is the useful part, the rest is about other cases.
        reason = str(e).strip().split('\n')[0].split('. ')[0]
        reason = reason if len(reason) <= 100 else reason[:97] + '...'
        raise UserError(f"checkpoint {path} is unreadable, truncated or corrupted ({type(e).__name__}: {reason}); "
                        f"delete it to train from scratch, or restore a copy") from None
    if missing:
        raise UserError(f"checkpoint {path} lacks {', '.join(missing)}; it was not written by this train.py")
    return ckpt


def check_resume_compatible(ckpt, cfg, path):
    """Model keys the user set must agree with the checkpoint; keys left at their default take its values."""
    for key in MODEL_KEYS:
        saved = ckpt['model_args'][key]
        if cfg[key] != DEFAULTS[key] and cfg[key] != saved:
            raise UserError(f"--{key}={cfg[key]} disagrees with the checkpoint {path}, made with {key}={saved}; "
                            f"drop the option or start a new --out_dir")
        cfg[key] = saved


def check_same_vocabulary(saved, meta, path, data_dir):
    """A checkpoint's token ids mean something only under the tokenizer (and, for characters,
    the character list) it was trained with; resuming on other data must not reinterpret them."""
    if (saved.get('tokenizer'), saved.get('vocab_size'), saved.get('chars')) == \
            (meta.get('tokenizer'), meta.get('vocab_size'), meta.get('chars')):
        return
    detail = ''
    if saved.get('tokenizer') == meta.get('tokenizer') == 'char':
        only_saved = [c for c in saved['chars'] if c not in meta['chars']]
        only_data = [c for c in meta['chars'] if c not in saved['chars']]
        detail = (f"; characters only in the checkpoint: {''.join(only_saved)[:20]!r}, "
                  f"only in the data: {''.join(only_data)[:20]!r}")
    raise UserError(f"checkpoint {path} was trained on dataset {saved.get('dataset')!r} "
                    f"({saved.get('tokenizer')}, vocab {saved.get('vocab_size')}) but {data_dir} has another "
                    f"vocabulary ({meta.get('tokenizer')}, vocab {meta.get('vocab_size')}){detail}; resume with "
                    f"--dataset={saved.get('dataset')} or train this data from scratch in a new --out_dir")


def make_model_config(cfg):
    """The GPTConfig of a run's settings; its checks become one-line user errors."""
    try:
        return GPTConfig(**{k: cfg[k] for k in MODEL_KEYS})
    except ValueError as e:
        raise UserError(str(e)) from None


def batch_memory_advice(cfg):
    """What to change when a training step does not fit in memory, with the values now."""
    return (f"--batch_size={cfg['batch_size']}, --block_size={cfg['block_size']}, --gradient_accumulation_steps="
            f"{cfg['gradient_accumulation_steps']}; use a smaller --batch_size or --block_size (a larger "
            f"--gradient_accumulation_steps keeps the tokens per iteration at no extra memory)")


def model_memory_advice(cfg, device):
    """What to change when the model itself does not fit in memory."""
    return (f"the model (n_layer={cfg['n_layer']}, n_embd={cfg['n_embd']}, vocab_size={cfg['vocab_size']}) on "
            f"{device}; use a smaller --n_layer or --n_embd, or free memory on {device}")


def check_memory(model_config, cfg, device, dtype):
    """Refuse, before anything is allocated or written, a run that cannot fit in the device at all
    (model.memory_floor, a lower bound on one step's memory, against all the memory the device has).
    Absurd sizes would otherwise fail at some allocation, or on Linux fill the machine until the
    kernel's OOM killer ends the process without a word. A run let through here may still run out of
    memory; the training loop then says so in one line too."""
    short = memory_shortfall(memory_floor(model_config, 0, dtype), device)
    if short:
        raise UserError(f"the model (n_layer={cfg['n_layer']}, n_embd={cfg['n_embd']}, vocab_size={cfg['vocab_size']}) "
                        f"needs {short}, for its weights, gradients and AdamW state alone; use a smaller --n_layer "
                        f"or --n_embd")
    short = memory_shortfall(memory_floor(model_config, cfg['batch_size'], dtype), device)
    if short:
        raise UserError(f"a training step needs {short}, with {batch_memory_advice(cfg)}")


def checkpoint_state(raw_model, optimizer, cfg, iter_num, best_val_loss, data_generator, fingerprint, meta):
    return {
        'model': raw_model.state_dict(),          # both names of the shared matrix, one storage in the file
        'optimizer': optimizer.state_dict(),
        'model_args': {k: getattr(raw_model.config, k) for k in MODEL_KEYS},
        'config': dict(cfg),
        'iter_num': iter_num,
        'best_val_loss': best_val_loss,
        'rng': {'torch': torch.get_rng_state(), 'data': data_generator.get_state(),
                'cuda': torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []},
        'data_fingerprint': fingerprint,
        'meta': meta,                              # the tokenizer, so sample.py needs no data folder
    }


def open_metrics(out_dir, resume_from):
    """metrics.csv for appending, as the (file, writer) pair that write_row takes; one MetricsLog is both."""
    log = MetricsLog(os.path.join(out_dir, 'metrics.csv'), resume_from)
    return log, log


class MetricsLog:
    """metrics.csv, started on the first row written. On resume, rows logged after the checkpoint are
    dropped then, since those iterations are being trained again. Until that first row (after the
    first training step) the file is left as it was, so a run that stops before it, out of memory say,
    loses no row of the run before."""

    def __init__(self, path, resume_from):
        self.path, self.resume_from, self.file, self.writer = path, resume_from, None, None

    def writerow(self, row):
        if self.writer is None:
            self._start()
        self.writer.writerow(row)

    def _start(self):
        rows = []
        if self.resume_from is not None and os.path.exists(self.path):
            with open(self.path, newline='') as f:
                rows = [r for r in csv.DictReader(f)
                        if r.get('iter', '').isdigit() and int(r['iter']) < self.resume_from]
        text = io.StringIO()
        writer = csv.DictWriter(text, fieldnames=METRICS_FIELDS)
        writer.writeheader()
        writer.writerows(rows)
        # Atomically: a kill at this moment must not lose the rows of the run so far.
        atomic_write_bytes(self.path, text.getvalue().encode())
        self.file = open(self.path, 'a', newline='')
        self.writer = csv.DictWriter(self.file, fieldnames=METRICS_FIELDS)

    def flush(self):
        if self.file:
            self.file.flush()

    def close(self):
        if self.file:
            self.file.close()


def check_writable(out_dir):
    try:
        os.makedirs(out_dir, exist_ok=True)
        probe = os.path.join(out_dir, f'.write-test-{os.getpid()}')
        with open(probe, 'w') as f:
            f.write('ok')
        os.remove(probe)
    except OSError as e:
        raise UserError(f"cannot write to --out_dir={out_dir}: {e.strerror}; choose a writable folder") from None


# ---------------------------------------------------------------- training

class NonFiniteLoss(Exception):
    def __init__(self, value):
        super().__init__(f"non-finite loss {value}")
        self.value = value


def compile_failure(e):
    """One line on e if torch.compile raised it while building its kernels (no C++ compiler on a CPU,
    no Triton on a GPU, ...), else None: any other error is not a compile problem."""
    if not type(e).__module__.startswith(('torch._dynamo', 'torch._inductor')):
        return None
    return f"torch.compile failed here ({type(e).__name__}: {str(e).strip().splitlines()[0][:120]})"


def training_step(model, optimizer, scaler, batches, ctx, grad_clip, check_finite=False):
    """One optimizer step over the micro-batches [(x, y), ...] of gradient accumulation: forward,
    backward, clip, AdamW. Returns the last micro-batch's loss as a tensor (no host sync).
    With check_finite, a non-finite loss raises NonFiniteLoss before the step, so no NaN reaches
    the weights. bench.py times this function, so the benchmark measures what training runs."""
    no_sync = getattr(model, 'no_sync', None)  # DDP: all-reduce the gradients on the last micro-step only
    for i, (x, y) in enumerate(batches):
        with no_sync() if no_sync and i < len(batches) - 1 else nullcontext():
            with ctx:
                _, loss = model(x, y)
            scaler.scale(loss / len(batches)).backward()
    loss = loss.detach()
    if check_finite and not math.isfinite(value := loss.item()):
        raise NonFiniteLoss(value)
    if grad_clip > 0:
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
    return loss


def train(cfg, progress=None):
    """Train with the settings in cfg (a dict like DEFAULTS). progress: an optional tqdm bar to
    advance instead of drawing one (ablate.py shares one bar across runs). Returns a summary
    dict: iterations, final and best losses, tokens/s, wall time, and the trained model."""
    cfg = dict(cfg)
    ddp = int(os.environ.get('RANK', -1)) != -1
    if ddp:
        from torch.distributed import destroy_process_group, init_process_group
        from torch.nn.parallel import DistributedDataParallel as DDP
        rank, local_rank, world_size = int(os.environ['RANK']), int(os.environ['LOCAL_RANK']), int(os.environ['WORLD_SIZE'])
        device = f'cuda:{local_rank}' if torch.cuda.is_available() else 'cpu'
        if device.startswith('cuda'):
            torch.cuda.set_device(device)
        init_process_group(backend='nccl' if device.startswith('cuda') else 'gloo')
        if cfg['gradient_accumulation_steps'] % world_size:
            raise UserError(f"--gradient_accumulation_steps={cfg['gradient_accumulation_steps']} must be divisible "
                            f"by the number of processes ({world_size})")
    else:
        rank, world_size = 0, 1
        device = pick_device(cfg['device'])
    master = rank == 0
    accum_steps = cfg['gradient_accumulation_steps'] // world_size
    device_type = device.split(':')[0]
    dtype = pick_dtype(cfg['dtype'], device)
    use_compile = pick_compile(cfg['compile'], device)
    ctx = autocast_context(device, dtype)
    if device_type == 'cuda':
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True

    # Every check that reads comes before the first write, so a mistake leaves out_dir untouched.
    ckpt_path = os.path.join(cfg['out_dir'], 'ckpt.pt')
    splits, meta = load_splits(cfg)
    ckpt = None
    if cfg['init_from'] == 'resume':
        ckpt = load_checkpoint(ckpt_path, device)
        check_resume_compatible(ckpt, cfg, ckpt_path)
        check_same_vocabulary(ckpt['meta'], meta, ckpt_path, os.path.join(cfg['data_dir'], cfg['dataset']))
    if cfg['vocab_size'] is None:
        cfg['vocab_size'] = meta['vocab_size']
    if cfg['vocab_size'] < meta['vocab_size']:
        raise UserError(f"--vocab_size={cfg['vocab_size']} is smaller than the vocabulary of the prepared data "
                        f"({meta['vocab_size']} in {cfg['data_dir']}/{cfg['dataset']}); leave it unset or use "
                        f">= {meta['vocab_size']} (padding, e.g. 50304 for GPT-2)")
    model_config = make_model_config(cfg)
    check_memory(model_config, cfg, device, dtype)
    if master:
        check_writable(cfg['out_dir'])
        for name in ('ckpt.pt', 'metrics.csv'):  # partial files of runs killed while saving
            remove_stale_temps(os.path.join(cfg['out_dir'], name))

    torch.manual_seed(cfg['seed'])
    with out_of_memory_is_user_error(lambda: 'building ' + model_memory_advice(cfg, device)):
        model = GPT(model_config).to(device)
        optimizer = model.configure_optimizers(cfg['weight_decay'], cfg['learning_rate'], (cfg['beta1'], cfg['beta2']),
                                               device_type)
    # Training batches have their own generator: every tie mode sees the same data order for a seed,
    # whatever its initialisation consumed from the global RNG. Ranks draw different batches.
    data_generator = torch.Generator().manual_seed(cfg['seed'] + rank)
    iter_num, best_val_loss, fingerprint = 0, float('inf'), 0
    saved_iter = None  # the iteration of the checkpoint on disk that this run wrote or resumed from
    if ckpt is not None:
        try:
            model.load_state_dict(ckpt['model'])  # copies into the existing Parameters: the tie survives
            optimizer.load_state_dict(ckpt['optimizer'])
        except (RuntimeError, ValueError, KeyError) as e:
            if out_of_memory_reason(e):  # the optimizer's state, on a device that is full
                raise UserError(f"out of memory ({out_of_memory_reason(e)}) loading {ckpt_path} onto {device}; "
                                f"free memory on {device}, or use another --device") from None
            reason = str(e).strip().split('\n')[0]
            raise UserError(f"checkpoint {ckpt_path} does not fit the model of this model.py ({reason[:150]}); "
                            f"it was written by another version: start a new --out_dir") from None
        torch.set_rng_state(ckpt['rng']['torch'].cpu())
        data_generator.set_state(ckpt['rng']['data'].cpu())
        if device_type == 'cuda' and ckpt['rng']['cuda']:
            torch.cuda.set_rng_state_all([s.cpu() for s in ckpt['rng']['cuda']])
        iter_num, best_val_loss, fingerprint = ckpt['iter_num'], ckpt['best_val_loss'], ckpt['data_fingerprint']
        saved_iter = iter_num
        ckpt = None  # free the memory
    raw_model = model
    if use_compile:
        model = torch.compile(model)
    if ddp:
        model = DDP(model, device_ids=[local_rank] if device_type == 'cuda' else None)
    scaler = torch.amp.GradScaler(device_type, enabled=(dtype == 'float16'))

    tokens_per_iter = cfg['gradient_accumulation_steps'] * cfg['batch_size'] * cfg['block_size']
    peak = gpu_peak_flops(device, dtype) if device_type == 'cuda' else None
    if master and progress is None:
        breakdown = ', '.join(f'{k} {v:,}' for k, v in raw_model.param_breakdown().items())
        print(f"dataset {cfg['dataset']} ({meta.get('tokenizer')}, vocab {meta['vocab_size']}; "
              f"source: {meta.get('source', 'unknown')}), "
              f"{len(splits['train']):,} train / {len(splits['val']):,} val tokens")
        print(f"model: tie_mode={cfg['tie_mode']}, {raw_model.num_params():,} parameters ({breakdown})")
        print(f"device {device}, dtype {dtype}, compile {use_compile}, {world_size} process(es), "
              f"{tokens_per_iter:,} tokens per iteration")
    metrics_file, metrics = open_metrics(cfg['out_dir'], iter_num if cfg['init_from'] == 'resume' else None) \
        if master else (None, None)

    def kept():
        if saved_iter is None:
            return "no checkpoint of this run was saved yet"
        return f"the checkpoint of iteration {saved_iter} in {ckpt_path} is kept"

    def save(it):
        nonlocal saved_iter
        if it == saved_iter:  # already on disk: the resumed iteration, or Ctrl-C right after a save
            return
        try:
            atomic_torch_save(checkpoint_state(raw_model, optimizer, cfg, it, best_val_loss, data_generator,
                                               fingerprint, meta), ckpt_path)
        except OSError as e:  # disk full, quota, folder removed: the temp file is gone, the old checkpoint whole
            raise UserError(f"cannot save the checkpoint of iteration {it} to {ckpt_path}: {e.strerror or e}; "
                            f"{kept()}. Free some space (or choose another --out_dir), then continue with "
                            f"--init_from=resume") from None
        saved_iter = it

    def non_finite(what, value, it):
        hints = [f"a lower --learning_rate (now {cfg['learning_rate']:g})"]
        if cfg['tie_mode'] == 'tied':
            hints.append("a --tie_mode other than 'tied' (see README)")
        if dtype != 'float32':
            hints.append(f"--dtype=float32 (now {dtype})")
        if cfg['grad_clip'] == 0:
            hints.append("--grad_clip=1.0")
        return UserError(f"{what} is {value} at iteration {it}; training stopped and {kept()}. "
                         f"Try {' or '.join(hints)}")

    # Ctrl-C: finish the current iteration, save, then stop. A second Ctrl-C stops at once, which
    # still loses nothing saved: a checkpoint being written is only a temp file until it is complete.
    # Only the main thread may set a handler; elsewhere (or where SIGINT is ignored, as under nohup)
    # Ctrl-C keeps its usual meaning and the last checkpoint is what remains.
    interrupted = []
    def on_sigint(signum, frame):
        interrupted.append(True)
        signal.signal(signal.SIGINT, previous_handler)
        # os.write, not print: the handler may run in the middle of tqdm writing to sys.stderr.
        os.write(2, b"\nCtrl-C: finishing this iteration, then saving a checkpoint; Ctrl-C again stops at once\n")
    handle_sigint = (master and threading.current_thread() is threading.main_thread()
                     and signal.getsignal(signal.SIGINT) is not signal.SIG_IGN)
    previous_handler = signal.signal(signal.SIGINT, on_sigint) if handle_sigint else None

    own_bar = progress is None
    if own_bar:
        from tqdm import tqdm
        progress = tqdm(total=cfg['max_iters'], initial=iter_num, disable=not (master and cfg['progress']),
                        dynamic_ncols=True, desc=cfg['tie_mode'])
    started, window_start, window_tokens, tokens_per_sec = time.time(), time.perf_counter(), 0, 0.0
    rates = []  # tokens/s of each logging window, evaluation excluded
    compiled_once = False
    last = {}
    try:
        while True:
            row = {}
            lr = get_lr(iter_num, cfg)
            for group in optimizer.param_groups:
                group['lr'] = lr
            if master and (iter_num % cfg['eval_interval'] == 0 or iter_num == cfg['max_iters']):
                eval_started = time.perf_counter()
                losses = estimate_loss(raw_model, splits, cfg, ctx, device)
                window_start += time.perf_counter() - eval_started  # keep evaluation out of tokens/s
                row.update(train_loss=f"{losses['train']:.4f}", val_loss=f"{losses['val']:.4f}")
                bad = [v for v in losses.values() if not math.isfinite(v)]
                if bad:  # the weights are already broken: never save them
                    raise non_finite('evaluation loss', bad[0], iter_num)
                last.update(losses)
                best_val_loss = min(best_val_loss, losses['val'])
                if iter_num > 0:
                    save(iter_num)
            if iter_num >= cfg['max_iters'] or interrupted:
                if row:
                    write_row(metrics, metrics_file, row, iter_num, lr, tokens_per_sec, started, fingerprint)
                break

            batches = []
            for _ in range(accum_steps):
                x, y, starts = get_batch(splits['train'], cfg['batch_size'], cfg['block_size'], data_generator)
                fingerprint = zlib.crc32(starts.numpy().tobytes(), fingerprint)
                batches.append((x.to(device, non_blocking=True), y.to(device, non_blocking=True)))
            logging_now = iter_num % cfg['log_interval'] == 0
            # Checking the loss needs its value on the host: free on a CPU, a sync on a GPU, so only when
            # logging there; on a GPU the check of the evaluation losses above is what keeps broken
            # weights out of a checkpoint.
            try:
                step_loss = training_step(model, optimizer, scaler, batches, ctx, cfg['grad_clip'],
                                          check_finite=device_type == 'cpu' or logging_now)
            except NonFiniteLoss as e:
                raise non_finite('loss', e.value, iter_num) from None
            except Exception as e:  # the first compiled step builds the kernels
                reason = compile_failure(e) if use_compile and not compiled_once else None
                if not reason:
                    raise
                raise UserError(f"{reason}; use --compile=false") from None
            compiled_once = True
            window_tokens += tokens_per_iter

            if master and (logging_now or row):
                now = time.perf_counter()
                tokens_per_sec = window_tokens / max(now - window_start, 1e-9)
                rates.append(tokens_per_sec)
                window_start, window_tokens = now, 0
                row['step_loss'] = f"{step_loss.item():.4f}"
                write_row(metrics, metrics_file, row, iter_num, lr, tokens_per_sec, started, fingerprint)
                postfix = dict(loss=f"{step_loss.item():.4f}", lr=f"{lr:.2e}", tok_s=f"{tokens_per_sec:,.0f}")
                if 'val' in last:
                    postfix['val'] = f"{last['val']:.4f}"
                if peak:
                    postfix['mfu'] = f"{100 * raw_model.estimate_mfu(tokens_per_sec, peak, cfg['block_size']):.1f}%"
                progress.set_postfix(postfix, refresh=False)
            iter_num += 1
            progress.update(1)
        if interrupted and iter_num < cfg['max_iters']:
            save(iter_num)
            raise KeyboardInterrupt(f"interrupted at iteration {iter_num}: checkpoint saved to {ckpt_path}; "
                                    f"continue with --init_from=resume --out_dir={cfg['out_dir']}")
    except KeyboardInterrupt as e:
        if e.args:  # the message above
            raise
        if not master:  # under torchrun, Ctrl-C reaches every rank; rank 0 saves
            raise KeyboardInterrupt(f"rank {rank} stopped; rank 0 writes the checkpoints") from None
        raise KeyboardInterrupt(f"stopped at once; {kept()}") from None  # a second Ctrl-C, or no handler
    except OSError as e:  # writing metrics.csv: disk full, or out_dir removed under us
        raise UserError(f"cannot write to --out_dir={cfg['out_dir']}: {e.strerror or e}; {kept()}") from None
    except Exception as e:  # a batch too large for the device; a checkpoint is only ever replaced whole
        if not out_of_memory_reason(e):
            raise
        raise UserError(f"out of memory on {device} ({out_of_memory_reason(e)}) at iteration {iter_num} with "
                        f"{batch_memory_advice(cfg)}; {kept()}") from None
    finally:
        if handle_sigint:
            signal.signal(signal.SIGINT, previous_handler)
        if master:
            with suppress(OSError):  # on a full disk, closing fails too; the error above says it already
                metrics_file.close()
        if own_bar:
            progress.close()
        if ddp:
            destroy_process_group()
    summary = dict(iters=iter_num, train_loss=last.get('train'), val_loss=last.get('val'), best_val_loss=best_val_loss,
                   tokens_per_sec=statistics.median(rates) if rates else 0.0, wall_s=time.time() - started, params=raw_model.num_params(),
                   data_fingerprint=fingerprint, out_dir=cfg['out_dir'], model=raw_model)
    if master and own_bar:
        print(f"done: {iter_num} iterations in {summary['wall_s']:.0f} s ({summary['tokens_per_sec']:,.0f} tokens/s "
              f"median), val loss {summary['val_loss']:.4f} (best {best_val_loss:.4f}); checkpoint {ckpt_path}")
    return summary


def write_row(writer, file, row, iter_num, lr, tokens_per_sec, started, fingerprint):
    writer.writerow(dict(row, iter=iter_num, lr=f'{lr:.6g}', tokens_per_sec=f'{tokens_per_sec:.0f}',
                         elapsed_s=f'{time.time() - started:.2f}', data_fingerprint=f'{fingerprint:08x}'))
    file.flush()


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


def main(argv):
    train(parse_train_args(argv))


if __name__ == '__main__':
    run_cli(main)
