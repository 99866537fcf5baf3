"""A resume continues the run it resumes, by one rule (lib/training_run.resume_settings): every setting its command
line leaves out is the checkpoint's. A run with settings away from every default is stopped, by Ctrl-C and by a
kill after a checkpoint, and resumed with the command the Ctrl-C line prints; it must end bit for bit where the same
run ends uninterrupted. Then the rule's edges: a given setting that differs is said, one the checkpoint holds is
refused, and data prepared again under the run's name is refused, each in one line."""

import os
import re
import shlex
import signal

import pytest
import torch

import train
from conftest import tiny_train_args
from lib.command_line import UserError

# Settings a resume must not fall back to their defaults: the batch, the accumulation, the seed, float32, the length,
# the untie, Muon, a zero head, the evaluation's rhythm (and TINY_TRAIN's own shape and rates).
CASES = dict(
    adamw_untie=dict(batch_size=4, gradient_accumulation_steps=2, seed=7, max_iters=12, eval_interval=4,
                     log_interval=2, untie_at=0.5, weight_decay=0.05, beta2=0.95),
    muon_zero_head=dict(batch_size=6, seed=11, max_iters=12, eval_interval=4, optimizer='muon', muon_lr=4e-3,
                        tie_mode='untied', head_init='zero', grad_clip=0.5, min_lr=3e-4),
)


class Killed(BaseException):
    """Stands in for SIGKILL: nothing of train() catches it, so the run stops where it is, its files as they are."""


@pytest.fixture(autouse=True)
def ctrl_c_reaches_the_run():
    """A shell's background job starts with SIGINT ignored, and then no Ctrl-C reaches a run: these tests send one."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def stop_at(monkeypatch, step, how):
    """Stop the run in its `step`-th optimizer step (0-based): a Ctrl-C there, or a kill there."""
    calls, draw = [0], train.next_batches

    def next_batches(*args, **kwargs):
        if calls[0] == step:
            if how == 'kill':
                raise Killed()
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C: the step finishes, a checkpoint is saved, then it stops
        calls[0] += 1
        return draw(*args, **kwargs)
    monkeypatch.setattr(train, 'next_batches', next_batches)


def weights(summary):
    return {name: tensor.clone() for name, tensor in summary['model'].state_dict().items()}


@pytest.fixture(scope='module')
def uninterrupted(tiny_data, tmp_path_factory):
    """Each case trained in one go: (its final weights, its fingerprint)."""
    runs = {}
    for name, case in CASES.items():
        summary = train.train(train.parse_train_args(tiny_train_args(
            tiny_data, str(tmp_path_factory.mktemp(name)), **case)))
        runs[name] = weights(summary), summary['data_fingerprint']
    return runs


@pytest.mark.parametrize('how', ['ctrl_c', 'kill'])
@pytest.mark.parametrize('name', list(CASES))
def test_a_stopped_run_resumed_with_the_printed_command_ends_bit_for_bit_where_it_would_have(
        name, how, uninterrupted, tiny_data, tmp_path, monkeypatch, capsys):
    out_dir = str(tmp_path / "my run's out")  # the printed command is pasted into a shell: quoted
    stop_at(monkeypatch, 6, how)  # Ctrl-C saves iteration 7; a kill leaves iteration 4's checkpoint, 2 steps on
    with pytest.raises((KeyboardInterrupt, Killed)) as stopped:
        train.train(train.parse_train_args(tiny_train_args(tiny_data, out_dir, **CASES[name])))
    if how == 'ctrl_c':
        command = shlex.split(re.search(r'continue with (.*)$', str(stopped.value)).group(1))
    else:
        command = ['--init_from=resume', f'--out_dir={out_dir}']  # the same line, which a kill never prints
    assert command == ['--init_from=resume', f'--out_dir={out_dir}']
    monkeypatch.undo()
    capsys.readouterr()
    summary = train.train(train.parse_train_args(command))
    assert 'resume:' not in capsys.readouterr().out  # nothing was given, so nothing differs
    final, fingerprint = uninterrupted[name]
    assert summary['data_fingerprint'] == fingerprint
    for key, tensor in final.items():
        assert torch.equal(summary['model'].state_dict()[key], tensor), key


def test_a_given_setting_is_said_and_one_the_checkpoint_holds_is_refused(tiny_data, tmp_path, capsys):
    out_dir = str(tmp_path / 'out')
    case = dict(CASES['adamw_untie'], max_iters=4)
    train.train(train.parse_train_args(tiny_train_args(tiny_data, out_dir, **case)))
    capsys.readouterr()
    resume = ['--init_from=resume', f'--out_dir={out_dir}']
    summary = train.train(train.parse_train_args(resume + ['--max_iters=6', '--batch_size=4']))
    said = [line for line in capsys.readouterr().out.splitlines() if line.startswith('resume:')]
    assert said == ['resume: --max_iters=6 from here on (the checkpoint was made with max_iters=4)']  # 4: the same
    assert summary['iters'] == 6
    tied = str(tmp_path / 'tied')  # to untie at its end, so its checkpoint is still tied
    train.train(train.parse_train_args(tiny_train_args(tiny_data, tied, **dict(case, untie_at=0.9))))
    with pytest.raises(UserError, match=r'--untie_at=0\.1 of --max_iters=4 unties at iteration 0, before 4'):
        train.train(train.parse_train_args(['--init_from=resume', f'--out_dir={tied}', '--untie_at=0.1']))
    for given, held in (('--seed=8', 'seed=7'), ('--n_embd=64', 'n_embd=32'), ('--tie_mode=untied', 'tie_mode=tied'),
                        ('--beta2=0.99', 'beta2=0.95'), ('--dataset=other', 'dataset=tiny'),
                        ('--optimizer=muon', 'optimizer=adamw')):
        with pytest.raises(UserError, match=re.escape(f'{given} disagrees with the checkpoint') + '.*' + held):
            train.train(train.parse_train_args(resume + [given]))


def test_a_resume_on_data_prepared_again_from_another_text_is_refused(tiny_data, tmp_path):
    """The checkpoint records its text's hash and sizes (meta.json's): the same name over another text, even one of
    the same characters, must not be trained on as if it were the run's."""
    import prepare
    from conftest import tiny_corpus
    data = tmp_path / 'data'
    data.mkdir()
    source = data / 'tiny.txt'
    source.write_text(tiny_corpus(), encoding='utf-8')
    prepare.main([f'--input={source}', '--dataset=tiny', f'--out_dir={data}'])
    out_dir = str(tmp_path / 'out')
    train.train(train.parse_train_args(tiny_train_args(str(data), out_dir, max_iters=2, eval_interval=2)))
    source.write_text(tiny_corpus()[::-1], encoding='utf-8')  # the same characters, another text
    prepare.main([f'--input={source}', '--dataset=tiny', f'--out_dir={data}'])
    with pytest.raises(UserError, match=r'trained on another text than .*\(source_sha256'):
        train.train(train.parse_train_args(['--init_from=resume', f'--out_dir={out_dir}']))


def test_a_metrics_file_edited_by_hand_is_one_line_on_resume(tiny_data, tmp_path):
    """A resume keeps metrics.csv's rows before its checkpoint, so it reads them: a byte that is not UTF-8, or a
    folder in its place, is one line that says how to go on, and the checkpoint is left as it was."""
    out_dir = tmp_path / 'out'
    train.train(train.parse_train_args(tiny_train_args(tiny_data, str(out_dir), max_iters=4, eval_interval=2)))
    with open(out_dir / 'metrics.csv', 'ab') as f:
        f.write(b'caf\xe9\n')
    before = (out_dir / 'ckpt.pt').read_bytes()
    with pytest.raises(UserError, match=r'cannot read .*metrics\.csv to keep its rows before iteration 4 .*move it'):
        train.train(train.parse_train_args(['--init_from=resume', f'--out_dir={out_dir}', '--max_iters=6']))
    assert (out_dir / 'ckpt.pt').read_bytes() == before


def test_every_setting_a_checkpoint_holds_is_checked_as_a_typed_one_is(tiny_data, tmp_path, monkeypatch):
    """The checkpoint's settings win, so they pass the checks a typed setting passes: a checkpoint edited by hand (or
    crafted) with any one setting changed is refused in one line wherever the same value typed is, and any one of
    its fields of another type than train.py writes is one line too, never a traceback deep in train()."""
    from lib import training_run
    from lib.run_files import CHECKPOINT_KEYS, load_checkpoint
    from lib.training_run import LOCAL_KEYS, resume_settings
    out_dir = tmp_path / 'out'
    train.train(train.parse_train_args(tiny_train_args(tiny_data, str(out_dir), max_iters=2, eval_interval=2)))
    ckpt = torch.load(out_dir / 'ckpt.pt', weights_only=False)
    resume = train.parse_train_args(['--init_from=resume', f'--out_dir={out_dir}'])

    def refused(edited, saved=False):  # the settings' edits are handed over as loaded, the fields' saved and read
        if saved:
            torch.save(edited, out_dir / 'ckpt.pt')
        monkeypatch.setattr(training_run, 'load_checkpoint', load_checkpoint if saved else lambda *_: edited)
        try:
            resume_settings(resume, train.DEFAULTS)
        except UserError:
            return True
        return False

    keys = [key for key, default in train.DEFAULTS.items() if key not in LOCAL_KEYS]
    assert {'batch_size', 'learning_rate', 'tie_mode', 'n_embd', 'compile', 'untie_at', 'vocab_size'} <= set(keys)
    refusals = 0
    for key in keys:
        text = isinstance(train.DEFAULTS[key], str)
        for value in (['x', 'tide'] if text else [-1, 0, 1.5, 2 ** 70, float('nan'), 'x', True]):
            edited = dict(ckpt, **{part: dict(ckpt[part]) for part in ('config', 'model_args')})
            for part in ('config', 'model_args'):
                if key in edited[part]:
                    edited[part][key] = value
            try:
                train.parse_train_args([f'--{key}={value}'])
                typed_refused = False
            except UserError:
                typed_refused = True
            # refused where typed it is (a bool's 0 typed is the text '0', false; from a file the number, refused)
            assert refused(edited) or not typed_refused, (key, value)
            refusals += typed_refused
    assert refusals > 100  # the planted values do reach the checks
    for key, kind in CHECKPOINT_KEYS.items():
        assert refused(dict(ckpt, **{key: 'x'}), saved=True), key
    assert refused(dict(ckpt, iter_num=-50), saved=True)
