"""
Robustness end to end (docs/robustness.md): every bad input gets one clear line and exit code 2 without
a traceback, and no interruption (Ctrl-C, SIGKILL, a non-finite loss, a full disk, a killed
prepare.py) loses saved work. Every test runs the real scripts, as processes of their own where a signal, a
kill or a file-size limit is what it tests (train.py in forks of a launcher that imported torch once:
conftest.WarmLauncher).
docs/robustness.md lists each case, what the user sees, and the test that covers it.
"""

import contextlib
import hashlib
import itertools
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch

from lab.run_results import load_best
from lib import prepared_data, run_files
import prepare
import train
from lib.run_files import load_checkpoint
from lib.command_line import UserError
from conftest import (ENV, REPO_ROOT, assert_one_line_error, run, run_in_process, sigint_as_a_terminal_sends_it,
                      tiny_corpus, tiny_train_args, train_tiny_run, warm_run, without_matplotlib)
from model import GPT, GPTConfig

def start(script, *args, **kwargs):
    return subprocess.Popen([sys.executable, script, *args], cwd=REPO_ROOT, env=ENV, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kwargs)


def temp_files(folder):
    return sorted(name for name in os.listdir(folder) if '.tmp-' in name)


def load_and_build(path):
    """What a resume and sample.py do with a checkpoint: load it (torch.load, weights only) and build the model."""
    ckpt = load_checkpoint(path, 'cpu')
    model = GPT(GPTConfig(**ckpt['model_args']))
    model.load_state_dict(ckpt['model'])
    assert all(torch.isfinite(value).all() for value in ckpt['model'].values())
    return ckpt


def wait_for(condition, process=None, timeout=120):
    """Poll until condition() holds; fail with the process's stderr if it ends first."""
    deadline = time.time() + timeout
    while not condition():
        if process is not None and process.poll() is not None:
            pytest.fail(f"process ended with {process.returncode} first: {process.stderr.read()[-2000:]}")
        assert time.time() < deadline, 'timed out'
        time.sleep(0.001)


@pytest.fixture
def spawn(warm):
    """start(), and every process it started is killed after the test, should the test fail midway. SIGINT is at
    its default, as a terminal starts a process (conftest.sigint_as_a_terminal_sends_it). prepare.py starts cold,
    as a user starts it: its kills come at moments of its whole run, the interpreter's start included. train.py
    (and code run with -c) runs in a fork of the worker's warm launcher (conftest.WarmLauncher): a Ctrl-C reaches
    it as it reaches a process started cold, without the second or two of CPU that importing torch costs."""
    started = []

    def spawn(script, *args):
        if script == 'prepare.py':
            process = start(script, *args, preexec_fn=sigint_as_a_terminal_sends_it)
        else:
            process = warm(script, *args)
        started.append(process)
        return process
    yield spawn
    for process in started:
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.fixture(scope='module')
def trained(tiny_data, tmp_path_factory):
    """A finished tiny run: out_dir/ckpt.pt at iteration 10 (saved at 5 and 10). Tests that write copy it."""
    return train_tiny_run(tiny_data, tmp_path_factory, 'trained', max_iters=10, eval_interval=5)


def copy_of(trained, tmp_path):
    out_dir = str(tmp_path / 'out')
    shutil.copytree(trained, out_dir)
    return out_dir


# ---------------------------------------------------------------- bad input: one line, exit code 2

# id: (script, arguments, fragments the one line must contain). Placeholders: {data} the tiny char
# dataset's data_dir, {other} one of its name with another alphabet, {run} the finished run, {tmp} a scratch
# folder. Train cases start from the tiny run's options; later options override earlier ones.
BAD_INPUTS = {
    'shuffle_odd_width': ('train.py', ['--tie_mode=shuffle', '--n_embd=33', '--n_head=3'],
                          ["tie_mode='shuffle'", 'n_embd must be even', 'n_embd=33']),
    'shufflenet_groups': ('train.py', ['--tie_mode=shufflenet', '--n_embd=30', '--n_head=2', '--shuffle_groups=4'],
                          ['n_embd=30, shuffle_groups=4', 'allowed groups are the divisors of 30']),
    'n_embd_not_divisible_by_n_head': ('train.py', ['--n_embd=30', '--n_head=4'],
                                       ['n_embd=30 must be divisible by n_head=4']),
    'zero_n_layer': ('train.py', ['--n_layer=0'], ['n_layer must be a positive integer, got 0']),
    'zero_head_tied': ('train.py', ['--head_init=zero'], ["head_init='zero' needs a head of its own (tie_mode='untied')",
                                                          "got tie_mode='tied'"]),
    'negative_block_size': ('train.py', ['--block_size=-16'], ['--block_size must be a positive integer, got -16']),
    'missing_data_default_dataset': ('train.py', ['--data_dir={tmp}/empty', '--dataset=shakespeare_char'],
                                     ['no prepared data in {tmp}/empty/shakespeare_char',
                                      'create it with: python prepare.py --out_dir={tmp}/empty']),
    'missing_data_own_dataset': ('train.py', ['--dataset=book'],
                                 ['no prepared data in {data}/book',
                                  'python prepare.py --input=FILE --dataset=book --out_dir={data}']),
    'data_shorter_than_context': ('train.py', ['--block_size=5000'],
                                  ['{data}/tiny/val.bin has', 'fewer than one context window', '--block_size=5000']),
    'vocab_size_below_data': ('train.py', ['--vocab_size=10'],
                              ['--vocab_size=10 is smaller than the vocabulary of the prepared data (53']),
    # Data that disagrees with its meta.json (see BROKEN_DATA).
    'stale_meta_vocab_size': ('train.py', ['--data_dir={tmp}/stale_meta'],
                              ['{tmp}/stale_meta/tiny/train.bin holds token id 52 but '
                               '{tmp}/stale_meta/tiny/meta.json gives vocab_size=40 (ids 0 to 39)',
                               're-create both with: python prepare.py --input=FILE --dataset=tiny '
                               '--out_dir={tmp}/stale_meta']),
    'bin_not_whole_tokens': ('train.py', ['--data_dir={tmp}/odd_bin'],
                             ['{tmp}/odd_bin/tiny/train.bin does not match meta.json', 'not a whole number of uint16 '
                              'tokens', 're-create both with: python prepare.py']),
    'meta_dtype_not_unsigned': ('train.py', ['--data_dir={tmp}/float_dtype'],
                                ["{tmp}/float_dtype/tiny/meta.json gives dtype='float16'; it must be an unsigned "
                                 "integer type", 're-create it with: python prepare.py']),
    'meta_chars_disagree': ('train.py', ['--data_dir={tmp}/chars_mismatch'],
                            ['meta.json gives vocab_size=40 but chars has 53 entries']),
    'meta_largest_id_null': ('train.py', ['--data_dir={tmp}/null_largest_id'],
                             ['{tmp}/null_largest_id/tiny/meta.json gives largest_id=None; it must be {{"train": ID, '
                              '"val": ID}}', 're-create it with: python prepare.py']),
    'resume_other_vocabulary': ('train.py', ['--out_dir={run}', '--init_from=resume', '--data_dir={other}'],
                                ["was trained on dataset 'tiny' (char, vocab 53)", 'another vocabulary',
                                 'resume on the data it was trained on']),
    'a_device_no_model_runs_on': ('sample.py', ['--out_dir={run}', '--device=xpu'],
                                  ["--device='xpu' is not a device this project runs on; use auto, cpu"]),
    'train_on_the_meta_device': ('train.py', ['--device=meta', '--out_dir={tmp}/meta_device'],
                                 ["--device='meta' is not a device this project runs on"]),
    'sample_prompt_a_device': ('sample.py', ['--out_dir={run}', '--start=FILE:/dev/zero'],
                               ['--start=FILE:/dev/zero is a device, which never ends']),
    'resume_other_vocab_size': ('train.py', ['--out_dir={run}', '--init_from=resume', '--vocab_size=64'],
                                ['--vocab_size=64 disagrees with the checkpoint', 'vocab_size=53']),
    'resume_other_shape': ('train.py', ['--out_dir={run}', '--init_from=resume', '--n_embd=64'],
                           ['--n_embd=64 disagrees with the checkpoint', 'made with n_embd=32']),
    'resume_without_checkpoint': ('train.py', ['--out_dir={tmp}/empty', '--init_from=resume'],
                                  ['no checkpoint at {tmp}/empty/ckpt.pt']),
    # a fresh start never replaces a run's checkpoint (the run is the module's trained one, which later cases read)
    'fresh_run_over_a_checkpoint': ('train.py', ['--out_dir={run}'],
                                    ["--out_dir={run} holds an earlier run's ckpt.pt, best.pt, metrics.csv: resume it "
                                     "with --init_from=resume"]),
    'truncated_checkpoint': ('train.py', ['--out_dir={tmp}/truncated', '--init_from=resume'],
                             ['checkpoint {tmp}/truncated/ckpt.pt is unreadable, truncated or corrupted']),
    'corrupted_checkpoint': ('train.py', ['--out_dir={tmp}/garbage', '--init_from=resume'],
                             ['checkpoint {tmp}/garbage/ckpt.pt is unreadable, truncated or corrupted']),
    'not_a_training_checkpoint': ('train.py', ['--out_dir={tmp}/weights_only', '--init_from=resume'],
                                  ['lacks model, optimizer', 'not written by this train.py']),
    'out_dir_not_writable': ('train.py', ['--out_dir={tmp}/a_file/out'],
                             ['cannot write --out_dir={tmp}/a_file/out: {tmp}/a_file is a file, not a folder']),
    'sample_prompt_file_missing': ('sample.py', ['--out_dir={run}', '--start=FILE:{tmp}/no_such_prompt.txt'],
                                   ['--start=FILE:{tmp}/no_such_prompt.txt: no such file']),
    'sample_prompt_file_not_utf8': ('sample.py', ['--out_dir={run}', '--start=FILE:{tmp}/latin1.txt'],
                                    ['--start=FILE:{tmp}/latin1.txt is not UTF-8 text']),
    'sample_prompt_unknown_characters': ('sample.py', ['--out_dir={run}', '--start=ROMEO: é@~'],
                                         ["prompt has characters not in the vocabulary: 'é', '@', '~'"]),
    'sample_truncated_checkpoint': ('sample.py', ['--out_dir={tmp}/truncated'],
                                    ['checkpoint {tmp}/truncated/ckpt.pt is unreadable, truncated or corrupted']),
    'sample_checkpoint_misfit': ('sample.py', ['--out_dir={tmp}/misfit'],
                                 ['checkpoint {tmp}/misfit/ckpt.pt does not fit the model of this model.py (size '
                                  'mismatch for token_embedding_table.weight', 'edited or written by another version']),
    # Options that reached torch or AdamW unchecked.
    'beta2_not_below_one': ('train.py', ['--beta2=1.0'], ['--beta2 must be at least 0 and below 1, got 1.0']),
    'beta1_nan': ('train.py', ['--beta1=nan'], ['--beta1 must be at least 0 and below 1, got nan']),
    'learning_rate_infinite': ('train.py', ['--learning_rate=inf'],
                               ['--learning_rate must be a finite number, zero or more, got inf']),
    'init_std_infinite': ('train.py', ['--init_std=inf'], ['init_std must be a positive finite number, got inf']),
    'seed_too_large': ('train.py', ['--seed=18446744073709551616'],
                       ['--seed must be an integer from -2**63 to 2**63 - 1, got 18446744073709551616']),
    'sample_temperature_nan': ('sample.py', ['--out_dir={run}', '--temperature=nan'],
                               ['--temperature must be a finite number, zero or more, got nan']),
    'sample_seed_too_small': ('sample.py', ['--out_dir={run}', '--seed=-9223372036854775809'],
                              ['--seed must be an integer from -2**63 to 2**63 - 1, got -9223372036854775809']),
    'init_loss_vocab_of_one': ('init_loss.py', ['--vocab_size=1'], ['--vocab_size must be at least 2, got 1']),
    'init_loss_unknown_device': ('init_loss.py', ['--device=gpu'], ["--device='gpu' is not a device"]),
    'bench_negative_warmup': ('bench.py', ['--bench_warmup=-1'], ['--bench_warmup must be zero or more, got -1']),
    # Sizes that cannot fit in this machine's memory: refused by the project's own estimate before anything is
    # allocated or written (lib.memory.check_memory, sample.check_memory), never left to an allocator, which on
    # a machine that overcommits says yes (tests/test_memory_estimates.py pretends to be one).
    'batch_too_large_for_memory': ('train.py', ['--batch_size=10000000000000'],
                                   ['a training step needs at least ', ' more than the ',
                                    ', with --batch_size=10000000000000, --block_size=16, '
                                    '--gradient_accumulation_steps=1; use a smaller --batch_size or --block_size (a '
                                    'larger --gradient_accumulation_steps keeps the tokens per iteration']),
    'model_too_large_for_memory': ('train.py', ['--n_embd=10000000', '--n_head=1'],
                                   ['the model (n_layer=1, n_embd=10000000, vocab_size=53) needs at least ',
                                    'for its weights, gradients and AdamW state alone; use a smaller --n_layer or '
                                    '--n_embd']),
    'model_too_deep_for_memory': ('train.py', ['--n_layer=1000000000'],
                                  ['the model (n_layer=1000000000, n_embd=32, vocab_size=53) needs at least ']),
    'sample_too_many_samples': ('sample.py', ['--out_dir={run}', '--num_samples=10000000000000'],
                                ['sampling needs at least ', '--num_samples=10000000000000, --max_new_tokens=5 and a '
                                 'prompt of 1 token(s) on cpu; at most --num_samples=']),
    'sample_too_many_new_tokens': ('sample.py', ['--out_dir={run}', '--max_new_tokens=10000000000000'],
                                   ['sampling needs at least ', '--num_samples=3, --max_new_tokens=10000000000000 and '
                                    'a prompt of 1 token(s) on cpu; at most ', '--max_new_tokens=']),
    'init_loss_batch_too_large': ('init_loss.py', ['--batch_size=100000000000'],
                                  ['measuring needs at least ', '--batch_size=100000000000, --block_size=64, '
                                   '--vocab_size=50, --n_embd=32, --n_layer=1; use smaller values']),
    'bench_batch_too_large': ('bench.py', ['--batch_size=10000000000000'],
                              ['a training step needs at least ', '--batch_size=10000000000000, --block_size=16']),
    'ablate_batch_too_large': ('ablate.py', ['--modes=tied,untied', '--batch_size=10000000000000'],
                               ['a training step needs at least ', '--batch_size=10000000000000, --block_size=32']),
}
# The case run as a subprocess, as a user runs the script: sample.py's, the one script that no other bad-input
# test starts as a process (train.py's is in test_train, bench.py's in test_bench, init_loss.py's in
# test_named_inputs, ablate.py's in test_ablate). The others run in this process through the same run_cli: an
# interpreter start costs seconds of CPU on the slower machines, and the suite runs on them too.
AS_SUBPROCESS = ('sample_prompt_file_missing',)
# Options every case of a script starts from: a small, quick setting (train.py's are tiny_train_args).
SCRIPT_ARGS = {
    'sample.py': ['--device=cpu', '--max_new_tokens=5'],
    'init_loss.py': ['--n_layer=1', '--n_embd=32', '--n_head=2', '--vocab_size=50', '--seeds=1', '--modes=tied',
                     '--device=cpu'],
    'bench.py': ['--n_layer=1', '--n_head=2', '--n_embd=32', '--block_size=16', '--batch_size=4', '--vocab_size=50',
                 '--bench_warmup=1', '--bench_iters=2', '--device=cpu'],
    'ablate.py': ['--quick', '--data_dir={data}', '--dataset=tiny', '--progress=false', '--device=cpu',
                  '--out_dir={tmp}/out-{case}'],
}


# Copies of the tiny dataset, each with one inconsistency: name -> edit(folder, meta), meta.json then rewritten.
BROKEN_DATA = {
    # A meta.json that is consistent in itself (vocab_size and chars agree) but not with the bins.
    'stale_meta': lambda folder, meta: meta.update(vocab_size=40, chars=meta['chars'][:40]),
    'odd_bin': lambda folder, meta: open(folder / 'train.bin', 'ab').write(b'\0'),  # half a uint16 more
    'float_dtype': lambda folder, meta: meta.update(dtype='float16'),
    'chars_mismatch': lambda folder, meta: meta.update(vocab_size=40),
    'null_largest_id': lambda folder, meta: meta.update(largest_id=None),
}


@pytest.fixture(scope='module')
def bad_input_results(tiny_data, trained, tmp_path_factory):
    """Run every case of BAD_INPUTS once: AS_SUBPROCESS as the user runs them, the rest in this process."""
    tmp = tmp_path_factory.mktemp('bad')
    other = tmp / 'other_data'
    (tmp / 'other.txt').write_text(tiny_corpus().upper(), encoding='utf-8')
    prepare.main([f'--input={tmp / "other.txt"}', '--dataset=tiny', f'--out_dir={other}'])  # the run's name
    (tmp / 'empty').mkdir()
    (tmp / 'a_file').write_text('a file, not a folder')
    (tmp / 'latin1.txt').write_bytes('Café'.encode('latin-1'))
    with open(os.path.join(trained, 'ckpt.pt'), 'rb') as f:
        good = f.read()
    for name, data in [('truncated', good[:len(good) // 2]), ('garbage', random.Random(0).randbytes(5000))]:
        (tmp / name).mkdir()
        (tmp / name / 'ckpt.pt').write_bytes(data)
    for name, edit in BROKEN_DATA.items():
        folder = tmp / name / 'tiny'
        shutil.copytree(os.path.join(tiny_data, 'tiny'), folder)
        meta = json.loads((folder / 'meta.json').read_text(encoding='utf-8'))
        edit(folder, meta)
        (folder / 'meta.json').write_text(json.dumps(meta), encoding='utf-8')
    (tmp / 'misfit').mkdir()  # settings that its weights do not fit
    ckpt = torch.load(os.path.join(trained, 'ckpt.pt'), weights_only=True)
    ckpt['model_args'].update(n_embd=64, n_head=4)
    torch.save(ckpt, tmp / 'misfit' / 'ckpt.pt')
    (tmp / 'weights_only').mkdir()
    torch.save(load_and_build(os.path.join(trained, 'ckpt.pt'))['model'], tmp / 'weights_only' / 'ckpt.pt')

    places = dict(data=tiny_data, other=str(other), run=trained, tmp=str(tmp))

    def run_case(case):
        script, args, fragments = BAD_INPUTS[case]
        args = [arg.format(**places) for arg in args]
        if script == 'train.py':
            args = tiny_train_args(tiny_data, str(tmp / f'out-{case}')) + args
        else:
            args = [arg.format(case=case, **places) for arg in SCRIPT_ARGS[script]] + args
        # sample.py's case as the user runs it; the rest in this process, through the same run_cli (conftest)
        result = run(script, *args) if case in AS_SUBPROCESS else run_in_process(script, *args)
        return result, [fragment.format(**places) for fragment in fragments]

    return {case: run_case(case) for case in BAD_INPUTS}


@pytest.mark.xdist_group('bad_input')  # one worker makes bad_input_results (pytest.ini)
@pytest.mark.parametrize('case', BAD_INPUTS)
def test_bad_input_gets_one_clear_line(case, bad_input_results):
    result, fragments = bad_input_results[case]
    assert_one_line_error(result, *fragments)


@pytest.mark.parametrize('case', ['n_embd_not_divisible_by_n_head', 'stale_meta_vocab_size', 'meta_largest_id_null',
                                  'batch_too_large_for_memory', 'model_too_large_for_memory', 'ablate_batch_too_large'])
@pytest.mark.xdist_group('bad_input')
def test_a_mistake_leaves_no_out_dir_behind(case, bad_input_results):
    # Every check that only reads runs before the first write: a mistyped option creates nothing, and
    # neither does a size that cannot fit in memory.
    result, _ = bad_input_results[case]
    out_dirs = [arg for arg in result.args if arg.startswith('--out_dir=')]
    assert not os.path.exists(out_dirs[-1][len('--out_dir='):])


# ---------------------------------------------------------------- Ctrl-C

def metrics_rows(out_dir):
    """(iteration, step loss or '') of each row of metrics.csv."""
    with open(os.path.join(out_dir, 'metrics.csv')) as f:
        return [tuple(line.split(',')[:2]) for line in f.read().splitlines()[1:]]


# Where the Ctrl-C lands: in a training step (evaluation is rare), in an evaluation (200 batches
# each time, nearly all of the run), or in a save (its temp file is there; a checkpoint of ~19 MB
# takes tens of milliseconds to write).
CTRL_C_RUNS = dict(training=dict(eval_interval=1000),
                   evaluation=dict(eval_interval=1, eval_iters=200),
                   save=dict(eval_interval=1, n_layer=2, n_embd=256, n_head=4))


@pytest.mark.slow
@pytest.mark.parametrize('during', CTRL_C_RUNS)
def test_ctrl_c_saves_a_final_checkpoint_and_resume_continues(during, tiny_data, tmp_path, spawn):
    out_dir = str(tmp_path / 'out')
    args = tiny_train_args(tiny_data, out_dir, max_iters=100_000, log_interval=1, **CTRL_C_RUNS[during])
    process = spawn('train.py', *args)
    wait_for(lambda: os.path.exists(os.path.join(out_dir, 'metrics.csv')) and len(metrics_rows(out_dir)) > 3, process)
    if during == 'save':
        wait_for(lambda: temp_files(out_dir), process)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130 and 'Traceback' not in stderr
    done = int([it for it, step_loss in metrics_rows(out_dir) if step_loss][-1]) + 1  # iterations trained
    assert stderr.strip().splitlines() == [
        'Ctrl-C: finishing this iteration, then saving a checkpoint; Ctrl-C again stops at once',
        f'interrupted at iteration {done}: checkpoint saved to {out_dir}/ckpt.pt; '
        f'continue with --init_from=resume --out_dir={out_dir}']
    assert load_and_build(os.path.join(out_dir, 'ckpt.pt'))['iter_num'] == done
    assert temp_files(out_dir) == []

    # The resume through train.py's own run_cli in this process: what the Ctrl-C left is read the same, and the
    # suite is spared an interpreter start
    result = run_in_process('train.py', *args, '--init_from=resume', f'--max_iters={done + 3}')
    assert result.returncode == 0, result.stderr
    assert load_and_build(os.path.join(out_dir, 'ckpt.pt'))['iter_num'] == done + 3
    # No iteration lost or logged twice.
    assert [int(it) for it, _ in metrics_rows(out_dir)] == list(range(done + 4))


# train.py, with each save that starts after the first Ctrl-C held open once its temp file is written: the first
# Ctrl-C hands SIGINT back to Python's own handler, which is how the save knows it is the final one. A real save takes
# tens of milliseconds, and on a loaded runner the second Ctrl-C could land after it had finished. The save first
# leaves 'final save began' beside out_dir: a temp file alone may be a periodic save's, there before the first Ctrl-C,
# and a second SIGINT sent before the first one's handler has run merges with it (the kernel keeps one pending).
HELD_FINAL_SAVE = """
import os, runpy, signal, sys, time
import torch
save = torch.save
def save_and_hold(obj, f, *args, **kwargs):
    final = getattr(signal.getsignal(signal.SIGINT), '__name__', '') != 'on_signal'  # not a periodic save
    if final:
        open(os.path.join(os.path.dirname(os.path.dirname(f.name)), 'final save began'), 'w').close()
    save(obj, f, *args, **kwargs)
    if final:
        # one write, line and newline: print's two could be split by the second Ctrl-C's KeyboardInterrupt
        sys.stderr.write('final save written, not yet renamed\\n')
        sys.stderr.flush()
        time.sleep(120)
torch.save = save_and_hold
sys.argv[0] = 'train.py'
runpy.run_path('train.py', run_name='__main__')
"""


@pytest.mark.slow
def test_second_ctrl_c_during_the_final_save_keeps_the_previous_checkpoint(tiny_data, tmp_path, spawn):
    out_dir = str(tmp_path / 'out')
    args = tiny_train_args(tiny_data, out_dir, max_iters=100_000, eval_interval=5, log_interval=1)
    process = spawn('-c', HELD_FINAL_SAVE, *args)
    ckpt_path, metrics = os.path.join(out_dir, 'ckpt.pt'), os.path.join(out_dir, 'metrics.csv')
    # Past the save of iteration 5, so the final save has something new to write.
    wait_for(lambda: os.path.exists(metrics) and len(open(metrics).read().splitlines()) > 8, process)
    process.send_signal(signal.SIGINT)
    # The final save has begun. The second Ctrl-C lands while it writes or while it is held before its rename,
    # never after it: both must keep the checkpoint on disk.
    wait_for(lambda: os.path.exists(tmp_path / 'final save began'), process)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130 and 'Traceback' not in stderr
    lines = [line for line in stderr.strip().splitlines() if line != 'final save written, not yet renamed']
    assert lines[0].startswith('Ctrl-C: finishing this iteration') and len(lines) == 2, stderr
    prefix, suffix = 'stopped at once; the checkpoint of iteration ', f' in {ckpt_path} is kept'
    assert lines[1].startswith(prefix) and lines[1].endswith(suffix)
    named = int(lines[1][len(prefix):-len(suffix)])
    # The one on disk is the last periodic save's, whole, as the line says; the final save's temp file, interrupted
    # before its rename, is removed rather than taken for the checkpoint.
    assert load_and_build(ckpt_path)['iter_num'] == named >= 5
    assert temp_files(out_dir) == []


SLOW_EXIT = """
import atexit, runpy, sys, time
atexit.register(time.sleep, 1)  # an exit that takes a while, as one freeing torch's memory and threads does
sys.argv[0] = 'train.py'
runpy.run_path('train.py', run_name='__main__')
"""


@pytest.fixture
def spawned():
    """Processes a test starts itself, killed after it should it fail midway."""
    started = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.mark.slow
def test_ctrl_c_pressed_on_through_the_save_and_the_exit_changes_nothing(tiny_data, tmp_path, spawned):
    """Ctrl-C once, then again every few milliseconds from the moment the saved line is printed until the process
    is gone: the save's line stays the last word, exit code 130, and nothing of Python's (a traceback, 'Exception
    ignored', a death by SIGINT in the interpreter's exit, where Python puts the default handler back)."""
    out_dir = str(tmp_path / 'out')
    # cold, as a user starts it: a fork of the warm launcher ends by os._exit, without the interpreter's exit
    process = subprocess.Popen([sys.executable, '-c', SLOW_EXIT, *tiny_train_args(
        tiny_data, out_dir, max_iters=100_000, eval_interval=5, log_interval=1)], cwd=REPO_ROOT, env=ENV,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, preexec_fn=sigint_as_a_terminal_sends_it)
    spawned.append(process)
    metrics = os.path.join(out_dir, 'metrics.csv')
    wait_for(lambda: os.path.exists(metrics) and len(open(metrics).read().splitlines()) > 3, process)
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(process.stderr), daemon=True)
    reader.start()
    process.send_signal(signal.SIGINT)
    deadline, landed = time.monotonic() + 60, 0
    while not any(line.startswith('interrupted at iteration') for line in lines) and process.poll() is None:
        assert time.monotonic() < deadline
        time.sleep(0.0002)
    while process.poll() is None and time.monotonic() < deadline:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGINT)
            landed += 1
        time.sleep(0.003)
    process.wait(timeout=60)
    reader.join(timeout=10)
    assert process.returncode == 130, (process.returncode, ''.join(lines))
    said = ''.join(lines)
    assert landed, 'the process was gone before the second Ctrl-C: nothing tested'
    assert not any(word in said for word in ('Traceback', 'Exception ignored', 'KeyboardInterrupt')), said
    ending = [line for line in lines if line.strip()][-1]
    assert ending.startswith('interrupted at iteration') and 'continue with --init_from=resume' in ending, said
    assert sum(line.startswith('interrupted') for line in lines) == 1, said
    assert load_and_build(os.path.join(out_dir, 'ckpt.pt'))['iter_num'] > 0


def test_train_runs_outside_the_main_thread(tiny_data, tmp_path):
    # Signal handlers can only be set from the main thread; a train() in a thread must still work.
    summaries = []
    worker = threading.Thread(target=lambda: summaries.append(train.train(train.parse_train_args(
        tiny_train_args(tiny_data, str(tmp_path), max_iters=4, eval_interval=2)))))
    worker.start()
    worker.join()
    assert summaries and summaries[0]['iters'] == 4


# ---------------------------------------------------------------- SIGKILL at random moments

# Importing torch costs seconds of CPU per process, too much for dozens of trials on a 2-core
# runner. So one chain of trials starts every run cold, `python train.py ARGS` as a user does, and
# a longer chain runs train.py in forks of the worker's warm launcher (conftest.WarmLauncher), which
# has imported torch once. A fork runs train.py as __main__ in a process of its own, which the kill
# ends like any other; only the interpreter's start is shared.
# The cold chain shows that a run started as a user starts it behaves as the forks do (it was 6 trials: 2 show
# it for a third of the CPU, about 3 s an interpreter start on a Zen 3); the forks carry the statistics.
COLD_KILLS, FORKED_KILLS = 2, 40
INSIDE_SAVES = 5  # kills that must land inside a save; the forked chain goes on (to 120) until they have


def start_cold(argv, log):
    """`python train.py ARGV`, output to log; returns its pid and a wait() for its exit status."""
    with open(log, 'w') as f:
        process = subprocess.Popen([sys.executable, 'train.py', *argv], cwd=REPO_ROOT, env=ENV, stdout=f,
                                   stderr=subprocess.STDOUT)
    return process.pid, process.wait


def forked_start(warm):
    """A start function like start_cold that runs train.py in a fork of the warm launcher."""
    def start_forked(argv, log):
        process = warm('train.py', *argv, stdout=log, stderr='stdout')
        return process.pid, process.wait
    return start_forked


def log_says(log, text):
    return os.path.exists(log) and text in open(log).read()


def kill_chain(start_run, kills, data_dir, out_dir, seed, inside_saves=0):
    """Start train.py, SIGKILL it at a random moment, check what is left, resume, and so on: `kills` times, and on
    (up to three times as many) until `inside_saves` of the kills have landed inside a checkpoint save, which on a
    busy machine takes longer. Returns, for each kill, whether it landed inside a save."""
    rng = random.Random(seed)
    # Saving every iteration, so that many kills land inside a save.
    args = tiny_train_args(data_dir, out_dir, max_iters=100_000, eval_interval=1, eval_iters=1, log_interval=1000,
                           n_embd=128, n_head=4)
    ckpt_path = os.path.join(out_dir, 'ckpt.pt')
    os.makedirs(out_dir + '-logs')
    last_iter, mid_save = 0, []
    for trial in itertools.count():
        log = os.path.join(out_dir + '-logs', f'{trial}.log')
        if trial >= kills and (sum(mid_save) >= inside_saves or trial >= 3 * kills):
            # at last the run finishes normally from what the last kill left
            pid, wait = start_run([*args, '--init_from=resume', f'--max_iters={last_iter + 2}'], log)
            assert wait() == 0, open(log).read()
            assert load_and_build(ckpt_path)['iter_num'] == last_iter + 2
            assert temp_files(out_dir) == []  # and nothing stray remains
            return mid_save
        pid, wait = start_run([*args, f"--init_from={'resume' if trial else 'scratch'}"], log)
        try:
            # 'device ...' is printed just before the training loop.
            wait_for(lambda: any(log_says(log, text) for text in ('\ndevice ', 'error: ', 'Traceback')))
            assert log_says(log, '\ndevice '), open(log).read()
            if trial == 0:
                wait_for(lambda: os.path.exists(ckpt_path))
            time.sleep(rng.uniform(0, 0.4))
        finally:  # on a failure too: no run is left behind
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            status = wait()
        assert status == -signal.SIGKILL, open(log).read()
        # Only the victim's own partial files may be left: a start removes those of earlier victims.
        left = temp_files(out_dir)
        assert set(left) <= {f'.ckpt.pt.tmp-{pid}', f'.best.pt.tmp-{pid}', f'.metrics.csv.tmp-{pid}'}, left
        ckpt = load_and_build(ckpt_path)
        if os.path.exists(os.path.join(out_dir, run_files.BEST_FILE)):  # best.pt is replaced whole too
            load_best(os.path.join(out_dir, run_files.BEST_FILE))
        assert ckpt['iter_num'] >= last_iter  # a resume never goes back
        last_iter = ckpt['iter_num']
        mid_save.append(f'.ckpt.pt.tmp-{pid}' in left)


@pytest.mark.slow
def test_sigkill_at_random_moments_always_leaves_a_loadable_checkpoint(tiny_data, tmp_path, warm):
    with ThreadPoolExecutor(max_workers=2) as pool:
        cold = pool.submit(kill_chain, start_cold, COLD_KILLS, tiny_data, str(tmp_path / 'cold'), 0)
        forked = pool.submit(kill_chain, forked_start(warm), FORKED_KILLS, tiny_data, str(tmp_path / 'forked'), 1,
                             INSIDE_SAVES)
        mid_save = cold.result() + forked.result()  # re-raises a chain's failure
    # Every trial got this far only with a loadable checkpoint.
    print(f"\nSIGKILL: {len(mid_save)} trials ({COLD_KILLS} cold, {len(mid_save) - COLD_KILLS} forked), {sum(mid_save)} landed "
          f"inside a save, {len(mid_save)} left a loadable checkpoint")
    assert len(mid_save) >= COLD_KILLS + FORKED_KILLS
    assert sum(mid_save) >= INSIDE_SAVES  # the test means little unless kills land inside saves


# ---------------------------------------------------------------- non-finite loss, full disk

@pytest.mark.parametrize('start_from, message', [
    # Resumed at iteration 10 with an absurd learning rate: the step at 10 blows the weights up,
    # and the loss of iteration 11 is NaN.
    ('resume', 'error: loss is nan at iteration 11; training stopped and the checkpoint of iteration 10 in '
               '{ckpt} is kept. Try a lower --learning_rate (now 1e+30) or a --tie_mode other than '
               "'tied' (see README)"),
    # From scratch, saving every iteration: the evaluation at iteration 1 already sees NaN, and
    # the broken weights are not saved.
    ('scratch', 'error: evaluation loss is nan at iteration 1; training stopped and no checkpoint of this run was '
                "saved yet. Try a lower --learning_rate (now 1e+30) or a --tie_mode other than 'tied' (see README)"),
], ids=['resume', 'scratch'])
def test_non_finite_loss_names_the_iteration_and_keeps_the_last_good_checkpoint(start_from, message, tiny_data,
                                                                                 trained, tmp_path):
    out_dir = copy_of(trained, tmp_path) if start_from == 'resume' else str(tmp_path / 'out')
    ckpt_path = os.path.join(out_dir, 'ckpt.pt')
    # Resumed, the step loss of iteration 11 sees it first; from scratch, the evaluation of iteration 1.
    result = run_in_process('train.py', *tiny_train_args(tiny_data, out_dir, max_iters=20, learning_rate=1e30,
                                                         warmup_iters=0,
                                                         eval_interval=5 if start_from == 'resume' else 1),
                            f'--init_from={start_from}')
    assert_one_line_error(result)
    assert result.stderr.strip() == message.format(ckpt=ckpt_path)
    if start_from == 'resume':
        assert load_and_build(ckpt_path)['iter_num'] == 10
    else:
        assert not os.path.exists(ckpt_path)


# A full disk: the process's RLIMIT_FSIZE (file_size) makes a write past it fail with EFBIG (Python ignores SIGXFSZ),
# as a full disk fails with ENOSPC; unlike a read-only folder, it also holds for root.
@pytest.mark.parametrize('full_at, message', [
    # The next checkpoint (~200 kB) no longer fits, metrics.csv still does; iteration 15's validation loss is
    # the best yet, and best.pt (written first) is the first file that does not fit.
    ('checkpoint', 'error: cannot save the best weights of iteration 15 to {best}: File too large; the checkpoint of '
                   'iteration 10 in {ckpt} is kept. Free some space (or choose another --out_dir), then continue '
                   'with --init_from=resume'),
    # Not even the next row of metrics.csv fits.
    ('metrics', 'error: cannot write to --out_dir={out}: File too large; the checkpoint of iteration 10 in {ckpt} '
                'is kept'),
], ids=['checkpoint', 'metrics'])
def test_full_disk_gives_one_line_and_keeps_the_previous_checkpoint(full_at, message, tiny_data, trained, tmp_path,
                                                                      warm):
    out_dir = copy_of(trained, tmp_path)
    ckpt_path = os.path.join(out_dir, 'ckpt.pt')
    limit = 50_000
    if full_at == 'metrics':  # room for the rows a resume at 10 keeps (iterations 0 and 5), not for one more
        with open(os.path.join(out_dir, 'metrics.csv'), 'rb') as f:
            lines = f.readlines()
        limit = len(b''.join(line for line in lines if not line[:1].isdigit() or int(line.split(b',')[0]) < 10)) + 20
    result = warm_run(warm, 'train.py', *tiny_train_args(tiny_data, out_dir, max_iters=20, eval_interval=5),
                      '--init_from=resume', file_size=limit)  # a process of its own (conftest.WarmLauncher)
    assert_one_line_error(result)
    assert result.stderr.strip() == message.format(ckpt=ckpt_path, out=out_dir,
                                                   best=os.path.join(out_dir, run_files.BEST_FILE))
    assert load_and_build(ckpt_path)['iter_num'] == 10
    assert temp_files(out_dir) == []


@pytest.mark.parametrize('left', [('ckpt.pt',), ('best.pt',), ('metrics.csv',), ('best.pt', 'metrics.csv'), 'link'])
def test_a_fresh_start_never_replaces_any_file_of_an_earlier_run(left, tiny_data, trained, tmp_path):
    """Whatever an earlier run left in out_dir (its checkpoint, or only best.pt and metrics.csv of a run killed
    before its first checkpoint, or a checkpoint's link whose disk is not mounted), a fresh start refuses to write
    over it, in one line, every byte kept."""
    out_dir = tmp_path / 'out'
    out_dir.mkdir()
    if left == 'link':
        os.symlink(tmp_path / 'unmounted' / 'ckpt.pt', out_dir / 'ckpt.pt')
    else:
        for name in left:
            shutil.copyfile(os.path.join(trained, name), out_dir / name)
    def files():  # each name and its bytes (a link: where it points)
        return {name: os.readlink(out_dir / name) if left == 'link' else (out_dir / name).read_bytes()
                for name in os.listdir(out_dir)}
    before = files()
    with pytest.raises(UserError, match=f"--out_dir={out_dir} holds an earlier run's .*: resume it"):
        train.train(train.parse_train_args(tiny_train_args(tiny_data, str(out_dir))))
    assert files() == before


def test_an_out_dir_another_train_py_holds_is_one_line_until_it_is_free(tiny_data, tmp_path):
    import fcntl
    out_dir = tmp_path / 'out'
    out_dir.mkdir()
    other = os.open(out_dir, os.O_RDONLY)  # as the other train.py holds it while it runs
    fcntl.flock(other, fcntl.LOCK_EX)
    with pytest.raises(UserError, match=f'--out_dir={out_dir} is in use by another train.py'):
        train.train(train.parse_train_args(tiny_train_args(tiny_data, str(out_dir))))
    assert os.listdir(out_dir) == []
    os.close(other)
    assert train.train(train.parse_train_args(tiny_train_args(tiny_data, str(out_dir))))['iters'] > 0


def test_a_disk_too_full_for_the_write_probe_leaves_no_probe_behind(tiny_data, tmp_path, warm):
    out_dir = str(tmp_path / 'out')
    result = warm_run(warm, 'train.py', *tiny_train_args(tiny_data, out_dir), file_size=1)  # 'ok' is two bytes
    assert_one_line_error(result, f'cannot write to --out_dir={out_dir}: File too large; choose a writable folder')
    assert os.listdir(out_dir) == []


# ---------------------------------------------------------------- out of memory during a run

def refused_allocation():
    """Raise what torch's CPU allocator really raises when memory runs out: a request for 1 PiB, refused at
    once (nothing is allocated). A GPU raises torch.OutOfMemoryError, the same handling."""
    torch.empty(2 ** 50, dtype=torch.uint8)


def files_of(folder):
    return {name: hashlib.sha256((folder / name).read_bytes()).hexdigest() for name in sorted(os.listdir(folder))}


OOM_ADVICE = ('--batch_size=8, --block_size=16, --gradient_accumulation_steps=1; use a smaller --batch_size or '
              '--block_size (a larger --gradient_accumulation_steps keeps the tokens per iteration at no extra memory)')


@pytest.mark.parametrize('start_from, fail_at, kept', [
    ('resume', 10, 'the checkpoint of iteration 10 in {ckpt} is kept'),  # the first step after resuming
    ('scratch', 0, 'no checkpoint of this run was saved yet'),
    ('scratch', 7, 'the checkpoint of iteration 5 in {ckpt} is kept'),  # after a save
], ids=['resume', 'scratch', 'after_a_save'])
def test_out_of_memory_in_a_step_is_one_line_and_loses_nothing(start_from, fail_at, kept, tiny_data, trained,
                                                                tmp_path, monkeypatch):
    # What a batch too large for the device meets at its first step, at iteration fail_at.
    out_dir = copy_of(trained, tmp_path) if start_from == 'resume' else str(tmp_path / 'out')
    ckpt_path = os.path.join(out_dir, 'ckpt.pt')
    before = files_of(tmp_path / 'out') if start_from == 'resume' else {}
    real_step, started = train.training_step, 10 if start_from == 'resume' else 0
    steps = []

    def step(*args, **kwargs):
        steps.append(started + len(steps))
        if steps[-1] == fail_at:
            refused_allocation()
        return real_step(*args, **kwargs)
    monkeypatch.setattr(train, 'training_step', step)
    cfg = train.parse_train_args(tiny_train_args(tiny_data, out_dir, max_iters=20, eval_interval=5) +
                                 [f'--init_from={start_from}'])
    with pytest.raises(UserError) as info:
        train.train(cfg)
    assert str(info.value) == (f"out of memory on cpu (could not allocate 1.0 PiB) at iteration {fail_at} with "
                               f"{OOM_ADVICE}; {kept.format(ckpt=ckpt_path)}")
    if fail_at in (0, 10):  # nothing had been written: out_dir is as it was, byte for byte (a new one empty)
        assert files_of(tmp_path / 'out') == before
    else:
        assert load_and_build(ckpt_path)['iter_num'] == 5
        assert [int(it) for it, _ in metrics_rows(out_dir)] == [0, 5]
        assert temp_files(out_dir) == []


def test_out_of_memory_in_bench_is_one_line(monkeypatch):
    import bench

    def step(*args, **kwargs):
        refused_allocation()
    monkeypatch.setattr(train, 'training_step', step)
    with pytest.raises(UserError) as info:
        bench.main(['--n_layer=1', '--n_head=2', '--n_embd=32', '--block_size=16', '--batch_size=8', '--vocab_size=50',
                    '--bench_warmup=1', '--bench_iters=2', '--device=cpu'])
    assert str(info.value) == f"out of memory (could not allocate 1.0 PiB); {OOM_ADVICE}"


def test_out_of_memory_while_reading_data_or_preparing_it_is_one_line(tiny_data, tmp_path, monkeypatch):
    # numpy's MemoryError, really raised ("Unable to allocate 1.00 PiB ..."): a dataset or a corpus
    # larger than the machine's memory.
    real_in_memory = prepared_data.in_memory
    calls = []

    def in_memory(tokens):  # the second split, val.bin, cannot get its int64 copy
        calls.append(len(tokens))
        return np.empty(2 ** 47) if len(calls) == 2 else real_in_memory(tokens)
    monkeypatch.setattr(prepared_data, 'in_memory', in_memory)
    with pytest.raises(UserError) as info:
        prepared_data.load_splits(train.parse_train_args([f'--data_dir={tiny_data}', '--dataset=tiny']))
    assert str(info.value) == (f"out of memory (could not allocate 1.00 PiB) reading {tiny_data}/tiny/val.bin: "
                               f"train.py holds a split of up to 1 GiB in memory, 8 bytes a token (a larger one stays "
                               f"in its file); use less data or a machine with more memory")
    monkeypatch.setattr(prepare, 'tokenize', lambda text, tokenizer: np.empty(2 ** 47))
    (tmp_path / 'book.txt').write_text('some text', encoding='utf-8')
    with pytest.raises(UserError) as info:
        prepare.main([f'--input={tmp_path / "book.txt"}', f'--out_dir={tmp_path / "data"}'])
    assert str(info.value) == (f"out of memory (could not allocate 1.00 PiB) preparing --input={tmp_path / 'book.txt'}"
                               f": prepare.py holds the whole text and its token ids in memory at once; use a smaller "
                               f"file or a machine with more memory")


# ---------------------------------------------------------------- prepare.py killed midway

PREPARE_KILLS = 16


@pytest.mark.slow
def test_prepare_killed_midway_leaves_a_complete_dataset_or_none(tmp_path, spawn):
    # Two inputs of different sizes, prepared in turn into the same folder, so that old and new
    # files differ. Half the kills come at a random moment of the run, half while it writes.
    texts = {'a': tiny_corpus(40_000, seed=1), 'b': tiny_corpus(30_000, seed=2)}
    expected = {}  # the token ids of each input, by the sha256 that meta.json records
    for name, text in texts.items():
        (tmp_path / f'{name}.txt').write_text(text, encoding='utf-8')
        expected[hashlib.sha256(text.encode('utf-8')).hexdigest()] = prepare.tokenize(text, 'char')[0]
    data_root = tmp_path / 'data'
    data_dir = data_root / 'book'
    rng = random.Random(0)
    states, victims, killed_writing = [], [], 0
    for trial in range(PREPARE_KILLS + 1):
        process = spawn('prepare.py', f"--input={tmp_path / ('ab'[trial % 2] + '.txt')}", '--dataset=book',
                        f'--out_dir={data_root}')
        if trial == PREPARE_KILLS:  # the last run completes
            assert process.wait(timeout=120) == 0, process.stderr.read()
        else:
            if trial % 2:  # as soon as it writes, give or take
                while process.poll() is None and not (data_root.exists() and temp_files(data_root)):
                    time.sleep(0.0005)
                time.sleep(rng.uniform(0, 0.01))
            else:
                time.sleep(rng.uniform(0, 1.0))
            process.kill()
            process.wait()
            victims.append(process.pid)
        # The new dataset grows in a folder beside the old one (.book.tmp-PID): only killed runs leave one.
        left = temp_files(data_root) if data_root.exists() else []
        assert all(int(name.rsplit('-', 1)[1]) in victims for name in left), left
        killed_writing += any(name.endswith(f'-{process.pid}') for name in left)
        if 'complete' not in states and not data_dir.exists():  # no run got to its swap yet (a slow machine)
            state = 'none yet'
        else:
            state = 'complete'
            meta = prepared_data.load_meta(data_dir)  # sizes agree with meta.json, after undoing a half swap
            ids = np.concatenate([np.fromfile(data_dir / 'train.bin', dtype=np.uint16),
                                  np.fromfile(data_dir / 'val.bin', dtype=np.uint16)])
            assert np.array_equal(ids, expected[meta['source_sha256']])  # and the content is that input's, whole
        if trial < PREPARE_KILLS:
            states.append(state)
    assert state == 'complete' and temp_files(data_root) == [] and os.listdir(data_root) == ['book']
    print(f"\nprepare.py: {PREPARE_KILLS} kills, {killed_writing} while writing; left {states.count('complete')} "
          f"complete datasets")
    assert killed_writing  # some kills did land while it wrote

    # What train.py then says about a folder left without meta.json (by hand: prepare.py no longer leaves one).
    os.remove(data_dir / 'meta.json')
    result = run_in_process('train.py', f'--data_dir={data_root}', '--dataset=book', '--device=cpu')
    assert_one_line_error(result, f'no prepared data in {data_dir}',
                          f'create it with: python prepare.py --input=FILE --dataset=book --out_dir={data_root}')


# Every path a script is told to write: a missing folder is made (the obvious reading); a file where a folder
# should be is one line naming the option and the file, exit 2, and nothing is left behind.
BLOCKED_OUTPUTS = {
    'train.py': lambda data, blocked: tiny_train_args(data, f'{blocked}/run', max_iters=2),
    'prepare.py': lambda data, blocked: [f'--input={data}/tiny.txt', f'--out_dir={blocked}/data'],
    'ablate.py': lambda data, blocked: ['--quick', f'--data_dir={data}', '--dataset=tiny', '--modes=tied',
                                        f'--out_dir={blocked}/grid'],
    'init_loss.py': lambda data, blocked: ['--plot=' + f'{blocked}/fig.png', '--modes=tied', '--vocab_size=20',
                                           '--n_embd=16', '--n_layer=1', '--n_head=2', '--seeds=1'],
    'export.py': lambda data, blocked: ['--out_dir=nowhere-needed', f'--to={blocked}/hf'],
}


@pytest.mark.parametrize('script', BLOCKED_OUTPUTS)
def test_a_file_where_an_output_folder_should_be_is_one_line_and_nothing_is_written(script, tiny_data, tmp_path,
                                                                                      trained):
    blocked = tmp_path / 'a-file'
    blocked.write_text('not a folder')
    args = BLOCKED_OUTPUTS[script](tiny_data, blocked)
    if script == 'export.py':
        args[0] = f'--out_dir={trained}'
    result = run_in_process(script, *args)
    line = assert_one_line_error(result, str(blocked))
    assert 'a file, not a folder' in line or 'Not a directory' in line, line
    assert sorted(os.listdir(tmp_path)) == ['a-file'] and blocked.read_text() == 'not a folder'


def test_missing_output_folders_are_made(tiny_data, tmp_path):
    result = run_in_process('init_loss.py', f'--plot={tmp_path}/new/deeper/fig.png', '--modes=tied', '--vocab_size=20',
                 '--n_embd=16', '--n_layer=1', '--n_head=2', '--seeds=1')
    assert result.returncode == 0, result.stderr
    assert (tmp_path / 'new' / 'deeper' / 'fig.png').read_bytes()[:4] == b'\x89PNG'


def test_a_summary_that_cannot_be_written_is_one_line_and_the_runs_stay(tiny_data, tmp_path, warm):
    # One run, trained in this process (--jobs=1: no worker to start); then ablate.py as a process under the
    # file-size limit (a fork of the warm launcher, conftest.WarmLauncher), which only has the summary left to write.
    args = ['--quick', f'--data_dir={tiny_data}', '--dataset=tiny', '--modes=tied', f'--out_dir={tmp_path}/grid',
            '--jobs=1']
    with without_matplotlib():  # its figures are not what this test reads
        assert run_in_process('ablate.py', *args).returncode == 0
    os.remove(tmp_path / 'grid' / 'summary.md')
    result = warm_run(warm, 'ablate.py', *args, timeout=120, file_size=2000)  # as a disk that is full
    line = assert_one_line_error(result, f'cannot write the summary in --out_dir={tmp_path}/grid/summary.md',
                                 'File too large')
    assert 'trained' not in result.stdout  # nothing trained again: the finished run was skipped
    assert (tmp_path / 'grid' / 'tied-seed1337' / 'result.json').exists()
    assert temp_files(tmp_path / 'grid') == [] and line
