"""A training run's files: out_dir/ckpt.pt (everything an exact resume needs, written whole) and
out_dir/metrics.csv (a row per logged iteration), with the checks a run makes before it writes them
and the one-line errors it can end with.

A checkpoint is written to a temporary file beside it, then renamed, so a kill at any moment
leaves the previous one intact. A resume first drops the metrics rows logged after its
checkpoint, since those iterations are trained again. Every failure to read or write these files
becomes one UserError that says what is kept and what to do.
"""

import csv
import io
import os
from contextlib import suppress

import torch

from lib.atomic_files import atomic_torch_save, atomic_write_bytes, make_folder, remove_stale_temps
from lib.command_line import UserError
from lib.machine import matrix_params, memory_shortfall, out_of_memory_reason
from model import GPT, GPTConfig


# The model settings a checkpoint records; a resume or sample.py builds the model from them.
MODEL_KEYS = ('vocab_size', 'block_size', 'n_layer', 'n_head', 'n_embd', 'dropout', 'bias', 'init_std',
              'tie_mode', 'emb_scale', 'zero_init_residual', 'shuffle_groups', 'gelu_approx', 'input_grad_scale')


# Model keys that checkpoints written before the key existed lack, with the value they were trained with.
LEGACY_MODEL_ARGS = dict(gelu_approx='none', input_grad_scale=1.0)


# What a resume (or sample.py) reads from a checkpoint; checkpoint_state writes these and more.
CHECKPOINT_KEYS = ('model', 'optimizer', 'model_args', 'iter_num', 'best_val_loss', 'rng', 'data_fingerprint', 'meta')
METRICS_FIELDS = ('iter', 'step_loss', 'train_loss', 'val_loss', 'lr', 'tokens_per_sec', 'elapsed_s',
                  'data_fingerprint', 'copy_prob', 'repeat_rate', 'self_margin', 'grad_norm', 'grad_in', 'grad_out')


def load_checkpoint(path, device):
    if not os.path.exists(path):
        raise UserError(f"--init_from=resume but there is no checkpoint at {path}; train from scratch first "
                        f"or point --out_dir at the run to resume")
    try:
        ckpt = torch.load(path, map_location=device, weights_only=True)
        for key, value in LEGACY_MODEL_ARGS.items():
            ckpt.get('model_args', {}).setdefault(key, value)
        missing = [key for key in CHECKPOINT_KEYS if key not in ckpt]
        missing += [f'model_args.{key}' for key in MODEL_KEYS if 'model_args' in ckpt and key not in ckpt['model_args']]
    except Exception as e:
        # A truncated or corrupted file fails in many ways inside the unzipper or the unpickler;
        # the first sentence of torch's message is the useful part, the rest is about other cases.
        reason = str(e).strip().split('\n')[0].split('. ')[0]
        reason = reason if len(reason) <= 100 else reason[:97] + '...'
        raise UserError(f"checkpoint {path} is unreadable, truncated or corrupted ({type(e).__name__}: {reason}); "
                        f"delete it to train from scratch, or restore a copy") from None
    if missing:
        raise UserError(f"checkpoint {path} lacks {', '.join(missing)}; it was not written by this train.py")
    return ckpt


def check_resume_compatible(ckpt, cfg, defaults, path):
    """Model keys the user set must agree with the checkpoint; keys left at their default take its values."""
    for key in MODEL_KEYS:
        saved = ckpt['model_args'][key]
        if cfg[key] != defaults[key] and cfg[key] != saved:
            raise UserError(f"--{key}={cfg[key]} disagrees with the checkpoint {path}, made with {key}={saved}; "
                            f"drop the option or start a new --out_dir")
        cfg[key] = saved


def check_same_vocabulary(saved, meta, path, data_dir):
    """A checkpoint's token ids mean something only under the tokenizer (and, for characters,
    the character list) it was trained with; resuming on other data must not reinterpret them."""
    # bpe_ids: two compact GPT-2 vocabularies of one size may still number different tokens.
    if (saved.get('tokenizer'), saved.get('vocab_size'), saved.get('chars'), saved.get('bpe_ids')) == \
            (meta.get('tokenizer'), meta.get('vocab_size'), meta.get('chars'), meta.get('bpe_ids')):
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


def model_state(raw_model, meta):
    """What any saved model needs to be built again (model_from_checkpoint): its weights and settings, the
    tokenizer, and whether --untie_at has split the shared matrix. ckpt.pt and best.pt both start from it."""
    return {
        'model': raw_model.state_dict(),          # both names of the shared matrix, one storage in the file
        'model_args': {k: getattr(raw_model.config, k) for k in MODEL_KEYS},
        'meta': meta,                              # the tokenizer, so sample.py needs no data folder
        'head_untied': raw_model.config.tie_mode != 'untied' and not raw_model.is_tied,  # --untie_at has run
    }


def checkpoint_state(raw_model, optimizer, cfg, iter_num, best_val_loss, data_generator, fingerprint, meta):
    return dict(
        model_state(raw_model, meta),
        optimizer=optimizer.state_dict(),
        config=dict(cfg),
        iter_num=iter_num,
        best_val_loss=best_val_loss,
        rng={'torch': torch.get_rng_state(), 'data': data_generator.get_state(),
             'cuda': torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []},
        data_fingerprint=fingerprint,
    )


# Beside ckpt.pt: the weights of the evaluation with the lowest validation loss, without the optimizer
# (a third of the size). model_from_checkpoint builds its model like a checkpoint's.
BEST_FILE = 'best.pt'


def best_state(raw_model, iter_num, val_loss, meta):
    return dict(model_state(raw_model, meta), iter_num=iter_num,
                val_loss=val_loss)                 # on the eval_iters fixed batches


def load_best(path):
    """The model of a best.pt (on the CPU), and the file's contents; a damaged file is a UserError."""
    try:
        saved = torch.load(path, map_location='cpu', weights_only=True)
        for key, value in LEGACY_MODEL_ARGS.items():
            saved['model_args'].setdefault(key, value)
    except Exception as e:
        raise UserError(f"{path} is unreadable, truncated or corrupted ({type(e).__name__}); delete it, or train "
                        f"the run again to have the best point") from None
    return model_from_checkpoint(saved, path), saved


def model_from_checkpoint(ckpt, path):
    """The trained model of a checkpoint (on the CPU; .to() it), tied or untied as it was saved.
    Settings that the weights (or this model.py) do not fit, from an edited checkpoint or another
    version, are a UserError naming the first misfit."""
    try:
        config = GPTConfig(**ckpt['model_args'])
        # Settings edited to a size the weights do not have would be built at that size before load_state_dict
        # could name the misfit: one the machine cannot hold is refused here, before anything is allocated.
        held = sum(t.numel() for t in ckpt['model'].values() if isinstance(t, torch.Tensor))
        asked = matrix_params(config)
        short = memory_shortfall(4 * asked, 'cpu') if asked > held else None
        if short:
            raise ValueError(f"its model_args ask for at least {asked:,} parameters, whose weights need {short}, "
                             f"but the file holds {held:,}")
        model = GPT(config)
        if ckpt.get('head_untied'):  # after --untie_at the file holds two matrices: load each into its own
            model.untie()
        model.load_state_dict(ckpt['model'])
    except (TypeError, ValueError, RuntimeError) as e:
        if out_of_memory_reason(e):
            raise
        reason = ' '.join(str(e).split()).removeprefix('Error(s) in loading state_dict for GPT: ')
        reason = reason if len(reason) <= 200 else reason[:197] + '...'
        raise UserError(f"checkpoint {path} does not fit the model of this model.py ({reason}); it was edited or "
                        f"written by another version") from None
    return model


def read_metrics(path):
    """The rows of a metrics.csv as dicts of strings."""
    with open(path, newline='') as f:
        return list(csv.DictReader(f))


class RunFiles:
    """out_dir's checkpoint and metrics file for one run. Only the master process writes."""

    def __init__(self, out_dir, writes=True):
        self.out_dir, self.writes = out_dir, writes
        self.ckpt_path = os.path.join(out_dir, 'ckpt.pt')
        self.best_path = os.path.join(out_dir, BEST_FILE)
        self.metrics_path = os.path.join(out_dir, 'metrics.csv')
        self.saved_iter = None   # the iteration of the checkpoint on disk that this run wrote or resumed from
        self._file = self._writer = None

    def kept(self):
        """What is safe on disk, for the end of an error message."""
        if self.saved_iter is None:
            return "no checkpoint of this run was saved yet"
        return f"the checkpoint of iteration {self.saved_iter} in {self.ckpt_path} is kept"

    def prepare(self):
        """Make out_dir (or fail before anything is written) and clear temp files of killed saves."""
        if not self.writes:
            return
        make_folder(self.out_dir, '--out_dir')  # made if missing; a file in the way is one line
        try:
            probe = os.path.join(self.out_dir, f'.write-test-{os.getpid()}')
            with open(probe, 'w') as f:
                f.write('ok')
            os.remove(probe)
        except OSError as e:
            raise UserError(f"cannot write to --out_dir={self.out_dir}: {e.strerror}; choose a writable folder") from None
        for path in (self.ckpt_path, self.best_path, self.metrics_path):  # partial files of runs killed while saving
            remove_stale_temps(path)

    def save(self, iter_num, state):
        """Write the checkpoint of iter_num atomically; state() builds its contents only when needed."""
        if not self.writes or iter_num == self.saved_iter:  # already on disk: the resumed iteration, or Ctrl-C right after a save
            return
        try:
            atomic_torch_save(state(), self.ckpt_path)
        except OSError as e:  # disk full, quota, folder removed: the temp file is gone, the old checkpoint whole
            raise UserError(f"cannot save the checkpoint of iteration {iter_num} to {self.ckpt_path}: "
                            f"{e.strerror or e}; {self.kept()}. Free some space (or choose another --out_dir), "
                            f"then continue with --init_from=resume") from None
        self.saved_iter = iter_num

    def save_best(self, iter_num, raw_model, val_loss, meta):
        """Keep the weights of the best evaluation so far in best.pt (atomically, like the checkpoint), so that
        "at the best point" can be scored later on the whole validation split (lab/run_results.py)."""
        if not self.writes:
            return
        try:
            atomic_torch_save(best_state(raw_model, iter_num, val_loss, meta), self.best_path)
        except OSError as e:
            raise UserError(f"cannot save the best weights of iteration {iter_num} to {self.best_path}: "
                            f"{e.strerror or e}; {self.kept()}. Free some space (or choose another --out_dir), "
                            f"then continue with --init_from=resume") from None

    def open_metrics(self, resume_from=None):
        """Start metrics.csv with the first row logged (after the first training step). On resume,
        rows logged after the checkpoint are dropped then, since those iterations are trained again;
        until that first row the file is left as it was, so a run that stops before it (out of
        memory, say) loses no row of the run before."""
        self._resume_from = resume_from

    def _start_metrics(self):
        rows = []
        if self._resume_from is not None and os.path.exists(self.metrics_path):
            with open(self.metrics_path, newline='') as f:
                rows = [r for r in csv.DictReader(f)
                        if r.get('iter', '').isdigit() and int(r['iter']) < self._resume_from]
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
            raise UserError(f"cannot write to --out_dir={self.out_dir}: {e.strerror or e}; {self.kept()}") from None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self._file is not None:
            with suppress(OSError):  # on a full disk, closing fails too; the error raised already says it
                self._file.close()


UNTIE_MODES = ('tied', 'small_init')  # the modes --untie_at accepts: a plain shared matrix, nothing in between


def check_untie_at(cfg):
    """--untie_at needs a matrix to untie: plain tying or small_init (after a resume, the checkpoint's mode)."""
    if cfg['untie_at'] is not None and cfg['tie_mode'] not in UNTIE_MODES:
        raise UserError(f"--untie_at unties the shared matrix, so it needs --tie_mode={' or '.join(UNTIE_MODES)}, "
                        f"got --tie_mode={cfg['tie_mode']}")


def non_finite_error(what, value, iter_num, cfg, dtype, files):
    hints = [f"a lower --learning_rate (now {cfg['learning_rate']:g})"]
    if cfg['tie_mode'] == 'tied':
        hints.append("a --tie_mode other than 'tied' (see README)")
    if dtype != 'float32':
        hints.append(f"--dtype=float32 (now {dtype})")
    if cfg['grad_clip'] == 0:
        hints.append("--grad_clip=1.0")
    return UserError(f"{what} is {value} at iteration {iter_num}; training stopped and {files.kept()}. "
                     f"Try {' or '.join(hints)}")


def check_vocab_size(cfg, meta):
    if cfg['vocab_size'] is None:
        cfg['vocab_size'] = meta['vocab_size']
    if cfg['vocab_size'] < meta['vocab_size']:
        raise UserError(f"--vocab_size={cfg['vocab_size']} is smaller than the vocabulary of the prepared data "
                        f"({meta['vocab_size']} in {cfg['data_dir']}/{cfg['dataset']}); leave it unset or use "
                        f">= {meta['vocab_size']} (padding, e.g. 50304 for GPT-2)")


def param_breakdown(model):
    """Where the parameters are, as {part: count}; the parts add up to num_params()."""
    head_extra = [p for name, p in model.named_parameters()
                  if name.startswith(('lm_head', 'tie_proj', 'bert_', 'output_bias', 'pit.'))]
    return {
        'token_embedding (= head when tied)': model.token_embedding_table.weight.numel(),
        'position_embedding': model.position_embedding_table.weight.numel(),
        'blocks': sum(p.numel() for p in model.blocks.parameters()),
        'final_norm': sum(p.numel() for p in model.ln_f.parameters()),
        'head_extra': sum(p.numel() for p in head_extra),
    }


def print_run_header(cfg, meta, splits, raw_model, device, dtype, use_compile, world_size, tokens_per_iter):
    breakdown = ', '.join(f'{k} {v:,}' for k, v in param_breakdown(raw_model).items())
    print(f"dataset {cfg['dataset']} ({meta.get('tokenizer')}, vocab {meta['vocab_size']}; "
          f"source: {meta.get('source', 'unknown')}), "
          f"{len(splits['train']):,} train / {len(splits['val']):,} val tokens")
    print(f"model: tie_mode={cfg['tie_mode']}, {raw_model.num_params():,} parameters ({breakdown})")
    padded = -(-raw_model.config.vocab_size // raw_model.config.pad_vocab_to) * raw_model.config.pad_vocab_to
    print(f"device {device}, dtype {dtype}, compile {use_compile}, {world_size} process(es), "
          f"{tokens_per_iter:,} tokens per iteration"
          + (f", the head's matmul padded to {padded:,} rows" if padded != raw_model.config.vocab_size else ''))
