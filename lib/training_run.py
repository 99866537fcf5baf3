"""What train.py's loop leans on to be safe, in two pieces it names once each:

parse_settings   the training settings of a command line (defaults, config files, --key=value) with every value
                 checked, so that a mistake is one line naming the key and what it allows.
Run              one run's files and every check that reads before the first write: the resume checkpoint and
                 whether it fits these settings and this data, the sizes against the machine's memory, out_dir.
                 Then its checkpoints (whole or not at all), best.pt, metrics.csv, the exact restore of a resume,
                 and the guards that turn Ctrl-C, running out of memory and a non-finite loss into a saved
                 checkpoint or one line that says what is kept.
"""

import math
import os
from contextlib import ExitStack, contextmanager

import torch

from lib.command_line import UserError, check_seed, parse_config
from lib.hf_gpt2 import start_from_pretrained
from lib.machine import (batch_memory_advice, check_memory, ctrl_c_saves, out_of_memory_is_user_error,
                         out_of_memory_reason)
from lib.optimizers import (ENDS_DECAY, MUON_QKV, OPTIMIZERS, check_head_lr, check_optimizer_args,
                            check_same_optimizer, resume_rates)
from lib.run_files import (MODEL_KEYS, RunFiles, check_resume_compatible, check_same_vocabulary, check_untie_at,
                           check_vocab_size, checkpoint_state, load_checkpoint, non_finite_error, print_run_header)
from model import TIE_MODES, GPTConfig

SWITCH = ('auto', 'true', 'false')
CHOICES = dict(tie_mode=TIE_MODES, gelu_approx=('none', 'tanh'), compile=SWITCH, optimizer=OPTIMIZERS,
               muon_qkv=MUON_QKV, ends_decay=ENDS_DECAY, pad_vocab=SWITCH)


def parse_settings(argv, defaults, extra_choices=None):
    """train.py's settings from argv, every value checked: a bad one is a UserError naming it."""
    choices = dict(CHOICES, **(extra_choices or {}))
    switches = [key for key, allowed in choices.items() if allowed == SWITCH]
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


def make_model_config(cfg):
    """The GPTConfig of a run's settings; its checks become one-line user errors."""
    try:
        return GPTConfig(**{k: cfg[k] for k in MODEL_KEYS})
    except ValueError as e:
        raise UserError(str(e)) from None


def compile_failure(e):
    """One line on e if torch.compile raised it while building its kernels (no C++ compiler on a CPU,
    no Triton on a GPU, ...), else None: any other error is not a compile problem."""
    if not type(e).__module__.startswith(('torch._dynamo', 'torch._inductor')):
        return None
    return f"torch.compile failed here ({type(e).__name__}: {str(e).strip().splitlines()[0][:120]})"


class Run:
    """One training run's files and checks (see the module's docstring). Made before the model: every check that
    reads comes before the first write, so a mistake leaves out_dir as it was. cfg is completed in place: a resume
    takes the checkpoint's model keys, a pretrained start GPT-2's shape, vocab_size the data's."""

    def __init__(self, cfg, defaults, meta, proc):
        self.cfg, self.meta, self.proc = cfg, meta, proc
        self.files = RunFiles(cfg['out_dir'], writes=proc.master)
        self.ckpt = self.pretrained = None
        if cfg['init_from'] == 'resume':
            self.ckpt = load_checkpoint(self.files.ckpt_path, proc.device)
            check_resume_compatible(self.ckpt, cfg, defaults, self.files.ckpt_path)
            check_same_vocabulary(self.ckpt['meta'], meta, self.files.ckpt_path,
                                  os.path.join(cfg['data_dir'], cfg['dataset']))
            check_same_optimizer(self.ckpt.get('config', {}), cfg, self.files.ckpt_path)
            for line in resume_rates(self.ckpt.get('config', {}), cfg, defaults, self.files.ckpt_path):
                if proc.master:
                    print(line)
        elif cfg['init_from'] != 'scratch':  # GPT-2's weights; cfg's model keys become its shape
            self.pretrained = start_from_pretrained(cfg, defaults, meta)
        check_vocab_size(cfg, meta)
        check_untie_at(cfg)
        check_head_lr(cfg)
        self.model_config = make_model_config(cfg)
        check_memory(self.model_config, cfg, proc.device, proc.dtype)
        self.files.prepare()
        self.untied_by_untie_at = bool(self.ckpt and self.ckpt.get('head_untied'))  # two matrices to load
        self.resumed_at = self.ckpt['iter_num'] if self.ckpt else None

    def building(self):
        """The model and its optimizer are made inside this: a device too small for them is one line."""
        cfg = self.cfg
        return out_of_memory_is_user_error(
            f"building the model (n_layer={cfg['n_layer']}, n_embd={cfg['n_embd']}, vocab_size={cfg['vocab_size']}) "
            f"on {self.proc.device}; use a smaller --n_layer or --n_embd, or free memory on {self.proc.device}")

    def restore(self, model, optimizer, data_generator):
        """(iter_num, best_val_loss, data fingerprint): a fresh run's (0, inf, 0), or a resume's, with the weights,
        the optimizer's state and every random generator exactly as the checkpoint left them."""
        self.model, self.optimizer, self.data_generator = model, optimizer, data_generator
        ckpt, path, device = self.ckpt, self.files.ckpt_path, self.proc.device
        self.ckpt = None  # free its memory once loaded
        self.files.saved_iter = self.resumed_at
        if ckpt is None:
            return 0, float('inf'), 0
        try:
            model.load_state_dict(ckpt['model'])  # copies into the existing Parameters: the tie survives
            optimizer.load_state_dict(ckpt['optimizer'], model)
        except (RuntimeError, ValueError, KeyError) as e:
            if out_of_memory_reason(e):  # the optimizer's state, on a device that is full
                raise UserError(f"out of memory ({out_of_memory_reason(e)}) loading {path} onto {device}; "
                                f"free memory on {device}, or use another --device") from None
            reason = str(e).strip().split('\n')[0]
            raise UserError(f"checkpoint {path} does not fit the model of this model.py ({reason[:150]}); "
                            f"it was written by another version: start a new --out_dir") from None
        torch.set_rng_state(ckpt['rng']['torch'].cpu())
        data_generator.set_state(ckpt['rng']['data'].cpu())
        if device.startswith('cuda') and ckpt['rng']['cuda']:
            torch.cuda.set_rng_state_all([s.cpu() for s in ckpt['rng']['cuda']])
        return ckpt['iter_num'], ckpt['best_val_loss'], ckpt['data_fingerprint']

    def print_header(self, splits, model, tokens_per_iter):
        proc = self.proc
        print_run_header(self.cfg, self.meta, splits, model, proc.device, proc.dtype, proc.compile, proc.world_size,
                         tokens_per_iter)

    @contextmanager
    def guarded(self, iteration):
        """The loop runs inside this; iteration() is the one it is at. Ctrl-C sets the flag this yields (the loop
        saves, then stops); running out of memory is one line; metrics.csv is closed whatever happens. A
        checkpoint is only ever replaced whole, so whatever stops the run, the last one is kept."""
        cfg, files, first = self.cfg, self.files, iteration()
        self.files.open_metrics(resume_from=self.resumed_at)
        with ExitStack() as stack:
            stack.enter_context(files)
            interrupted = stack.enter_context(ctrl_c_saves(self.proc, files))
            stack.enter_context(out_of_memory_is_user_error(message=lambda reason: (
                f"out of memory on {self.proc.device} ({reason}) at iteration {iteration()} with "
                f"{batch_memory_advice(cfg)}; {files.kept()}")))
            try:
                yield interrupted
            except Exception as e:  # the first compiled step builds the kernels: a failure there is one line
                if self.proc.compile and iteration() == first and (reason := compile_failure(e)):
                    raise UserError(f"{reason}; use --compile=false") from None
                raise

    def evaluated(self, iter_num, losses, best_val_loss, fingerprint):
        """After an evaluation: refuse broken weights, keep the best ones in best.pt, save the checkpoint.
        Returns the best validation loss so far."""
        bad = [v for v in losses.values() if not math.isfinite(v)]
        if bad:  # the weights are already broken: never save them
            raise self.non_finite('evaluation loss', bad[0], iter_num)
        # The best point so far, kept beside the last (best.pt); not the resumed iteration's, saved before.
        if 0 < iter_num != self.files.saved_iter and losses['val'] < best_val_loss:
            self.files.save_best(iter_num, self.model, losses['val'], self.meta)
        best_val_loss = min(best_val_loss, losses['val'])
        if iter_num > 0:
            self.save(iter_num, best_val_loss, fingerprint)
        return best_val_loss

    def save(self, iter_num, best_val_loss, fingerprint):
        self.files.save(iter_num, lambda: checkpoint_state(self.model, self.optimizer, self.cfg, iter_num,
                                                           best_val_loss, self.data_generator, fingerprint,
                                                           self.meta))

    def log(self, row, iter_num, lr, tokens_per_sec, elapsed_s, fingerprint):
        self.files.log(row, iter_num, lr, tokens_per_sec, elapsed_s, fingerprint)

    def non_finite(self, what, value, iter_num):
        return non_finite_error(what, value, iter_num, self.cfg, self.proc.dtype, self.files)

    def interrupted_at(self, iter_num, best_val_loss, fingerprint):
        """Ctrl-C: the checkpoint of where the loop stopped, then the line that says how to go on."""
        self.save(iter_num, best_val_loss, fingerprint)
        return KeyboardInterrupt(f"interrupted at iteration {iter_num}: checkpoint saved to {self.files.ckpt_path}; "
                                 f"continue with --init_from=resume --out_dir={self.cfg['out_dir']}")
