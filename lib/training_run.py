"""What train.py's loop leans on to be safe: its settings checked (parse_settings) and one run's files and guards (Run):

Run holds one run's files and every check that reads before the first write: the resume checkpoint and whether it fits
these settings and this data, the sizes against the machine's memory, out_dir. Then its checkpoints (train.py's
checkpoint(), written to a temporary file beside it and renamed, so a kill at any moment leaves the previous one whole;
lib/run_files.py reads them back), best.pt, metrics.csv, the one line for a resume that does not fit, and the guards
that turn Ctrl-C, running out of memory and a non-finite loss into a saved checkpoint or a line saying what is kept."""

import csv
import fcntl
import io
import math
import os
import shlex
from contextlib import ExitStack, contextmanager, suppress

from lib.atomic_files import atomic_torch_save, atomic_write_bytes, make_folder, remove_stale_temps
from lib.command_line import UserError, check_seed, ending, given_keys, parse_config, set_setting
from lib.hf_gpt2 import start_from_pretrained
from lib.device import ctrl_c_saves
from lib.memory import batch_memory_advice, check_memory, out_of_memory_is_user_error, out_of_memory_reason
from lib.optimizers import (ENDS_DECAY, KEPT_BY_THE_STATE, MUON_QKV, OPTIMIZERS, check_head_lr,
                            check_optimizer_args, check_same_optimizer)
from lib.prepared_data import where_held
from lib.run_files import BEST_FILE, load_checkpoint, read_metrics
from model import HEAD_INITS, MODEL_KEYS, TIE_MODES, GPTConfig

SWITCH = ('auto', 'true', 'false')
CHOICES = dict(tie_mode=TIE_MODES, head_init=HEAD_INITS, gelu_approx=('none', 'tanh'), compile=SWITCH,
               optimizer=OPTIMIZERS, muon_qkv=MUON_QKV, ends_decay=ENDS_DECAY, pad_vocab=SWITCH)


def parse_settings(argv, defaults, extra_choices=None):
    """train.py's settings from argv, every value checked: a bad one is a UserError naming it."""
    choices = dict(CHOICES, **(extra_choices or {}))
    switches = [key for key, allowed in choices.items() if allowed == SWITCH]
    for key in switches:  # auto/true/false switches also take the spellings of a boolean
        choices[key] = choices[key] + ('True', 'False', '1', '0')
    cfg = parse_config(defaults, argv, choices)
    for key in switches:
        cfg[key] = {'True': 'true', '1': 'true', 'False': 'false', '0': 'false'}.get(cfg[key], cfg[key])
    return check_settings(cfg)


def check_settings(cfg):
    """The checks every setting passes, typed or a checkpoint's (resume_settings)."""
    for keys, allows, must in (
            (('batch_size', 'block_size', 'gradient_accumulation_steps', 'eval_interval', 'eval_iters', 'log_interval'),
             lambda v: v >= 1, 'a positive integer'), (('max_iters', 'warmup_iters'), lambda v: v >= 0, 'zero or more'),
            (('learning_rate', 'min_lr', 'weight_decay', 'grad_clip'), lambda v: 0 <= v < math.inf,  # nan fails it too
             'a finite number, zero or more'),
            (('beta1', 'beta2'), lambda v: 0 <= v < 1, 'at least 0 and below 1')):  # AdamW's moment decays
        for key in keys:
            if not allows(cfg[key]):
                raise UserError(f"--{key} must be {must}, got {cfg[key]}")
    check_optimizer_args(cfg)
    check_seed(cfg['seed'])
    check_seed(cfg['eval_seed'], 'eval_seed')
    for key in ('vocab_size', 'lr_decay_iters'):  # None defaults: any literal gets this far
        if cfg[key] is not None and (not isinstance(cfg[key], int) or cfg[key] < 1):
            raise UserError(f"--{key} must be a positive integer or None, got {cfg[key]!r}")
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
    return (f"torch.compile failed here ({type(e).__name__}: {str(e).strip().splitlines()[0][:120]})"
            if type(e).__module__.startswith(('torch._dynamo', 'torch._inductor')) else None)


# The two keys of the line that Ctrl-C prints to resume: every other one is the checkpoint's unless given.
LOCAL_KEYS = ('init_from', 'out_dir')
# What the checkpoint's weights, optimizer state and data order were made with: a resume cannot change them.
FIXED_KEYS = {**{key: "its weights' shape" for key in MODEL_KEYS}, 'dataset': 'its data', 'seed': 'its draws',
              **{key: 'its optimizer state' for key in ('optimizer', *KEPT_BY_THE_STATE)}}


def resume_settings(cfg, defaults):
    """A resume continues the run it resumes, by one rule: every setting not given on its command line is the
    checkpoint's (so `--init_from=resume --out_dir=X`, the line Ctrl-C prints, trains on exactly as the run would
    have), bar LOCAL_KEYS; a given one that differs is said in a `resume:` line, or refused in one where the
    checkpoint holds it (FIXED_KEYS). Runs before anything else of train(): the device and dtype come from it too.
    Returns (the settings, the checkpoint on the CPU, or None when not resuming)."""
    cfg = cfg.copy()
    if cfg['init_from'] != 'resume':
        return cfg, None
    path = os.path.join(cfg['out_dir'], 'ckpt.pt')
    ckpt = load_checkpoint(path, 'cpu')
    check_same_optimizer(ckpt, path)
    given, saved = given_keys(cfg, defaults), dict(ckpt['config'], **ckpt['model_args'])
    for key in defaults:
        if key in LOCAL_KEYS or key not in saved:  # not saved: a key newer than the checkpoint, at its default
            continue
        if key not in given or cfg[key] == saved[key]:  # checked as a typed one is, here and below
            set_setting(cfg, key, saved[key], defaults, CHOICES, f"{key} in the checkpoint {path}")
        elif key in FIXED_KEYS:
            raise UserError(f"--{key}={cfg[key]} disagrees with the checkpoint {path}, made with {key}={saved[key]}, "
                            f"which {FIXED_KEYS[key]} keeps; resume with --{key}={saved[key]} or without the option, "
                            f"or start a new --out_dir")
        elif os.environ.get('RANK', '0') == '0':
            print(f"resume: --{key}={cfg[key]} from here on (the checkpoint was made with {key}={saved[key]})")
    try:
        return check_settings(cfg), ckpt
    except UserError as e:
        raise UserError(f"checkpoint {path}: {e}") from None


DATA_IDENTITY = ('source_sha256', 'source_bytes', 'train_tokens', 'val_tokens')  # meta.json's record of the text


def check_same_data(saved, meta, path, data_dir):
    """A resume trains on the data it was trained on: the same token ids, which mean something only under the
    tokenizer (and, for characters, the character list) they were made with, and the same text (meta.json's hash and
    sizes, where the checkpoint's meta has them)."""
    # bpe_ids: two compact GPT-2 vocabularies of one size may still number different tokens.
    if (saved.get('tokenizer'), saved.get('vocab_size'), saved.get('chars'), saved.get('bpe_ids')) != \
            (meta.get('tokenizer'), meta.get('vocab_size'), meta.get('chars'), meta.get('bpe_ids')):
        detail = ''
        if saved.get('tokenizer') == meta.get('tokenizer') == 'char':
            only_saved = [c for c in saved['chars'] if c not in meta['chars']]
            only_data = [c for c in meta['chars'] if c not in saved['chars']]
            detail = (f"; characters only in the checkpoint: {''.join(only_saved)[:20]!r}, "
                      f"only in the data: {''.join(only_data)[:20]!r}")
        raise UserError(f"checkpoint {path} was trained on dataset {saved.get('dataset')!r} "
                        f"({saved.get('tokenizer')}, vocab {saved.get('vocab_size')}) but {data_dir} has another "
                        f"vocabulary ({meta.get('tokenizer')}, vocab {meta.get('vocab_size')}){detail}; resume on "
                        f"the data it was trained on, or train this data from scratch in a new --out_dir")
    if changed := [key for key in DATA_IDENTITY if key in saved and saved[key] != meta.get(key)]:
        raise UserError(f"checkpoint {path} was trained on another text than {data_dir} now holds ({changed[0]} "
                        f"{saved[changed[0]]} then, {meta.get(changed[0])} now): it was prepared again; resume on "
                        f"the data it was trained on, or train this data from scratch in a new --out_dir")


def param_breakdown(model):
    """Where the parameters are, as {part: count}; the parts add up to num_params()."""
    head_extra = [p for name, p in model.named_parameters()
                  if name.startswith(('lm_head', 'tie_proj', 'bert_', 'output_bias', 'pit.'))]
    return {'token_embedding (= head when tied)': model.token_embedding_table.weight.numel(),
            'position_embedding': model.position_embedding_table.weight.numel(),
            'blocks': sum(p.numel() for p in model.blocks.parameters()),
            'final_norm': sum(p.numel() for p in model.ln_f.parameters()),
            'head_extra': sum(p.numel() for p in head_extra)}


BEST_KEYS = ('model', 'model_args', 'meta', 'head_untied')  # what best.pt keeps of a checkpoint: a model to build
METRICS_FIELDS = ('iter', 'step_loss', 'train_loss', 'val_loss', 'lr', 'tokens_per_sec', 'elapsed_s',
                  'data_fingerprint', 'copy_prob', 'repeat_rate', 'self_margin', 'grad_norm', 'grad_in', 'grad_out')


class Diverged(UserError):
    """A non-finite loss stopped the run at `iteration`: for train.py an error; for ablate.py, in a grid whose rows
    sweep the rates, a result (that rate was too high for that row)."""

    def __init__(self, message, iteration):
        super().__init__(message)
        self.iteration = iteration


class Run:
    """One training run's files and checks (see the module's docstring). Made before the model: every check that reads
    comes before the first write, so a mistake leaves out_dir as it was. cfg is completed in place: a resume takes the
    checkpoint's model keys, a pretrained start GPT-2's shape, vocab_size the data's. Only the master process writes."""

    resume_settings = staticmethod(resume_settings)  # train() calls it first: the device and dtype come from it

    def __init__(self, cfg, defaults, meta, proc, ckpt=None):
        self.cfg, self.meta, self.proc, self.writes = cfg, meta, proc, proc.master
        self.ckpt_path, self.best_path, self.metrics_path = (os.path.join(cfg['out_dir'], name)
                                                             for name in ('ckpt.pt', BEST_FILE, 'metrics.csv'))
        self.saved_iter = None   # the iteration of the checkpoint on disk that this run wrote or resumed from
        self._file = self._writer = None  # metrics.csv, opened at the first row logged
        self.ckpt, self.pretrained = ckpt, None  # the resume's checkpoint (resume_settings has read it)
        if ckpt is not None:
            check_same_data(ckpt['meta'], meta, self.ckpt_path, os.path.join(cfg['data_dir'], cfg['dataset']))
            untie_iter = cfg['untie_at'] and round(cfg['untie_at'] * cfg['max_iters'])
            if untie_iter is not None and untie_iter < ckpt['iter_num'] and not ckpt.get('head_untied'):
                raise UserError(f"--untie_at={cfg['untie_at']} of --max_iters={cfg['max_iters']} unties at iteration "
                                f"{untie_iter}, before {ckpt['iter_num']}, where {self.ckpt_path} resumes still tied; "
                                f"choose a later --untie_at or a longer --max_iters")
            if (saved := ckpt.get('world_size', 1)) != proc.world_size and proc.master:
                print(f"resume: {proc.world_size} process(es) from here on (the checkpoint was made by {saved}); "
                      f"each step reads the same windows, shared out among them")
        elif cfg['init_from'] != 'scratch':  # GPT-2's weights; cfg's model keys become its shape
            self.pretrained = start_from_pretrained(cfg, defaults, meta)
        if cfg['vocab_size'] is None:
            cfg['vocab_size'] = meta['vocab_size']
        if cfg['vocab_size'] < meta['vocab_size']:
            raise UserError(f"--vocab_size={cfg['vocab_size']} is smaller than the vocabulary of the prepared data "
                            f"({meta['vocab_size']} in {cfg['data_dir']}/{cfg['dataset']}); leave it unset or use "
                            f">= {meta['vocab_size']} (padding, e.g. 50304 for GPT-2)")
        # --untie_at needs a matrix to untie: plain tying or small_init (after a resume, the checkpoint's mode),
        # a plain shared matrix, nothing in between
        if cfg['untie_at'] is not None and cfg['tie_mode'] not in (modes := ('tied', 'small_init')):
            raise UserError(f"--untie_at unties the shared matrix, so it needs --tie_mode={' or '.join(modes)}, "
                            f"got --tie_mode={cfg['tie_mode']}")
        check_head_lr(cfg)
        self.model_config = make_model_config(cfg)
        check_memory(self.model_config, cfg, proc.device, proc.dtype)
        if self.writes:  # out_dir made (or a one-line failure before anything is written), temps of killed saves gone
            self._prepare_out_dir()
        self.untied_by_untie_at = bool(self.ckpt and self.ckpt.get('head_untied'))  # two matrices to load
        self.resumed_at = self.saved_iter = self.ckpt['iter_num'] if self.ckpt else None
        self.checkpoint = None  # train.py's checkpoint(iter_num, best_val_loss, fingerprint): what save() writes

    def _prepare_out_dir(self):
        out_dir = self.cfg['out_dir']
        make_folder(out_dir, '--out_dir')  # made if missing; a file in the way is one line
        lock = os.open(out_dir, os.O_RDONLY)  # held until the run ends: one train.py writes an out_dir at a time
        self.proc.on_exit(os.close, lock)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UserError(f"--out_dir={out_dir} is in use by another train.py; wait for it to end, or choose "
                            f"another --out_dir") from None
        found = [os.path.basename(p) for p in (self.ckpt_path, self.best_path, self.metrics_path) if os.path.lexists(p)]
        if found and self.ckpt is None:  # a fresh start never replaces another run's files
            raise UserError(f"--out_dir={out_dir} holds an earlier run's {', '.join(found)}: resume it with "
                            f"--init_from=resume, or start afresh with another --out_dir (or after moving those away)")
        probe = os.path.join(out_dir, f'.write-test-{os.getpid()}')
        try:
            with open(probe, 'w') as f:
                f.write('ok')
        except OSError as e:
            raise UserError(f"cannot write to --out_dir={out_dir}: {e.strerror}; choose a writable folder") from None
        finally:  # made and then refused (a full disk): not left behind
            with suppress(OSError):
                os.remove(probe)
        for path in (self.ckpt_path, self.best_path, self.metrics_path):  # partial files of runs killed while saving
            remove_stale_temps(path)

    def kept(self):
        """What is safe on disk, for the end of an error message."""
        return ("no checkpoint of this run was saved yet" if self.saved_iter is None else
                f"the checkpoint of iteration {self.saved_iter} in {self.ckpt_path} is kept")

    def building(self):
        """The model and its optimizer are made inside this: a device too small for them is one line."""
        cfg = self.cfg
        return out_of_memory_is_user_error(
            f"building the model (n_layer={cfg['n_layer']}, n_embd={cfg['n_embd']}, vocab_size={cfg['vocab_size']}) "
            f"on {self.proc.device}; use a smaller --n_layer or --n_embd, or free memory on {self.proc.device}")

    @contextmanager
    def restoring(self):
        """train.py's restore() of a resume runs inside this: a checkpoint that does not fit this model, or a device
        too full for its optimizer state, is one line. The checkpoint's memory is freed after."""
        path, device = self.ckpt_path, self.proc.device
        try:
            yield
        except (RuntimeError, ValueError, KeyError, TypeError) as e:  # TypeError: a generator state edited by hand
            if out_of_memory_reason(e):  # the optimizer's state, on a device that is full
                raise UserError(f"out of memory ({out_of_memory_reason(e)}) loading {path} onto {device}; "
                                f"free memory on {device}, or use another --device") from None
            reason = str(e).strip().split('\n')[0]
            raise UserError(f"checkpoint {path} does not fit the model of this model.py ({reason[:150]}); "
                            f"it was written by another version: start a new --out_dir") from None
        finally:
            self.ckpt = None

    def print_header(self, splits, model, tokens_per_iter):
        cfg, meta, proc, config = self.cfg, self.meta, self.proc, model.config
        breakdown = ', '.join(f'{k} {v:,}' for k, v in param_breakdown(model).items())
        print(f"dataset {cfg['dataset']} ({meta.get('tokenizer')}, vocab {meta['vocab_size']}; "
              f"source: {meta.get('source', 'unknown')}), "
              f"{len(splits['train']):,} train / {len(splits['val']):,} val tokens, {where_held(splits)}")
        print(f"model: tie_mode={cfg['tie_mode']}, {model.num_params():,} parameters ({breakdown})")
        padded = -(-config.vocab_size // config.pad_vocab_to) * config.pad_vocab_to
        print(f"device {proc.device}, dtype {proc.dtype}, compile {proc.compile}, {proc.world_size} process(es), "
              f"{tokens_per_iter:,} tokens per iteration"
              + (f" ({tokens_per_iter // proc.world_size:,} a process: tokens/s and MFU below are a process's, "
                 f"one GPU's)" if proc.world_size > 1 else '')
              + (f", the head's matmul padded to {padded:,} rows" if padded != config.vocab_size else ''))

    @contextmanager
    def guarded(self, iteration):
        """The loop runs inside this; iteration() is the one it is at. Ctrl-C sets the flag this yields (the loop
        saves, then stops); running out of memory is one line, and so is a non-finite loss (Diverged, with what to
        try); metrics.csv is closed whatever happens. A checkpoint is only ever replaced whole, so whatever stops the
        run, the last one is kept."""
        first = iteration()
        with ExitStack() as stack:
            stack.callback(self._close_metrics)
            interrupted = stack.enter_context(ctrl_c_saves(self.proc, self))
            stack.enter_context(out_of_memory_is_user_error(message=lambda reason: (
                f"out of memory on {self.proc.device} ({reason}) at iteration {iteration()} with "
                f"{batch_memory_advice(self.cfg)}; {self.kept()}")))
            try:
                yield interrupted
            except FloatingPointError as e:  # train.training_step's non-finite loss, the step not taken: its value
                raise self.non_finite('loss', e.args[0], iteration()) from None
            except Exception as e:  # the first compiled step builds the kernels: a failure there is one line
                if self.proc.compile and iteration() == first and (reason := compile_failure(e)):
                    raise UserError(f"{reason}; use --compile=false") from None
                raise

    def evaluated(self, iter_num, losses, best_val_loss, fingerprint):
        """After an evaluation: refuse broken weights, keep the best ones in best.pt, save the checkpoint.
        Returns the best validation loss so far."""
        if bad := [v for v in losses.values() if not math.isfinite(v)]:  # the weights are broken: never save them
            raise self.non_finite('evaluation loss', bad[0], iter_num)
        # The best point so far, kept beside the last (best.pt), so that "at the best point" can be scored later on
        # the whole validation split (lab/run_results.py); not the resumed iteration's, saved before.
        if self.writes and 0 < iter_num != self.saved_iter and losses['val'] < best_val_loss:
            def weights():  # the checkpoint's model part, without the optimizer: a third of the size
                state = self.checkpoint(iter_num, best_val_loss, fingerprint)
                return dict({key: state[key] for key in BEST_KEYS}, iter_num=iter_num,
                            val_loss=losses['val'])  # on the eval_iters fixed batches
            self._write(self.best_path, 'the best weights', iter_num, weights)
        best_val_loss = min(best_val_loss, losses['val'])
        if iter_num > 0:
            self.save(iter_num, best_val_loss, fingerprint)
        return best_val_loss

    def save(self, iter_num, best_val_loss, fingerprint):
        """Write the checkpoint of iter_num, everything an exact resume needs."""
        if not self.writes or iter_num == self.saved_iter:  # on disk: the resumed iteration, or Ctrl-C after a save
            return
        self._write(self.ckpt_path, 'the checkpoint', iter_num, lambda: self.checkpoint(iter_num, best_val_loss,
                                                                                         fingerprint))
        self.saved_iter = iter_num

    def _write(self, path, what, iter_num, state):
        """Save state() to path atomically; state() builds the contents only when needed."""
        try:
            atomic_torch_save(state(), path)
        except OSError as e:  # disk full, quota, folder removed: the temp file is gone, the old file whole
            raise UserError(f"cannot save {what} of iteration {iter_num} to {path}: {e.strerror or e}; "
                            f"{self.kept()}. Free some space (or choose another --out_dir), then continue with "
                            f"--init_from=resume") from None

    def _start_metrics(self):
        """Start metrics.csv at the first row logged (after the first training step). On resume, rows logged after
        the checkpoint are dropped then, since those iterations are trained again; until that first row the file
        is left as it was, so a run that stops before it (out of memory, say) loses no row of the run before."""
        rows = []
        if self.resumed_at is not None and os.path.exists(self.metrics_path):
            try:
                rows = [r for r in read_metrics(self.metrics_path)
                        if r.get('iter', '').isdigit() and int(r['iter']) < self.resumed_at]
            except (OSError, UnicodeDecodeError, csv.Error) as e:  # edited by hand, or a folder: not ours to guess
                raise UserError(f"cannot read {self.metrics_path} to keep its rows before iteration "
                                f"{self.resumed_at} ({e}); move it aside and resume again: a new one starts") from None
        text = io.StringIO()
        writer = csv.DictWriter(text, fieldnames=METRICS_FIELDS)
        writer.writeheader()
        writer.writerows(rows)
        try:
            # Atomically: a kill at this moment must not lose the rows of the run so far.
            atomic_write_bytes(self.metrics_path, text.getvalue().encode())
            self._file = open(self.metrics_path, 'a', newline='')
        except OSError as e:
            raise UserError(f"cannot write {self.metrics_path}: {e.strerror or e}; free some space or choose "
                            f"another --out_dir") from None
        self._writer = csv.DictWriter(self._file, fieldnames=METRICS_FIELDS)

    def log(self, row, iter_num, lr, tokens_per_sec, elapsed_s, fingerprint):
        """Append one row to metrics.csv, flushed, so a kill loses at most the row being written."""
        if not self.writes:
            return
        if self._writer is None:  # the first row of this run
            self._start_metrics()
        try:
            self._writer.writerow(dict(row, iter=iter_num, lr=f'{lr:.6g}', tokens_per_sec=f'{tokens_per_sec:.0f}',
                                       elapsed_s=f'{elapsed_s:.2f}', data_fingerprint=f'{fingerprint:08x}'))
            self._file.flush()
        except OSError as e:  # disk full, or out_dir removed under us
            out_dir = self.cfg['out_dir']
            raise UserError(f"cannot write to --out_dir={out_dir}: {e.strerror or e}; {self.kept()}") from None

    def _close_metrics(self):
        if self._file is not None:
            with suppress(OSError):  # on a full disk, closing fails too; the error raised already says it
                self._file.close()

    def non_finite(self, what, value, iter_num):  # the Diverged error to raise
        cfg, dtype = self.cfg, self.proc.dtype
        hints = [hint for applies, hint in ((True, f"a lower --learning_rate (now {cfg['learning_rate']:g})"),
                                            (cfg['tie_mode'] == 'tied', "a --tie_mode other than 'tied' (see README)"),
                                            (dtype != 'float32', f"--dtype=float32 (now {dtype})"),
                                            (cfg['grad_clip'] == 0, "--grad_clip=1.0")) if applies]
        return Diverged(f"{what} is {value} at iteration {iter_num}; training stopped and {self.kept()}. "
                        f"Try {' or '.join(hints)}", iter_num)

    def interrupted_at(self, iter_num, best_val_loss, fingerprint):
        """Ctrl-C: the checkpoint of where the loop stopped, then the line that says how to go on."""
        self.save(iter_num, best_val_loss, fingerprint)
        if self.proc.cpu_group is not None:  # every rank waits for rank 0's save: torchrun ends them all at one's exit
            import torch.distributed as dist
            dist.barrier(group=self.proc.cpu_group)
        ending()  # saved: a Ctrl-C from here on would only cut the exit short
        return KeyboardInterrupt(f"interrupted at iteration {iter_num}: checkpoint saved to {self.ckpt_path}; "
                                 f"continue with --init_from=resume {shlex.quote('--out_dir=' + self.cfg['out_dir'])}")

