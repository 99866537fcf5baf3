"""The tie-mode ablation: train every --tie_mode with the same data order, seed, schedule and budget, several runs side
by side, and compare their losses, curves and copy probes. One more row is no tie mode of its own: tied_untie, "tied,
untied at 2/3", trains with --tie_mode=tied until iteration round(untie_at * max_iters) and with a head of its own after
(train.py --untie_at; ablate.py's --untie_at, 2/3 by default, sets that row's fraction and no other run's).

    python ablate.py                                   # experiment 1: train.py's small char-level model, every mode
    python ablate.py config/ablate_char.py             # the same sized for a 2-core CPU (3 seeds, fewer iterations)
    python ablate.py config/ablate_bpe.py --zero_init_residual=true --out_dir=out-ablation-bpe-zero
    python ablate.py --modes=tied,untied,shuffle --seeds=3
    python ablate.py --modes=tied,tied_untie --untie_at=0.5   # untie halfway instead of at 2/3
    python ablate.py --quick                           # smoke test: a tiny model, seconds per mode
    python ablate.py config/ablate_char.py --jobs=1    # one run after another, in this process
    python ablate.py config/ablate_char_sigma.py --versus=out-ablation-char-sigma-noscale  # + this minus that
    python ablate.py --plot_runs=out-tied,out --plot=first_run.png   # no ablation: train.py runs drawn side by side

Every train.py key is accepted and given to every run, except tie_mode (use --modes) and init_from (ablate.py decides
it). Each run is train.train itself, the loop of train.py, in out_dir/<mode>-seed<seed>/. The data order depends only on
the seed, so for one seed every mode sees the same batches; every run is evaluated on the same fixed batches, whatever
its seed (train.py --eval_seed), and the summary scores each run's best.pt on the whole validation split: "at the best
point" compares seeds.

The tied_untie row asks whether a late untie, the recipe of the GPT-2 speed-run record (model.GPT.untie), keeps what
tying gives early and frees the head for the end. It is the `tied` run of the same seed, batch for batch, up to the
untie, so the two rows differ only by what happens after it.

Side by side: --jobs runs at a time (default: one per CPU core), each in a worker process with its share of the cores as
torch threads, under one progress bar (runs and iterations done, elapsed, time left) and a line per finished run; what a
run prints goes to its own out_dir/<mode>-seed<seed>/train.log. A run is trained by one process only: the one holding
the lock on its .claim file, so two ablate.py commands on one out_dir share the runs, and one never resumes a run that
the other is training: it waits for it. A run that fails is named with its log's last line, the others go on, and the
summary waits for a re-run that completes them.

Stopping and starting again: a finished run leaves result.json (with the settings it was made with) and is skipped when
the command is run again; an interrupted run continues from its last checkpoint; a run made with different settings
stops the ablation with an error, before anything is trained, instead of mixing results. Ctrl-C stops every running run
after it saves a checkpoint (a second Ctrl-C stops them at once), so re-running the same command loses at most one
eval_interval.

Writes to out_dir:
    ablation.csv      every logged iteration of every run (mode, seed, iter, losses, lr, tokens/s, fingerprint,
                      and train.py's copy probe: copy_prob, repeat_rate, self_margin, grad_norm)
    summary.md        one row per mode: parameters, initial loss next to the predicted one and log n, loss after 1 %,
                      10 % and 100 % of the budget, validation loss, copy_prob at the start and the end and the
                      iteration by which the copying start is unlearned, the best val loss's iteration, val minus
                      train loss at the end, grad_norm and loss spikes, tokens/s; and a second table: val loss by
                      how often the target token occurs in train.bin
    summary.json      the same numbers, per seed and as mean and std over seeds
    <mode>-seed<seed>/train.log   what the run printed (its first line names the process that trained it)
    <mode>-seed<seed>/freq_buckets.json   the frequency-bucket evaluation of that run's final checkpoint, made by
                      its worker as the run ends (side by side, like the training) and reused while the checkpoint
                      is unchanged; freq_buckets_best.json the same for its best.pt (the weights at its lowest val loss)
    loss_curves.png   every mode on one figure: the whole run, the second half zoomed in, and copy_prob
                      against the text's own repeat rate (needs matplotlib)
    grad_sources.png  grad_out / grad_in over training, every mode: which end feeds the token matrix

Rows besides the tie modes: tied_untie (above), and a mode (or tied_untie) with settings of its own after it: _igsK,
its token lookup's gradient scaled by K (train.py --input_grad_scale=K), _eX, its token table's rate X times
learning_rate (--embed_lr), _hY, an untied head's (or pit's S's) rate (--head_lr); e.g. --modes=untied,tied,tied_igs2
or a rate sweep, --modes=untied_e10_h0.3,untied_e3_h1,tied_e3 (the summary then draws rate_sweep.png).
--tuned_lens=ROWS (or all) has each of those rows' workers put its final checkpoint through the tuned lens
(lab/tuned_lens.py, about a minute and a half a run) as it ends: a per-layer table and tuned_lens.png.

"Unlearned copy by" is the first evaluated iteration at which copy_prob (the probability the model gives to "the next
token is this token") is below twice repeat_rate (how often the validation text really repeats its token, what a
calibrated model would give): from there on the model copies no more than the text calls for, within a factor 2. A tied
model with identity blocks starts near copy_prob 1 (docs/initial-loss.md, (*)); the other modes start near 1/n, which is
below the line wherever the text repeats more than one token in 2n."""

import contextlib
import csv
import json
import os
import time

import torch

import train
from lib import memory, run_files
from lab.ablation_grid import (ABLATE_KEYS, LEGACY_RUN_KEYS, MODES, MUON_KEYS, ROW_FORMS, ROWS, UNTIE_ROW, check_row,
                               model_config, parse_row, recorded_config, recorded_eval_seed, row_label, untie_iter)
from lab.ablation_figure import plot, plot_gradient_sources, plot_rate_sweep, plot_runs, plot_tuned_lens
from lab.ablation_report import METRIC_KEYS, markdown, read_other_summary, summarize, versus_other, write_csv
from lib.atomic_files import atomic_write_bytes, make_folder, output_file
from lib.command_line import UserError, parse_config, parse_modes, run_cli
from lab.floor import floors
from lab.grid_runner import LOG_FILE, GridBar, Task, run_here, run_in_workers, usable_cores
from lib.progress import say
from lib.device import pick_device, pick_dtype
from lib.prepared_data import load_meta
from lib.training_run import DATA_IDENTITY, Diverged
from lab.run_results import BucketData, bucket_numbers, lens_numbers, number, read_result


# train.py's keys, minus the two ablate.py decides per run, plus its own; log_interval=1 (train.py: 10).
DEFAULTS = {k: v for k, v in train.DEFAULTS.items() if k not in ('tie_mode', 'init_from')}
DEFAULTS.update(
    out_dir='out-ablation',     # the ablation's folder: a folder per run, the summary and the figures
    log_interval=1,             # every step logged: the table's 1 % point and the curves' first steps need them
    modes=','.join(MODES),      # rows, comma separated, trained in this order: tie modes, tied_untie, each with
                                # optional settings of its own (_igsK, _eX, _hY: lab/ablation_grid.py)
    seeds=1,                    # the runs use seed, seed+1, ..., seed+seeds-1
    quick=False,                # a tiny model and a few tens of iterations (QUICK below): seconds per row
    untie_at=2 / 3,             # the tied_untie row only (train.py's default, None, means never untie)
    versus='',                  # another ablation's out_dir: the summary adds this one minus that one, per mode
    jobs=0,                     # runs side by side, each a process with its share of the cores as torch threads;
                                # 0: one per CPU core, or one per GPU (each its own), at most one per run; 1: one after
                                # another here
    tuned_lens='',              # rows (comma separated) whose final checkpoints get the tuned lens (lab/tuned_lens.py),
                                # about a minute a run, made by its worker as it ends; 'all' for every row
)

# --quick: a tiny model and a few tens of iterations, seconds per mode, for tests and smoke checks.
# These keys are set unless given on the command line; everything else keeps its value.
QUICK = dict(n_layer=1, n_head=2, n_embd=32, block_size=32, batch_size=8, max_iters=30, lr_decay_iters=None,
             warmup_iters=3, eval_interval=10, eval_iters=2, log_interval=1, out_dir='out-ablation-quick')


def parse_args(argv):
    for arg in argv:
        if arg.startswith('--tie_mode'):
            raise UserError("ablate.py trains several tie modes: use --modes=a,b,c instead of --tie_mode")
        if arg.startswith('--init_from'):
            raise UserError("ablate.py decides --init_from itself: re-run the same command to resume an ablation")
        if arg.startswith('--untie_at='):
            # train.py's parser judges the value first, so a bad one (1.5, 0, abc) gets train.py's own
            # message; ablate.py's float default would otherwise word some of them its own way.
            if train.parse_train_args([arg])['untie_at'] is None:
                raise UserError(f"{arg}: ablate.py's untie_at is the fraction at which the {UNTIE_ROW} row unties (no "
                                f"other row ever does); to train no such row, leave {UNTIE_ROW} out of --modes")
    cfg = train.parse_train_args(argv, DEFAULTS)  # the same checks as train.py
    if cfg['quick']:
        given = {arg[2:].partition('=')[0] for arg in argv if arg.startswith('--')}
        cfg.update({k: v for k, v in QUICK.items() if k not in given})
    modes = parse_modes(  # a mode named twice is trained once
        cfg['modes'], 'modes', ROWS, accepts=lambda name: parse_row(name) is not None,
        more=f", each optionally with settings of its own: {ROW_FORMS} (e.g. tied_igs2, untied_e10_h0.3)")
    cfg['modes'] = ','.join(modes)
    for name in modes:
        check_row(name)
    for key, least, must in (('seeds', 1, 'a positive integer'),
                             ('jobs', 0, '0 (one run per CPU core) or a positive number of runs side by side'),
                             ('max_iters', 1, 'at least 1 for an ablation')):
        if cfg[key] < least:
            raise UserError(f"--{key} must be {must}, got {cfg[key]}")
    lens_rows = dict.fromkeys(name.strip() for name in cfg['tuned_lens'].split(',') if name.strip())
    if cfg['tuned_lens'] == 'all':
        lens_rows = modes
    elif not set(lens_rows) <= set(modes):
        raise UserError(f"--tuned_lens={cfg['tuned_lens']} names rows that --modes={cfg['modes']} does not train; "
                        f"give some of its rows, or 'all'")
    cfg['tuned_lens'] = ','.join(lens_rows)
    # parse_train_args has checked untie_at's range with train.py's message. What train.py cannot know:
    # rounded to an iteration, a fraction near 1 may untie after the last step, and the row labelled
    # "untied" would be a copy of the tied one.
    if UNTIE_ROW in modes and untie_iter(cfg) >= cfg['max_iters']:
        raise UserError(f"--untie_at={cfg['untie_at']:g} unties at iteration {untie_iter(cfg)} of --max_iters="
                        f"{cfg['max_iters']}, after the last step, so {UNTIE_ROW} would never untie; use a smaller "
                        f"--untie_at or more --max_iters")
    if cfg['versus']:  # checked now, not after hours of training
        other_modes = read_other_summary(cfg['versus'])['modes']
        if not set(modes) & set(other_modes):
            raise UserError(f"--versus={cfg['versus']}: no mode in common with --modes={cfg['modes']} (it has "
                            f"{','.join(other_modes)}); compare ablations that train the same modes")
    return cfg


def plan_runs(cfg):
    """(mode, seed, run_cfg) for every run, in training order: the train.py config of each run."""
    base = {k: v for k, v in cfg.items() if k not in ABLATE_KEYS}
    runs = []
    for mode in cfg['modes'].split(','):
        row = parse_row(mode)
        has_head = row.tie_mode in ('untied', 'pit') or row.unties  # a head rate (--head_lr) is for these only
        for k in range(cfg['seeds']):
            seed = cfg['seed'] + k
            # untie_at reaches the tied_untie row only; every other run is trained as if it were not given. A row's
            # own rate (_eX, _hY) is a multiple of the ablation's learning_rate; without one, the ablation's key.
            run_cfg = dict(base, tie_mode=row.tie_mode, untie_at=cfg['untie_at'] if row.unties else None, seed=seed,
                           head_init='zero' if row.zero_head else cfg['head_init'],
                           input_grad_scale=row.input_grad_scale or cfg['input_grad_scale'],
                           embed_lr=row.embed_mult * cfg['learning_rate'] if row.embed_mult else cfg['embed_lr'],
                           head_lr=(row.head_mult * cfg['learning_rate'] if row.head_mult else cfg['head_lr'])
                           if has_head else None,
                           init_from='scratch', out_dir=os.path.join(cfg['out_dir'], f'{mode}-seed{seed}'))
            runs.append((mode, seed, run_cfg))
    return runs


class RunsFailed(UserError):
    """Some runs failed, each named with its log's last line; the others finished, and no summary was written."""


def check_same_config(wanted, saved, where, run_dir, finished=False):
    """Refuse to skip or resume a run made with other settings: its results would be mixed with these.
    Except, for a finished run, the seed of its evaluation batches: a run made before --eval_seed is
    summarised with the rest, and the summary says that its best point was scored on other batches."""
    # A key newer than the run (LEGACY_RUN_KEYS) counts with the value the run was made with.
    if 'seed' in saved:
        saved = dict(saved, eval_seed=recorded_eval_seed(saved))
    unused = MUON_KEYS if wanted.get('optimizer') == 'adamw' else ()  # what an AdamW run never reads
    if differ := [k for k in wanted if saved.get(k, LEGACY_RUN_KEYS.get(k)) != wanted[k] and k not in unused
                  and not (k == 'vocab_size' and wanted[k] is None) and not (finished and k == 'eval_seed')]:
        key = differ[0]
        more = f" (and {len(differ) - 1} more: {', '.join(differ[1:])})" if len(differ) > 1 else ""
        raise UserError(f"{where} was made with {key}={saved.get(key)!r}, but this ablation asks for "
                        f"{key}={wanted[key]!r}{more}; use another --out_dir, or delete {run_dir} to train it again")


# ---------------------------------------------------------------- training

def jobs_and_threads(cfg, device, runs=None):
    """--jobs as a number of runs side by side, the torch threads of each (the cores shared out), and the GPU each
    worker is given (None: none). 0 (the default) is one run per core on a CPU, where two one-thread processes beat
    one two-thread process on these small models (docs/performance.md), and one run per GPU where --device leaves
    the choice of GPU open (auto or cuda): a worker sees only its own GPU (CUDA_VISIBLE_DEVICES), so a node of
    eight trains eight runs at a time, each with the whole of one GPU, rather than one run spread over all eight.
    The default never starts more runs than there are to train (`runs`): the cores go to those there are, so a
    sweep's widening by one row trains it here with every core, not in one worker with one thread beside an idle core."""
    cores = usable_cores()
    gpus = visible_gpus() if device == 'cuda' and cfg['device'] in ('auto', 'cuda') else []
    jobs = cfg['jobs'] or (cores if device == 'cpu' else max(1, len(gpus)))
    if not cfg['jobs'] and runs:
        jobs = min(jobs, runs)
    return jobs, max(1, cores // jobs), ([gpus[k % len(gpus)] for k in range(jobs)] if gpus and jobs > 1 else None)


def visible_gpus():
    """The CUDA devices this process may use, as CUDA_VISIBLE_DEVICES names them (or their indices)."""
    if (listed := os.environ.get('CUDA_VISIBLE_DEVICES')) is not None:
        return [gpu.strip() for gpu in listed.split(',') if gpu.strip()]
    return [str(k) for k in range(torch.cuda.device_count())]


def plan(cfg, runs):
    """(the finished runs as (mode, seed), a grid_runner.Task for each other run), checking now, before
    anything is trained, that every finished or interrupted run was made with these settings."""
    finished, tasks = [], []
    for mode, seed, run_cfg in runs:
        run_dir, wanted = run_cfg['out_dir'], recorded_config(run_cfg)
        state = run_state(run_dir, wanted, data_identity(run_cfg))
        if state == 'finished':
            finished.append((mode, seed))
            continue
        tasks.append(Task(label=f"{mode} seed {seed}", run_dir=run_dir, iters=cfg['max_iters'], done_iters=state,
                          group=mode, payload=(mode, seed, run_cfg, mode in cfg['tuned_lens'].split(','))))
    return finished, tasks


def data_identity(run_cfg):
    """The text a run trains on, as meta.json records it (its hash and sizes): a finished run made on another text
    under the same dataset name is not this grid's (an interrupted one is refused by train.py's resume)."""
    meta = load_meta(os.path.join(run_cfg['data_dir'], run_cfg['dataset']))
    return {key: meta.get(key) for key in DATA_IDENTITY}


def run_state(run_dir, wanted, data):
    """'finished' (result.json), or the iteration its checkpoint continues from (0: none yet)."""
    result_path, ckpt_path = os.path.join(run_dir, 'result.json'), os.path.join(run_dir, 'ckpt.pt')
    if os.path.exists(result_path):
        result = read_result(result_path)
        check_same_config(wanted, result['config'], result_path, run_dir, finished=True)
        if result.get('data', data) != data:  # a run from before the record is taken on its settings alone
            raise UserError(f"{result_path} was trained on another text than {os.path.join(wanted['data_dir'], wanted['dataset'])} now holds "
                            f"(its meta.json's hash or sizes differ): it was prepared again; use another --out_dir, "
                            f"or delete {run_dir} to train it again")
        return 'finished'
    if not os.path.exists(ckpt_path):
        return 0
    # Interrupted midway: continued from the checkpoint, which train.py restores exactly (weights,
    # optimizer, RNG and data order), if it was made with these settings.
    ckpt = run_files.load_checkpoint(ckpt_path, 'cpu')
    check_same_config(wanted, ckpt.get('config', {}), ckpt_path, run_dir)
    return ckpt['iter_num']


def train_run(payload, progress):
    """Train one run that this process has claimed (lab/grid_runner.py), printing into the run's train.log:
    found finished by another process meanwhile, continued from its checkpoint, or started. Written last
    and atomically, result.json means the run is complete. Module-level: a worker process imports it."""
    mode, seed, run_cfg, with_lens = payload
    wanted, data = recorded_config(run_cfg), data_identity(run_cfg)
    state = run_state(run_cfg['out_dir'], wanted, data)  # again: another process may have moved it on since planning
    if state == 'finished':
        return dict(status='skipped', line=f"{mode} seed {seed}: finished by another process, skipped")
    if state or os.path.exists(os.path.join(run_cfg['out_dir'], 'ckpt.pt')):  # (one of iteration 0 too)
        run_cfg = dict(run_cfg, init_from='resume')
    else:  # killed before its first checkpoint: what it left is this run's own, started again from scratch
        for name in (run_files.BEST_FILE, 'metrics.csv'):
            with contextlib.suppress(FileNotFoundError, IsADirectoryError):  # (a folder: train.py's one line)
                os.remove(os.path.join(run_cfg['out_dir'], name))
    progress.begin(state)
    device = pick_device(run_cfg['device'])
    print(f"ablate.py: pid {os.getpid()} trains {mode} seed {seed}, "
          f"{f'from its checkpoint of iteration {state}' if state else 'from scratch'}, on {device} in "
          f"{pick_dtype(run_cfg['dtype'], device, warn=False)} with {torch.get_num_threads()} torch thread(s), "
          f"{time.strftime('%Y-%m-%d %H:%M:%S')}", flush=True)
    diverged = None
    try:
        summary = train.train(run_cfg, progress=progress)  # the grid's bar replaces train.py's own printing
    except Diverged as e:  # a rate too high for its row: a sweep's result, its worst cell, not a failed run
        diverged, summary = dict(iteration=e.iteration, error=str(e)), dict(iters=e.iteration, params=None)
    result = dict(mode=mode, seed=seed, config=wanted, data=data, resumed=bool(state), pid=os.getpid(),
                  threads=torch.get_num_threads(), diverged=diverged,
                  summary={k: v for k, v in summary.items() if k not in ('model', 'out_dir')})
    atomic_write_bytes(os.path.join(run_cfg['out_dir'], 'result.json'), (json.dumps(result, indent=1) + '\n').encode())
    if diverged:
        line = f"{mode} seed {seed}: diverged, kept as the run's result: {diverged['error']}"
    else:
        # The summary scores every run's ckpt.pt and best.pt on the whole validation split, two float32 forward
        # passes over it: 5.2 s a run of the default model on one thread of a 2-core EPYC, 4 minutes for a 50-run
        # grid if the summary made them one after another. Made here, they run side by side like the training,
        # and the summary reads them back from the run's cache files.
        data = BucketData(run_cfg)
        for best in (False, True):
            bucket_numbers(run_cfg['out_dir'], data, run_cfg, best=best)
        if with_lens:  # likewise the tuned lens, where asked for: its cache file is what the summary reads
            lens_numbers(run_cfg['out_dir'], run_cfg)
        line = (f"{mode} seed {seed}: val loss {summary['val_loss']:.4f} (best {summary['best_val_loss']:.4f}) after "
                f"{summary['iters']} iterations, {summary['wall_s']:.0f} s")
    print(line, flush=True)
    return dict(status='resumed' if state else 'trained', line=line)


def run_all(cfg, runs, bar=None):
    """Train what is not trained yet: in this process with --jobs=1, else in --jobs processes side by side.
    bar: one that stands in for the grid's (tests). Returns {'trained', 'resumed', 'skipped': [(mode, seed)],
    'failed': [(mode, seed, last line of its log)], 'workers': [pid], 'jobs', 'threads'}."""
    finished, tasks = plan(cfg, runs)
    jobs, threads, gpus = jobs_and_threads(cfg, pick_device(cfg['device']), len(tasks))
    done = dict(trained=[], resumed=[], skipped=list(finished), failed=[], workers=[], jobs=jobs, threads=threads)
    own_bar = bar is None
    if own_bar:
        bar = GridBar(len(runs), len(finished), len(runs) * cfg['max_iters'],
                      len(finished) * cfg['max_iters'] + sum(task.done_iters for task in tasks), cfg['progress'])
    for mode, seed in finished:
        say(bar, f"{mode} seed {seed}: finished earlier, skipped ({cfg['out_dir']}/{mode}-seed{seed}/result.json)")
    for task in tasks:
        if task.done_iters:
            say(bar, f"{task.label}: resuming from iteration {task.done_iters} ({task.run_dir}/ckpt.pt)")

    def on_done(task, outcome):
        done[outcome['status']].append(task.payload[:2])
        say(bar, outcome['line'])

    def on_failed(task, line):
        done['failed'].append((*task.payload[:2], line))
        say(bar, f"{task.label}: FAILED: {line} (log: {os.path.join(task.run_dir, LOG_FILE)})")
    if tasks:
        say(bar, f"{len(tasks)} of {len(runs)} runs to train, " + (
            "one after another in this process" if jobs == 1 else
            f"{min(jobs, len(tasks))} at a time, each in a process of its own with {threads} torch thread(s)"
            + (", and a GPU of its own" if gpus else "")))
    try:
        if jobs == 1:
            run_here(tasks, train_run, bar, on_done, on_failed)
        elif tasks:
            done['workers'] = run_in_workers(tasks, train_run, jobs, threads, bar, on_done, on_failed, gpus)
    finally:
        if own_bar:
            bar.close()
    return done


# ---------------------------------------------------------------- main

def ablate(cfg, argv=()):
    """Train and summarise the ablation that cfg (from parse_args) describes. Returns what run_all did
    plus the summary numbers."""
    started = time.time()
    meta = load_meta(os.path.join(cfg['data_dir'], cfg['dataset']))  # fails now, not after the first run
    runs = plan_runs(cfg)
    device = pick_device(cfg['device'])
    for _, _, run_cfg in runs[::cfg['seeds']]:
        run_cfg = dict(run_cfg, vocab_size=run_cfg['vocab_size'] or meta['vocab_size'])
        memory.check_memory(model_config(run_cfg, meta['vocab_size']), run_cfg, device,
                           pick_dtype(cfg['dtype'], device))
    make_folder(cfg['out_dir'], '--out_dir')  # made if missing, else one line naming it
    try:
        done = run_all(cfg, runs)
    except KeyboardInterrupt as e:
        # e names where each stopped run stands; train.py's own advice (--init_from=resume) is not this command's
        stopped = f" ({str(e).split(': checkpoint saved')[0]})" if str(e) else ""
        raise KeyboardInterrupt(f"ablation interrupted{stopped}: finished runs are kept and each stopped run resumes "
                                f"from its last checkpoint; re-run the same command to continue") from None
    if done['failed']:
        runs_failed = '; '.join(f"{mode} seed {seed}: {line}" for mode, seed, line in done['failed'])
        failed = RunsFailed(f"{len(done['failed'])} of {len(runs)} runs failed ({runs_failed}); each run's train.log "
                            f"in {cfg['out_dir']}/MODE-seedSEED/ has the whole story; the other runs are kept, and "
                            f"re-running the same command trains only what is missing, then writes the summary")
        failed.done = done
        raise failed

    csv_rows, info, curves = summarize(cfg, runs, meta['vocab_size'], list(argv))
    # What counting alone scores on the same validation split: where the models stand against a bigram
    info['floor'] = floors(os.path.join(cfg['data_dir'], cfg['dataset']), cfg['max_iters'],
                           cfg['batch_size'] * cfg['gradient_accumulation_steps'], cfg['block_size'], cfg['seed'])
    if done['trained'] or done['resumed']:  # the threads above are this process's, not its workers'
        info['machine'] += (f"; this command trained its runs {done['jobs']} at a time, {done['threads']} torch "
                            f"thread(s) each" if done['jobs'] > 1 else "; this command trained its runs one after "
                            "another in this process")
    if cfg['versus']:
        info['versus_other'] = versus_other(info, cfg['versus'])
    table = markdown(info)
    figure = os.path.join(cfg['out_dir'], 'loss_curves.png')
    # Each written whole or not at all (atomic); a file that cannot be written is one line naming it, and the
    # runs stay: the same command writes the summary again without training anything.
    with output_file(os.path.join(cfg['out_dir'], 'summary.md'), 'the summary in --out_dir'):
        write_csv(os.path.join(cfg['out_dir'], 'ablation.csv'), csv_rows)
        atomic_write_bytes(os.path.join(cfg['out_dir'], 'summary.md'), table.encode())
        atomic_write_bytes(os.path.join(cfg['out_dir'], 'summary.json'), (json.dumps(info, indent=1) + '\n').encode())
        has_figure = plot(figure, curves, info)
        has_sources = has_figure and plot_gradient_sources(os.path.join(cfg['out_dir'], 'grad_sources.png'), curves,
                                                           info)
        extra = [name for name, drawn in (('rate_sweep.png', plot_rate_sweep), ('tuned_lens.png', plot_tuned_lens))
                 if has_figure and drawn(os.path.join(cfg['out_dir'], name), info)]
    print(table)
    print(f"{len(done['trained'])} runs trained, {len(done['resumed'])} resumed, {len(done['skipped'])} skipped "
          f"(finished earlier), in {time.time() - started:.0f} s; wrote {cfg['out_dir']}/ablation.csv, "
          f"summary.md, summary.json" + (", loss_curves.png" if has_figure else "")
          + (", grad_sources.png" if has_sources else "") + ''.join(f", {name}" for name in extra))
    if not has_figure:
        print("matplotlib is not installed, so there is no loss_curves.png; get it with: pip install matplotlib "
              "and re-run the same command (finished runs are not trained again)")
    return dict(done, info=info, figure=figure if has_figure else None)


# ---------------------------------------------------------------- --plot_runs: runs drawn, nothing trained

def run_curve(folder):
    """One train.py run's metrics.csv as the summary reads it (numbers, None where a cell is empty), its label (the tie
    mode its ckpt.pt was trained with) and its settings; a folder that is no finished run is one line naming it."""
    metrics = os.path.join(folder, 'metrics.csv')
    if not os.path.isfile(metrics):  # a missing ckpt.pt is load_checkpoint's one line
        raise UserError(f"--plot_runs: {folder} {'has no metrics.csv' if os.path.isdir(folder) else 'is no folder'}, "
                        f"so it is no train.py run; give the out_dirs of train.py runs, comma separated, e.g. "
                        f"--plot_runs=out-tied,out")
    try:
        raw = run_files.read_metrics(metrics)
        if not raw or not {'iter', 'step_loss', 'val_loss'} <= set(raw[0]):
            raise ValueError("no header with iter, step_loss and val_loss, or no row under it")
        rows = [dict({k: number(r.get(k)) for k in METRIC_KEYS}, iter=int(r['iter'])) for r in raw]
    except (OSError, UnicodeDecodeError, csv.Error, ValueError, TypeError) as e:
        raise UserError(f"--plot_runs: {metrics} is not a metrics.csv as train.py writes it ({type(e).__name__}: {e}); "
                        f"it must hold a row per logged iteration, a number or nothing in each cell") from None
    saved = run_files.load_checkpoint(os.path.join(folder, 'ckpt.pt'), 'cpu')
    cfg = dict(saved['config'], vocab_size=saved['meta']['vocab_size'])  # the data's, not a padded head's
    return rows, row_label(UNTIE_ROW, cfg['untie_at']) if cfg.get('untie_at') else cfg['tie_mode'], cfg


def draw_runs(argv):
    """--plot_runs: each run's loss and copy probe against the step, one line per run, into --plot's PNG."""
    if others := [arg for arg in argv if arg.partition('=')[0] not in ('--plot_runs', '--plot')]:
        raise UserError(f"--plot_runs draws finished runs and trains nothing: it takes --plot=FILE.png and no other "
                        f"option, got {others[0]}")
    cfg = parse_config(dict(plot_runs='', plot='runs.png'), argv)  # train.py out_dirs, comma separated; the PNG
    curves, info = {}, dict(labels={}, untie_iter=None, vocab_size=set(), title=[])
    for folder in dict.fromkeys(name.strip() for name in cfg['plot_runs'].split(',') if name.strip()):
        rows, label, run_cfg = run_curve(folder)
        curves[folder] = [rows]
        info['labels'][folder] = label if label not in info['labels'].values() else f"{label} ({folder})"
        info['vocab_size'].add(run_cfg['vocab_size'])
        info['title'].append(f"{folder} ({label}): {run_cfg['dataset']}, {run_cfg['n_layer']}L x {run_cfg['n_embd']}, "
                             f"{run_cfg['max_iters']} iterations")
    if not curves or len(info['vocab_size']) > 1:
        raise UserError(f"--plot_runs={cfg['plot_runs']}: give one or more runs trained on one vocabulary, comma "
                        f"separated (these have {len(info['vocab_size'])} vocabularies)")
    repeats = [r['repeat_rate'] for (rows,) in curves.values() for r in rows if r['repeat_rate'] is not None]
    info.update(vocab_size=info['vocab_size'].pop(), repeat_rate=sum(repeats) / len(repeats) if repeats else None,
                title='; '.join(info['title']))
    with output_file(cfg['plot'], '--plot'):
        if not plot_runs(cfg['plot'], curves, info):
            raise UserError("--plot_runs needs matplotlib, which is not installed: pip install matplotlib")
    print(f"wrote {cfg['plot']}: {', '.join(f'{label} ({folder})' for folder, label in info['labels'].items())}")


def main(argv):
    if any(arg.partition('=')[0] == '--plot_runs' for arg in argv):
        draw_runs(argv)
    else:
        ablate(parse_args(argv), argv)


if __name__ == '__main__':
    run_cli(main)
