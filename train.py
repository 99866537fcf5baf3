"""
Train the GPT of model.py on a prepared dataset, NanoGPT-style: the settings below, then an optional config
file, then --key=value overrides. Read it in order: settings, data, model, optimizer, then the loop (rate,
evaluate and checkpoint, batch, forward, backward, clip, step, log).

    python train.py --tie_mode=shuffle                 # small char-level model with a remedy for the tied head
    python train.py                                    # the same with plain tying: the problem itself
    python train.py config/train_shakespeare_char.py   # the one-GPU recipe
    python train.py --init_from=resume                 # continue from out_dir/ckpt.pt
    python train.py config/finetune_shakespeare.py     # fine-tune pretrained GPT-2 (needs transformers)
    torchrun --standalone --nproc_per_node=8 train.py config/train_shakespeare.py   # several GPUs (DDP)

Writes to out_dir: ckpt.pt (model, optimizer, settings, iteration, RNG and data-order state: checkpoint() below,
written whole or not at all), best.pt (the weights at the lowest validation loss so far) and metrics.csv (a row
per logged iteration). Ctrl-C saves a checkpoint first; a kill leaves the previous one whole (lib/training_run.Run).
"""

import math
import zlib
from contextlib import nullcontext
from functools import partial

import torch

from lib.command_line import run_cli
from lib.device import process_group
from lib.interventions import Instruments
from lib.optimizers import build_optimizer, set_rates
from lib.prepared_data import load_splits
from lib.probes import copy_probe, copying_share
from lib.progress import start_line, training_progress
from lib.throughput import Throughput
from lib.training_run import Run, parse_settings
from model import GPT, MODEL_KEYS

# ---------------------------------------------------------------- settings

DEFAULTS = dict(
    # I/O
    out_dir='out',                  # where ckpt.pt, best.pt and metrics.csv go (made if missing)
    dataset='shakespeare_char',     # data/<dataset>/ made by prepare.py
    data_dir='data',                # the folder that holds the prepared datasets
    init_from='scratch',            # 'scratch', 'resume' (from out_dir/ckpt.pt), or pretrained GPT-2: gpt2,
                                    # gpt2-medium, gpt2-large, gpt2-xl, or a transformers folder (lib/hf_gpt2.py)
    eval_interval=250,              # iterations between evaluations (and checkpoints)
    eval_iters=20,                  # batches per split in each evaluation (the same batches every time)
    eval_seed=11337,                # their generator's seed: one for every --seed, so seeds compare (estimate_loss)
    log_interval=10,                # iterations between rows of metrics.csv (and lines of the log)
    grad_probe=True,                # grad_in, grad_out on logged steps (lib/probes.GradSources); off for speed runs
    progress=True,                  # a bar on a terminal; elsewhere (a log file) a line per logged iteration
    # data
    batch_size=12,                  # sequences per micro-batch
    block_size=64,                  # context length in tokens
    gradient_accumulation_steps=1,  # micro-batches per optimizer step, summed over all DDP ranks
    # model (see model.GPTConfig)
    n_layer=4,                      # transformer blocks
    n_head=4,                       # attention heads per block
    n_embd=128,                     # d, the width: n_embd / n_head per head
    dropout=0.0,                    # dropout probability in the blocks and after the embeddings
    bias=False,                     # biases in the blocks' Linears and LayerNorms (never in the head)
    vocab_size=None,                # None: the dataset's vocabulary
    # the init where tying's trap shows ((*)); GPT-2's (0.02, no scaling) hides it: config/ files state their own
    init_std=0.0884,                # sigma: the std of every weight matrix at init, the shared one included (1/sqrt(d))
    tie_mode='tied',                # how the head relates to the token embedding (model.TIE_MODES)
    head_init='normal',             # untied only: normal, N(0, sigma^2), GPT-2's; zero, nanochat's and modded-nanogpt's
    emb_scale=True,                 # multiply token embeddings by sqrt(d) at the input (Transformer, Gemma)
    zero_init_residual=True,        # zero the residual output projections: every block starts as the identity
    shuffle_groups=4,               # g for tie_mode=shufflenet (must divide n_embd)
    gelu_approx='none',             # 'tanh' is GPT-2's GELU; a pretrained start sets it
    input_grad_scale=1.0,           # k: the token lookup's gradient times k (Lopardo et al. 2026; model.ScaleGrad)
    untie_at=None,                  # a fraction of max_iters, e.g. 0.667: tied until then, untied after
                                    # (tie_mode tied or small_init; the GPT-2 speed-run record unties at 2/3)
    # the optimizer and the learning-rate schedule: linear warmup, then cosine decay to min_lr
    optimizer='adamw',              # adamw; or muon: torch's Muon for the blocks' matrices, AdamW for the rest
                                    # (model.GPT.optimizer_groups)
    learning_rate=1e-3,             # AdamW's peak rate; every other rate follows its schedule, as a fraction of it
    embed_lr=None,                  # the token table's peak rate (the shared matrix's, when tied); None: learning_rate
    head_lr=None,                   # an untied head's peak rate (pit: its S's); None: learning_rate (after
                                    # --untie_at: embed_lr)
    muon_lr=8e-3,                   # Muon's peak rate, in AdamW's units (match_rms_adamw); from config/muon_sweep.sh
    muon_momentum=0.95,             # Muon's momentum (Nesterov); from config/muon_sweep.sh
    muon_qkv='split',               # split: Muon orthogonalises q, k and v each as one map; fused: their stack as one
                                    # matrix (experiment 6's runs; lib/optimizers.py)
    max_iters=2000,                 # optimizer steps in all
    weight_decay=0.1,               # decoupled decay of the matrices (not of biases and norm gains)
    ends_decay='coupled',           # the token table's and an untied head's decay: coupled (weight_decay, so a step
                                    # decays by rate x weight_decay), per_step (weight_decay / the end's multiple of
                                    # learning_rate: a step's decay stays that of x1), or none (lib/optimizers.py)
    beta1=0.9,                      # AdamW's first-moment decay
    beta2=0.99,                     # AdamW's second-moment decay
    grad_clip=1.0,                  # the largest gradient norm (clipped above it); 0 disables
    decay_lr=True,                  # warmup then cosine decay; false keeps learning_rate throughout
    warmup_iters=100,               # iterations of linear warmup
    lr_decay_iters=None,            # where the cosine reaches min_lr; None: max_iters
    min_lr=1e-4,                    # learning_rate at the end of the cosine
    # system
    device='auto',                  # auto: cuda, then mps, then cpu
    dtype='auto',                   # auto: bfloat16 on GPUs that support it (else float16) and on CPUs with
                                    # native bf16 (avx512_bf16, AMX); float32 elsewhere
    compile='auto',                 # auto: on for CUDA, off elsewhere
    pad_vocab='auto',               # the head's matmul padded to a multiple of 64 rows (GPT-2's 50,257 -> 50,304); the
                                    # logits, losses and weights stay the real vocabulary's; auto: on for CUDA only
    seed=1337,                      # the weights' draw and the data order (every DDP rank its share of one stream)
)


def parse_train_args(argv, defaults=DEFAULTS, extra_choices=None):
    """DEFAULTS, then config files, then --key=value, every value checked (lib/training_run.parse_settings)."""
    return parse_settings(argv, defaults, extra_choices)


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


# ---------------------------------------------------------------- data and evaluation

def get_batch(tokens, batch_size, block_size, generator, rank=0, world_size=1):
    """Random windows of the token sequence: inputs x (B, T), next-token targets y (B, T), every rank's starts. Each DDP
    rank draws all ranks' starts from one stream and keeps its B: a step's windows are the same on any number."""
    starts = torch.randint(len(tokens) - block_size, (world_size * batch_size,), generator=generator)  # (W*B,)
    offsets = starts[rank * batch_size:(rank + 1) * batch_size, None] + torch.arange(block_size + 1)  # (B, T+1)
    window = tokens[offsets]                      # (B, T+1): an int64 tensor, or a memory-mapped split's gather
    return window[:, :-1], window[:, 1:], starts


def next_batches(tokens, cfg, accum_steps, generator, proc, fingerprint):
    """This process's micro-batches [(x, y), ...] of one optimizer step on its device, and the data fingerprint
    (a CRC of every rank's window starts drawn so far, so a resume can be shown to continue the same order)."""
    batches = []
    for _ in range(accum_steps):
        x, y, starts = get_batch(tokens, cfg['batch_size'], cfg['block_size'], generator, proc.rank, proc.world_size)
        fingerprint = zlib.crc32(starts.numpy().tobytes(), fingerprint)
        batches.append((x.to(proc.device, non_blocking=True), y.to(proc.device, non_blocking=True)))
    return batches, fingerprint


@torch.no_grad()
def estimate_loss(model, splits, cfg, ctx, device):
    """({split: mean loss}, {copy_prob, repeat_rate, self_margin} on the val batches) over the same eval_iters batches
    each time (seeded by eval_seed, whatever the run's seed, so runs compare); the probe reads the loss's logits."""
    model.eval()
    losses, probe = {}, dict(copy_prob=0.0, repeat_rate=0.0, self_margin=0.0)
    for split, tokens in splits.items():
        generator, total = torch.Generator().manual_seed(cfg['eval_seed']), 0.0
        for _ in range(cfg['eval_iters']):
            x, y, _ = get_batch(tokens, cfg['batch_size'], cfg['block_size'], generator)
            x, y = x.to(device), y.to(device)
            with ctx:
                logits, loss = model(x, y)
            total += loss.item()
            if split == 'val':
                for key, value in copy_probe(logits, x, y).items():
                    probe[key] += value / cfg['eval_iters']
        losses[split] = total / cfg['eval_iters']
    model.train()
    return losses, probe


# ---------------------------------------------------------------- one optimizer step

def training_step(model, optimizer, scaler, batches, ctx, grad_clip, check_finite=False, measure_norm=False,
                  probe=None):
    """One optimizer step over the micro-batches [(x, y), ...] of gradient accumulation: forward, backward, clip, step.
    Returns the last micro-batch's loss and the pre-clip gradient norm (None unless clipping or measure_norm ask) as
    tensors, no wait for the device, and probe(logits, x, y) of the last micro-batch (None without); check_finite: a
    non-finite loss raises FloatingPointError, the step not taken."""
    no_sync = getattr(model, 'no_sync', None)  # DDP: all-reduce the gradients on the last micro-step only
    for i, (x, y) in enumerate(batches):
        with no_sync() if no_sync and i < len(batches) - 1 else nullcontext():
            with ctx:
                logits, loss = model(x, y)
            probed = probe(logits.detach(), x, y) if probe and i == len(batches) - 1 else None
            scaler.scale(loss / len(batches)).backward()  # scale: float16's loss scaling, else a no-op
    loss = loss.detach()
    if check_finite and not math.isfinite(value := loss.item()):
        raise FloatingPointError(value)
    grad_norm = None
    if grad_clip > 0 or measure_norm:
        scaler.unscale_(optimizer)
        # clip_grad_norm_ returns the norm it found; with max_norm=inf it only measures it
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip if grad_clip > 0 else math.inf)
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
    return loss, grad_norm, probed


def wrap(raw_model, proc):
    """The model the step calls, compiled and/or DDP-wrapped: again after an untie (DDP fixes its parameters)."""
    model = torch.compile(raw_model) if proc.compile else raw_model
    if proc.ddp:
        from torch.nn.parallel import DistributedDataParallel as DDP
        model = DDP(model, device_ids=[proc.local_rank] if proc.device.startswith('cuda') else None)
    return model


# ---------------------------------------------------------------- the checkpoint

def checkpoint(raw_model, optimizer, scaler, batch_order, cfg, meta, iter_num, best_val_loss, fingerprint):
    """ckpt.pt: all an exact resume needs, restore() below putting it back; Run writes it whole or not at all (a temp
    file, then a rename) at every evaluation and on Ctrl-C. best.pt: its first four keys at the lowest val loss."""
    return dict(
        model=raw_model.state_dict(),               # both names of the shared matrix, one storage in the file
        model_args={k: getattr(raw_model.config, k) for k in MODEL_KEYS},  # to build the same GPTConfig again
        meta=meta,                                  # the tokenizer: sample.py needs no data folder
        head_untied=raw_model.config.tie_mode != 'untied' and not raw_model.is_tied,  # --untie_at has split it
        optimizer=optimizer.state_dict(),           # AdamW's moments (and Muon's momentum) of every group
        scaler=scaler.state_dict(),                 # float16's loss scale and its growth count ({} otherwise)
        config=dict(cfg),                           # the settings: a resume takes those its command line leaves out
        iter_num=iter_num,
        best_val_loss=best_val_loss,
        # every rank's: all are seeded and draw alike (get_batch shares one stream out), each on its own device
        rng={'torch': torch.get_rng_state(), 'data': batch_order.get_state(),
             'cuda': torch.cuda.get_rng_state() if torch.cuda.is_available() else None},
        world_size=torch.distributed.get_world_size() if torch.distributed.is_initialized() else 1,
        data_fingerprint=fingerprint,               # a CRC of every window drawn: the resumed order is the same
    )


def restore(ckpt, raw_model, optimizer, scaler, batch_order):
    """A resume: the weights, the optimizer's state and every random generator exactly as checkpoint() saved
    them. Returns (iter_num, best_val_loss, data fingerprint) to go on from."""
    raw_model.load_state_dict(ckpt['model'])        # copies into the existing Parameters: the tie survives
    optimizer.load_state_dict(ckpt['optimizer'])
    if ckpt.get('scaler'):                          # a float16 run's (a checkpoint older than the key has none)
        scaler.load_state_dict(ckpt['scaler'])
    torch.set_rng_state(ckpt['rng']['torch'].cpu())
    batch_order.set_state(ckpt['rng']['data'].cpu())
    if torch.cuda.is_available() and ckpt['rng']['cuda'] is not None:  # into this rank's own device
        torch.cuda.set_rng_state(ckpt['rng']['cuda'].cpu())
    return ckpt['iter_num'], ckpt['best_val_loss'], ckpt['data_fingerprint']


# ---------------------------------------------------------------- training

def train(cfg, progress=None):
    """Train with the settings in cfg (a dict like DEFAULTS). progress: an optional tqdm bar to advance instead
    of drawing one (ablate.py shares one bar across runs). Returns a summary dict: iterations, final and best
    losses, tokens/s, wall time, and the trained model."""
    cfg, ckpt = Run.resume_settings(cfg, DEFAULTS)  # a resume: the checkpoint's settings, bar those typed
    with process_group(cfg) as proc:  # the device, its dtype and compile settings; under torchrun, this rank
        device, master = proc.device, proc.master
        # mixed precision: the forward pass under bfloat16 (or float16) autocast where the device has it, the
        # weights and the optimizer in float32; nothing at all for float32
        dtype = getattr(torch, proc.dtype)
        ctx = nullcontext() if dtype == torch.float32 else torch.autocast(device.split(':')[0], dtype)

        # data, and every check that reads before anything is written: a mistake leaves out_dir as it was
        splits, meta = load_splits(cfg)
        run = Run(cfg, DEFAULTS, meta, proc, ckpt)

        # the model and its optimizer: from the seed (or GPT-2's weights), or exactly as a checkpoint left them
        torch.manual_seed(cfg['seed'])
        with run.building():
            raw_model = (GPT(run.model_config) if run.pretrained is None else run.pretrained).to(device)
            raw_model.config.pad_vocab_to = proc.pad_vocab_to  # a speed setting of this machine, not of the weights
            if run.untied_by_untie_at:
                raw_model.untie()
            optimizer = build_optimizer(raw_model, cfg, device.split(':')[0])
        # The training batches have a generator of their own: every tie mode sees the same data order for a
        # seed, whatever its initialisation drew from the global one. Every rank draws it alike (get_batch).
        batch_order = torch.Generator().manual_seed(cfg['seed'])
        scaler = torch.amp.GradScaler(device.split(':')[0], enabled=(proc.dtype == 'float16'))
        accum_steps = cfg['gradient_accumulation_steps'] // proc.world_size
        iter_num, best_val_loss, fingerprint = 0, float('inf'), 0
        if run.ckpt is not None:  # --init_from=resume; a checkpoint that does not fit is one line
            with run.restoring():
                iter_num, best_val_loss, fingerprint = restore(run.ckpt, raw_model, optimizer, scaler, batch_order)
        run.checkpoint = partial(checkpoint, raw_model, optimizer, scaler, batch_order, cfg, meta)  # what Run saves
        model = wrap(raw_model, proc)
        instruments = Instruments(raw_model, optimizer, scaler, cfg)

        tokens_per_iter = cfg['gradient_accumulation_steps'] * cfg['batch_size'] * cfg['block_size']  # every rank's
        if master and progress is None:
            run.print_header(splits, raw_model, tokens_per_iter)
        bar = progress or training_progress(cfg['max_iters'], iter_num, cfg['tie_mode'], master and cfg['progress'])
        speed, last = Throughput(raw_model, cfg['block_size'], device, proc.dtype), {}
        start, copying = None, None  # the first evaluation's val loss; whether the head copied its input then

        with run.guarded(lambda: iter_num) as interrupted, (nullcontext() if progress else bar):
            while True:
                lr = get_lr(iter_num, cfg)
                set_rates(optimizer, cfg, lr)  # each group at its own peak (--embed_lr, ...) under one schedule

                # evaluate on the fixed batches, keep the best weights, save a checkpoint
                row = {}
                if master and (iter_num % cfg['eval_interval'] == 0 or iter_num == cfg['max_iters']):
                    with speed.paused():
                        last, probe = estimate_loss(raw_model, splits, cfg, ctx, device)
                    row.update(train_loss=f"{last['train']:.4f}", val_loss=f"{last['val']:.4f}",
                               **{key: f"{value:.4g}" for key, value in probe.items()})
                    best_val_loss = run.evaluated(iter_num, last, best_val_loss, fingerprint)
                    # the lesson on the console: the start beside log n and (*), and whether the head copies its input
                    share = copying_share(probe, raw_model.config.vocab_size)
                    if copying is None:  # this process's first evaluation: from here the console shows the probe
                        copying = share is not None and progress is None
                    if iter_num == 0 and run.pretrained is None and progress is None:
                        start = last['val']
                        bar.write(start_line(raw_model.config, cfg['tie_mode'], start, probe, share))
                if iter_num >= cfg['max_iters'] or interrupted:
                    if row:
                        run.log(row, iter_num, lr, speed.last, speed.elapsed(), fingerprint)
                    break
                if instruments.unties_now(iter_num):  # --untie_at: two matrices from here on
                    model = wrap(raw_model, proc)

                # one optimizer step over the micro-batches of gradient accumulation
                batches, fingerprint = next_batches(splits['train'], cfg, accum_steps, batch_order, proc, fingerprint)
                logging_now = iter_num % cfg['log_interval'] == 0
                with instruments.watching(logging_now or iter_num % cfg['eval_interval'] == 0):
                    # The loss reaches the host free on a CPU, at a wait on a GPU, so it is checked there only when
                    # logging (run.guarded ends a non-finite one); the evaluations' check keeps NaN from checkpoints.
                    step_loss, grad_norm, step_copy = training_step(
                        model, optimizer, scaler, batches, ctx, cfg['grad_clip'], check_finite=device == 'cpu'
                        or logging_now, measure_norm=logging_now or bool(row),
                        probe=copy_probe if copying and logging_now else None)  # the console's copy: this step's
                sources = instruments.after_step()  # pit's retraction; the gradient sources on a probed step
                speed.add(tokens_per_iter // proc.world_size)  # this process's: tokens/s and MFU are per GPU

                # log: a row of metrics.csv and the progress bar
                if master and (logging_now or row):
                    tokens_per_sec = speed.tick()
                    row.update(step_loss=f"{step_loss.item():.4f}", grad_norm=f"{grad_norm.item():.4g}",
                               **(dict(grad_in=f"{sources[0]:.4g}", grad_out=f"{sources[1]:.4g}") if sources else {}))
                    run.log(row, iter_num, lr, tokens_per_sec, speed.elapsed(), fingerprint)
                    # a run that started as a copier shows this step's copy probe: seen falling as the head unlearns it
                    bar.set_postfix(speed.postfix(loss=row['step_loss'], lr=f"{lr:.2e}", val=last.get('val'),
                                                  copy=step_copy and step_copy['copy_prob']), refresh=False)
                iter_num += 1
                bar.update(1)
            if interrupted and iter_num < cfg['max_iters']:
                raise run.interrupted_at(iter_num, best_val_loss, fingerprint)

    summary = dict(iters=iter_num, train_loss=last.get('train'), val_loss=last.get('val'), best_val_loss=best_val_loss,
                   tokens_per_sec=speed.median(), wall_s=speed.elapsed(), params=raw_model.num_params(),
                   data_fingerprint=fingerprint, out_dir=cfg['out_dir'], model=raw_model)
    if master and not progress:
        print(f"done: {iter_num} iterations in {summary['wall_s']:.0f} s ({summary['tokens_per_sec']:,.0f} tokens/s "
              f"{'a process, ' if proc.world_size > 1 else ''}median), val loss {summary['val_loss']:.4f} "
              f"(best {best_val_loss:.4f})"
              + (f", from {start:.4f} at the start" if start is not None else '') + f"; checkpoint {run.ckpt_path}")
    return summary


def main(argv):
    train(parse_train_args(argv))


if __name__ == '__main__':
    run_cli(main)
