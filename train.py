"""
Train the GPT of model.py on a prepared dataset. NanoGPT-style: the defaults below, then an
optional config file, then --key=value overrides.

    python train.py                                    # small char-level model, a few minutes on a laptop CPU
    python train.py --tie_mode=shuffle                 # the same with a remedy for the tied head
    python train.py config/train_shakespeare_char.py   # the one-GPU recipe
    python train.py --init_from=resume                 # continue from out_dir/ckpt.pt
    python train.py config/finetune_shakespeare.py     # fine-tune pretrained GPT-2 (needs transformers)
    torchrun --standalone --nproc_per_node=8 train.py config/train_shakespeare.py   # several GPUs (DDP)

Writes to out_dir: ckpt.pt (model, optimizer, config, iteration, RNG and data-order state,
written atomically), best.pt (the weights at the lowest validation loss so far) and metrics.csv
(one row per logged iteration). Ctrl-C saves a final checkpoint; a kill at any moment leaves the
previous checkpoint whole.
"""

import math
import os
import zlib
from contextlib import nullcontext

import torch

from lib.command_line import UserError, check_seed, parse_config, run_cli
from lib.hf_gpt2 import start_from_pretrained
from lib.machine import (Throughput, autocast_context, batch_memory_advice, check_memory, ctrl_c_saves, flops_per_token,
                         out_of_memory_is_user_error, out_of_memory_reason, pick_compile, pick_dtype, pick_pad_vocab,
                         process_group)
from lib.evaluation import estimate_loss
from lib.optimizers import (ENDS_DECAY, MUON_QKV, OPTIMIZERS, build_optimizer, check_head_lr, check_optimizer_args,
                            check_same_optimizer, resume_rates, set_rates, untie_head)
from lib.probes import GradSources
from lib.progress import training_progress
from lib.run_files import (MODEL_KEYS, RunFiles, check_resume_compatible, check_same_vocabulary, check_untie_at,
                           check_vocab_size, checkpoint_state, load_checkpoint, non_finite_error, print_run_header)
from model import GPT, TIE_MODES, GPTConfig
from lib.prepared_data import get_batch, load_splits

DEFAULTS = dict(
    # I/O
    out_dir='out',                  # where ckpt.pt, best.pt and metrics.csv go (made if missing)
    dataset='shakespeare_char',     # data/<dataset>/ made by prepare.py
    data_dir='data',                # the folder that holds the prepared datasets
    init_from='scratch',            # 'scratch', 'resume' (from out_dir/ckpt.pt), or pretrained GPT-2: gpt2,
                                    # gpt2-medium, gpt2-large, gpt2-xl, or a transformers folder (lib/hf_gpt2.py)
    eval_interval=250,              # iterations between evaluations (and checkpoints)
    eval_iters=20,                  # batches per split in each evaluation (the same batches every time)
    eval_seed=11337,                # their generator's seed: one for every --seed, so seeds compare (lib/evaluation.py)
    log_interval=10,                # iterations between rows of metrics.csv (and lines of the log)
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
    init_std=0.02,                  # sigma: the std of every weight matrix at init, the shared one included
    tie_mode='tied',                # how the head relates to the token embedding (README's table of modes)
    emb_scale=False,                # multiply token embeddings by sqrt(d) at the input (Transformer, Gemma)
    zero_init_residual=False,       # zero the residual output projections: every block starts as the identity
    shuffle_groups=4,               # g for tie_mode=shufflenet (must divide n_embd)
    gelu_approx='none',             # 'tanh' is GPT-2's GELU; a pretrained start sets it
    input_grad_scale=1.0,           # k: the token lookup's gradient times k (Lopardo et al. 2026; model.ScaleGrad)
    untie_at=None,                  # a fraction of max_iters, e.g. 0.667: tied until then, untied after
                                    # (tie_mode tied or small_init; the GPT-2 speed-run record unties at 2/3)
    # the optimizer and the learning-rate schedule: linear warmup, then cosine decay to min_lr
    optimizer='adamw',              # adamw; or muon: torch's Muon for the blocks' matrices, AdamW for the rest
                                    # (model.GPT.configure_optimizers, lib/optimizers.py)
    learning_rate=1e-3,             # AdamW's peak rate; every other rate follows its schedule, as a fraction of it
    embed_lr=None,                  # the token table's peak rate (the shared matrix's, when tied); None: learning_rate
    head_lr=None,                   # an untied head's peak rate; None: learning_rate (after --untie_at: embed_lr)
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
    seed=1337,                      # the weights' draw and the data order (each DDP rank adds its rank)
)
CHOICES = dict(tie_mode=TIE_MODES, gelu_approx=('none', 'tanh'), compile=('auto', 'true', 'false'), optimizer=OPTIMIZERS,
               muon_qkv=MUON_QKV, ends_decay=ENDS_DECAY, pad_vocab=('auto', 'true', 'false'))


def parse_train_args(argv, defaults=DEFAULTS, extra_choices=None):
    choices = dict(CHOICES, **(extra_choices or {}))
    switches = [key for key, allowed in choices.items() if allowed == ('auto', 'true', 'false')]
    for key in switches:  # auto/true/false switches also take the spellings of a boolean
        choices[key] = choices[key] + ('True', 'False', '1', '0')
    cfg = parse_config(defaults, argv, choices)
    for key in switches:
        cfg[key] = {'True': 'true', '1': 'true', 'False': 'false', '0': 'false'}.get(cfg[key], cfg[key])
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
    check_optimizer_args(cfg)
    check_seed(cfg['seed'])
    check_seed(cfg['eval_seed'], 'eval_seed')
    if cfg['vocab_size'] is not None and (not isinstance(cfg['vocab_size'], int) or cfg['vocab_size'] < 1):
        raise UserError(f"--vocab_size must be a positive integer or None, got {cfg['vocab_size']!r}")
    if cfg['lr_decay_iters'] is not None and (not isinstance(cfg['lr_decay_iters'], int) or cfg['lr_decay_iters'] < 1):
        raise UserError(f"--lr_decay_iters must be a positive integer or None, got {cfg['lr_decay_iters']!r}")
    untie_at = cfg.get('untie_at')
    if untie_at is not None and (isinstance(untie_at, bool) or not isinstance(untie_at, (int, float))
                                 or not 0 < untie_at < 1):
        raise UserError(f"--untie_at must be a fraction of max_iters strictly between 0 and 1 (e.g. 0.667), "
                        f"or None, got {untie_at!r}")
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

def next_batches(tokens, cfg, accum_steps, generator, device, fingerprint):
    """The micro-batches [(x, y), ...] of one optimizer step on device, and the data fingerprint
    (a CRC of every window start drawn so far) updated with them."""
    batches = []
    for _ in range(accum_steps):
        x, y, starts = get_batch(tokens, cfg['batch_size'], cfg['block_size'], generator)
        fingerprint = zlib.crc32(starts.numpy().tobytes(), fingerprint)
        batches.append((x.to(device, non_blocking=True), y.to(device, non_blocking=True)))
    return batches, fingerprint


# ---------------------------------------------------------------- the model and its optimizer

def make_model_config(cfg):
    """The GPTConfig of a run's settings; its checks become one-line user errors."""
    try:
        return GPTConfig(**{k: cfg[k] for k in MODEL_KEYS})
    except ValueError as e:
        raise UserError(str(e)) from None


def build_or_resume(cfg, ckpt, pretrained, device, rank, ckpt_path):
    """The model, its optimizer (lib/optimizers.Optimizers), the training-data generator and (iter_num, best_val_loss, fingerprint):
    fresh from the seed (or GPT-2's weights), or exactly as the checkpoint left them."""
    torch.manual_seed(cfg['seed'])
    with out_of_memory_is_user_error(f"building the model (n_layer={cfg['n_layer']}, n_embd={cfg['n_embd']}, "
                                     f"vocab_size={cfg['vocab_size']}) on {device}; use a smaller --n_layer or "
                                     f"--n_embd, or free memory on {device}"):
        model = (GPT(make_model_config(cfg)) if pretrained is None else pretrained).to(device)
        # A speed setting of this machine, not of the weights (the same either way), so checkpoints do not record it:
        # set on the model built, fresh, pretrained or resumed, whichever device wrote the checkpoint.
        model.config.pad_vocab_to = pick_pad_vocab(cfg['pad_vocab'], device)
        if ckpt is not None and ckpt.get('head_untied'):  # saved after --untie_at: two matrices to load
            model.untie()
        optimizer = build_optimizer(model, cfg, device.split(':')[0])
    # Training batches have their own generator: every tie mode sees the same data order for a seed,
    # whatever its initialisation consumed from the global RNG. Ranks draw different batches.
    data_generator = torch.Generator().manual_seed(cfg['seed'] + rank)
    if ckpt is None:
        return model, optimizer, data_generator, (0, float('inf'), 0)
    try:
        model.load_state_dict(ckpt['model'])  # copies into the existing Parameters: the tie survives
        optimizer.load_state_dict(ckpt['optimizer'], model)
    except (RuntimeError, ValueError, KeyError) as e:
        if out_of_memory_reason(e):  # the optimizer's state, on a device that is full
            raise UserError(f"out of memory ({out_of_memory_reason(e)}) loading {ckpt_path} onto {device}; "
                            f"free memory on {device}, or use another --device") from None
        reason = str(e).strip().split('\n')[0]
        raise UserError(f"checkpoint {ckpt_path} does not fit the model of this model.py ({reason[:150]}); "
                        f"it was written by another version: start a new --out_dir") from None
    torch.set_rng_state(ckpt['rng']['torch'].cpu())
    data_generator.set_state(ckpt['rng']['data'].cpu())
    if device.startswith('cuda') and ckpt['rng']['cuda']:
        torch.cuda.set_rng_state_all([s.cpu() for s in ckpt['rng']['cuda']])
    return model, optimizer, data_generator, (ckpt['iter_num'], ckpt['best_val_loss'], ckpt['data_fingerprint'])


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


def training_step(model, optimizer, scaler, batches, ctx, grad_clip, check_finite=False, measure_norm=False,
                  grad_sources=None, after_step=None):
    """One optimizer step over the micro-batches [(x, y), ...] of gradient accumulation: forward,
    backward, clip, the optimizer's step. Returns the last micro-batch's loss, the gradient norm before clipping
    (None where neither clipping nor measure_norm asked for it), as tensors (no host sync), and
    (grad_in, grad_out) from the probe grad_sources if one is given (lib/probes.GradSources).
    With check_finite, a non-finite loss raises NonFiniteLoss before the step, so no NaN reaches
    the weights. after_step runs after the step (pit's retraction). bench.py times this function."""
    no_sync = getattr(model, 'no_sync', None)  # DDP: all-reduce the gradients on the last micro-step only
    with grad_sources or nullcontext():
        for i, (x, y) in enumerate(batches):
            with no_sync() if no_sync and i < len(batches) - 1 else nullcontext():
                with ctx:
                    _, loss = model(x, y)
                scaler.scale(loss / len(batches)).backward()
    loss = loss.detach()
    if check_finite and not math.isfinite(value := loss.item()):
        raise NonFiniteLoss(value)
    sources = grad_sources.norms(scaler.get_scale() if scaler.is_enabled() else 1.0) if grad_sources else None
    grad_norm = None
    if grad_clip > 0 or measure_norm:
        scaler.unscale_(optimizer)
        # clip_grad_norm_ returns the norm it found; with max_norm=inf it only measures it
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip if grad_clip > 0 else math.inf)
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
    if after_step is not None:
        after_step()
    return loss, grad_norm, sources


def wrap(raw_model, use_compile, proc):
    """The model the training step calls: compiled and/or DDP-wrapped. Built again after an untie,
    since DDP fixes its list of parameters (and its gradient buckets) when it wraps."""
    model = torch.compile(raw_model) if use_compile else raw_model
    if proc.ddp:
        from torch.nn.parallel import DistributedDataParallel as DDP
        model = DDP(model, device_ids=[proc.local_rank] if proc.device.startswith('cuda') else None)
    return model


# ---------------------------------------------------------------- training

def train(cfg, progress=None):
    """Train with the settings in cfg (a dict like DEFAULTS). progress: an optional tqdm bar to
    advance instead of drawing one (ablate.py shares one bar across runs). Returns a summary
    dict: iterations, final and best losses, tokens/s, wall time, and the trained model."""
    cfg = dict(cfg)
    with process_group(cfg) as proc:
        device, master = proc.device, proc.master
        dtype = pick_dtype(cfg['dtype'], device)
        use_compile = pick_compile(cfg['compile'], device)
        ctx = autocast_context(device, dtype)
        if device.startswith('cuda'):
            torch.backends.cuda.matmul.allow_tf32 = True
            torch.backends.cudnn.allow_tf32 = True

        # Every check that reads comes before the first write, so a mistake leaves out_dir untouched.
        files = RunFiles(cfg['out_dir'], writes=master)
        splits, meta = load_splits(cfg)
        ckpt = None
        if cfg['init_from'] == 'resume':
            ckpt = load_checkpoint(files.ckpt_path, device)
            check_resume_compatible(ckpt, cfg, DEFAULTS, files.ckpt_path)
            check_same_vocabulary(ckpt['meta'], meta, files.ckpt_path, os.path.join(cfg['data_dir'], cfg['dataset']))
            check_same_optimizer(ckpt.get('config', {}), cfg, files.ckpt_path)
            for line in resume_rates(ckpt.get('config', {}), cfg, DEFAULTS, files.ckpt_path):
                if proc.master:
                    print(line)
        pretrained = None
        if cfg['init_from'] not in ('scratch', 'resume'):  # GPT-2's weights; cfg's model keys become its shape
            pretrained = start_from_pretrained(cfg, DEFAULTS, meta)
        check_vocab_size(cfg, meta)
        check_untie_at(cfg)
        check_head_lr(cfg)
        check_memory(make_model_config(cfg), cfg, device, dtype)
        files.prepare()

        model, optimizer, data_generator, (iter_num, best_val_loss, fingerprint) = \
            build_or_resume(cfg, ckpt, pretrained, device, proc.rank, files.ckpt_path)
        files.saved_iter = iter_num if ckpt is not None else None
        ckpt = None  # free the memory
        raw_model, model = model, wrap(model, use_compile, proc)
        untie_iter = round(cfg['untie_at'] * cfg['max_iters']) if cfg['untie_at'] is not None else None
        scaler = torch.amp.GradScaler(device.split(':')[0], enabled=(dtype == 'float16'))
        accum_steps = cfg['gradient_accumulation_steps'] // proc.world_size
        tokens_per_iter = cfg['gradient_accumulation_steps'] * cfg['batch_size'] * cfg['block_size']
        if master and progress is None:
            print_run_header(cfg, meta, splits, raw_model, device, dtype, use_compile, proc.world_size, tokens_per_iter)
        files.open_metrics(resume_from=iter_num if cfg['init_from'] == 'resume' else None)

        bar = progress or training_progress(cfg['max_iters'], iter_num, cfg['tie_mode'], master and cfg['progress'])
        grad_sources = GradSources(raw_model)  # metrics.csv's grad_in and grad_out, on logged steps only
        speed, last, first_iter = Throughput(flops_per_token(raw_model, cfg['block_size']), device, dtype), {}, iter_num
        state = lambda: checkpoint_state(raw_model, optimizer, cfg, iter_num, best_val_loss, data_generator,  # noqa: E731
                                         fingerprint, meta)
        # A batch too large for the device is one line too; a checkpoint is only ever replaced whole.
        out_of_memory = out_of_memory_is_user_error(message=lambda reason: (
            f"out of memory on {device} ({reason}) at iteration {iter_num} with {batch_memory_advice(cfg)}; "
            f"{files.kept()}"))
        with files, ctrl_c_saves(proc, files) as interrupted, out_of_memory, (nullcontext() if progress else bar):
            while True:
                lr = get_lr(iter_num, cfg)
                set_rates(optimizer, cfg, lr)  # each group its own peak (--embed_lr, ...), one schedule

                # evaluate on the fixed batches, then save a checkpoint
                row = {}
                if master and (iter_num % cfg['eval_interval'] == 0 or iter_num == cfg['max_iters']):
                    with speed.paused():
                        losses, probe = estimate_loss(raw_model, splits, cfg, ctx, device)
                    row.update(train_loss=f"{losses['train']:.4f}", val_loss=f"{losses['val']:.4f}",
                               **{key: f"{value:.4g}" for key, value in probe.items()})
                    bad = [v for v in losses.values() if not math.isfinite(v)]
                    if bad:  # the weights are already broken: never save them
                        raise non_finite_error('evaluation loss', bad[0], iter_num, cfg, dtype, files)
                    # The best point so far, kept beside the last (best.pt); not the resumed iteration's, saved before.
                    if 0 < iter_num != files.saved_iter and losses['val'] < best_val_loss:
                        files.save_best(iter_num, raw_model, losses['val'], meta)
                    last, best_val_loss = losses, min(best_val_loss, losses['val'])
                    if iter_num > 0:
                        files.save(iter_num, state)
                if iter_num >= cfg['max_iters'] or interrupted:
                    if row:
                        files.log(row, iter_num, lr, speed.last, speed.elapsed(), fingerprint)
                    break

                if iter_num == untie_iter and raw_model.is_tied:  # --untie_at: two matrices from here on
                    untie_head(raw_model, optimizer)
                    model = wrap(raw_model, use_compile, proc)

                # one optimizer step over the micro-batches of gradient accumulation
                batches, fingerprint = next_batches(splits['train'], cfg, accum_steps, data_generator, device,
                                                    fingerprint)
                logging_now = iter_num % cfg['log_interval'] == 0
                # Checking the loss needs its value on the host: free on a CPU, a sync on a GPU, so only when
                # logging there; on a GPU the check of the evaluation losses is what keeps broken weights
                # out of a checkpoint.
                try:
                    step_loss, grad_norm, sources = training_step(
                        model, optimizer, scaler, batches, ctx, cfg['grad_clip'],
                        check_finite=device == 'cpu' or logging_now, measure_norm=logging_now or bool(row),
                        # on every rank alike: under DDP the probe's all-reduce needs them all
                        grad_sources=grad_sources if logging_now or iter_num % cfg['eval_interval'] == 0 else None,
                        after_step=raw_model.after_optimizer_step)
                except NonFiniteLoss as e:
                    raise non_finite_error('loss', e.value, iter_num, cfg, dtype, files) from None
                except Exception as e:  # the first compiled step builds the kernels: a failure there is one line
                    if use_compile and iter_num == first_iter and (reason := compile_failure(e)):
                        raise UserError(f"{reason}; use --compile=false") from None
                    raise
                speed.add(tokens_per_iter)

                # log: a row of metrics.csv and the progress bar
                if master and (logging_now or row):
                    tokens_per_sec = speed.tick()
                    row.update(step_loss=f"{step_loss.item():.4f}", grad_norm=f"{grad_norm.item():.4g}",
                               **(dict(grad_in=f"{sources[0]:.4g}", grad_out=f"{sources[1]:.4g}") if sources else {}))
                    files.log(row, iter_num, lr, tokens_per_sec, speed.elapsed(), fingerprint)
                    bar.set_postfix(speed.postfix(loss=row['step_loss'], lr=f"{lr:.2e}", val=last.get('val')),
                                    refresh=False)
                iter_num += 1
                bar.update(1)
            if interrupted and iter_num < cfg['max_iters']:
                files.save(iter_num, state)
                raise KeyboardInterrupt(f"interrupted at iteration {iter_num}: checkpoint saved to {files.ckpt_path}; "
                                        f"continue with --init_from=resume --out_dir={cfg['out_dir']}")

    summary = dict(iters=iter_num, train_loss=last.get('train'), val_loss=last.get('val'), best_val_loss=best_val_loss,
                   tokens_per_sec=speed.median(), wall_s=speed.elapsed(), params=raw_model.num_params(),
                   data_fingerprint=fingerprint, out_dir=cfg['out_dir'], model=raw_model)
    if master and not progress:
        print(f"done: {iter_num} iterations in {summary['wall_s']:.0f} s ({summary['tokens_per_sec']:,.0f} tokens/s "
              f"median), val loss {summary['val_loss']:.4f} (best {best_val_loss:.4f}); checkpoint {files.ckpt_path}")
    return summary


def main(argv):
    train(parse_train_args(argv))


if __name__ == '__main__':
    run_cli(main)
