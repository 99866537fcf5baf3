"""Twenty short float32 runs held bit for bit to a record: every tie mode, the premise of (*), input_grad_scale,
Muon, each end's rate and decay, --untie_at under AdamW and Muon, dropout with gradient accumulation and a padded
head, and a resume. Each must give the recorded training losses (as float.hex), metrics.csv rows (without their
times), best validation loss and final weights (sha256), so that a rewrite of train.py or model.py that computes
anything else fails here, on the machine kind the record was made on.

Other CPUs and torch builds round differently, so a run is compared only where a record under
docs/results/reference-runs/ names this machine (torch version, CPU family, native bf16 or not, no ISA cap), and
skipped elsewhere. To make a record for another machine, or of another checkout before changing it:

    python prepare.py --input=tinyshakespeare.txt --dataset=shakespeare_char --out_dir=DATA_DIR
    python tests/test_reference_runs.py DATA_DIR OUT.json     # records the checkout this file is in
"""
import contextlib
import csv
import glob
import hashlib
import io
import json
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # run as a script, too
from model import TIE_MODES  # noqa: E402  a mode added to model.py is recorded (test_every_run_has_a_record)

RECORDS = os.path.join(os.path.dirname(HERE), 'docs', 'results', 'reference-runs')
SHARED_TEXT = os.path.join(os.path.dirname(os.path.dirname(HERE)), 'shared', 'data', 'tinyshakespeare.txt')

BASE = ['--dataset=shakespeare_char', '--n_layer=2', '--n_head=2', '--n_embd=32', '--block_size=16', '--batch_size=8',
        '--max_iters=20', '--eval_interval=10', '--eval_iters=2', '--log_interval=1', '--warmup_iters=4',
        '--learning_rate=3e-3', '--device=cpu', '--dtype=float32', '--compile=false', '--progress=false',
        # the init the records were made with (GPT-2's, train.py's default then), stated so they hold whatever it is now
        '--init_std=0.02', '--emb_scale=false', '--zero_init_residual=false']
RUNS = {mode: [f'--tie_mode={mode}'] for mode in TIE_MODES}
RUNS.update({
    'tied_zero_emb_scale': ['--tie_mode=tied', '--zero_init_residual=true', '--emb_scale=true'],
    'pit_zero_emb_scale': ['--tie_mode=pit', '--zero_init_residual=true', '--emb_scale=true'],
    'tied_igs4': ['--tie_mode=tied', '--input_grad_scale=4'],
    'muon_tied': ['--tie_mode=tied', '--optimizer=muon'],
    'muon_untied_rates': ['--tie_mode=untied', '--optimizer=muon', '--embed_lr=3e-2', '--head_lr=1e-2',
                          '--ends_decay=per_step'],
    'adamw_untied_rates': ['--tie_mode=untied', '--embed_lr=3e-2', '--head_lr=1e-2', '--ends_decay=none'],
    'untie_at': ['--tie_mode=tied', '--untie_at=0.5'],
    'untie_at_muon': ['--tie_mode=small_init', '--untie_at=0.5', '--optimizer=muon'],
    'dropout_accum_pad': ['--tie_mode=shuffle', '--dropout=0.1', '--gradient_accumulation_steps=2',
                          '--pad_vocab=true'],
})
# 10 iterations, then 10 more from the checkpoint, the schedule pinned to 20: the losses of both, the rest the second's
RESUME = ['--tie_mode=shuffle', '--dropout=0.1', '--lr_decay_iters=20', '--eval_interval=5']


def this_machine():
    """What a record's '_machine' starts with where it was made on this machine kind; an ISA cap says so."""
    import torch
    cpuinfo = open('/proc/cpuinfo').read() if os.path.exists('/proc/cpuinfo') else ''
    family = next((line.split(':')[1].strip() for line in cpuinfo.splitlines() if line.startswith('cpu family')), '?')
    caps = ''.join(f", {key}={os.environ[key]}" for key in ('ONEDNN_MAX_CPU_ISA', 'ATEN_CPU_CAPABILITY')
                   if os.environ.get(key))
    bf16 = 'avx512_bf16' if 'avx512_bf16' in cpuinfo else 'no avx512_bf16'
    return f"torch {torch.__version__}, cpu family {family}, {bf16}{caps}"


def weights_hash(state):
    digest = hashlib.sha256()
    for name in sorted(state):
        digest.update(name.replace('pit.', 'pit_', 1).encode())  # the records predate pit's submodule: pit_lower
        digest.update(state[name].detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def train_recorded(args, out_dir):
    """One run in this process, one torch thread: its record."""
    import model
    import train
    losses, forward = [], model.GPT.forward

    def recording_forward(self, *a, **k):
        logits, loss = forward(self, *a, **k)
        if self.training and loss is not None:
            losses.append(loss.detach().float().item().hex())
        return logits, loss

    model.GPT.forward = recording_forward
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            summary = train.train(train.parse_train_args([*args, f'--out_dir={out_dir}']))
    finally:
        model.GPT.forward = forward
    with open(os.path.join(out_dir, 'metrics.csv'), newline='') as f:
        rows = [{k: v for k, v in row.items() if k not in ('tokens_per_sec', 'elapsed_s')} for row in csv.DictReader(f)]
    return dict(losses=losses, weights=weights_hash(summary['model'].state_dict()), metrics=rows,
                best_val_loss=float(summary['best_val_loss']).hex(), fingerprint=summary['data_fingerprint'])


def record_of(name, data_dir, out_dir):
    base = [*BASE, f'--data_dir={data_dir}']
    if name != 'resume':
        return train_recorded(base + RUNS[name], os.path.join(out_dir, name))
    out_dir = os.path.join(out_dir, 'resume')
    first = train_recorded([a for a in base if a != '--max_iters=20'] + RESUME + ['--max_iters=10'], out_dir)
    second = train_recorded(base + RESUME + ['--init_from=resume'], out_dir)
    return dict(second, losses=first['losses'] + second['losses'])


def the_record():
    """The record made on this machine kind, or None."""
    machine = this_machine()
    for path in sorted(glob.glob(os.path.join(RECORDS, '*.json'))):
        with open(path, encoding='utf-8') as f:
            record = json.load(f)
        if record['_machine'] == machine or record['_machine'].startswith(machine + ' '):
            return record
    return None


@pytest.fixture(scope='module')
def reference(tmp_path_factory):
    record = the_record()
    if record is None:
        pytest.skip(f"no reference record for this machine ({this_machine()}): other CPUs and torch builds round "
                    f"differently; make one with `python tests/test_reference_runs.py`")
    if not os.path.exists(SHARED_TEXT):
        pytest.skip(f"the record's corpus, tiny shakespeare, is not at {SHARED_TEXT}")
    import prepare
    data_dir = str(tmp_path_factory.mktemp('reference_data'))
    with contextlib.redirect_stdout(io.StringIO()):
        prepare.main([f'--input={SHARED_TEXT}', '--dataset=shakespeare_char', f'--out_dir={data_dir}'])
    return record, data_dir


def test_every_run_has_a_record():
    """The runs named here are the record's: a run added or renamed is recorded, not silently left unchecked."""
    record = the_record() or json.load(open(sorted(glob.glob(os.path.join(RECORDS, '*.json')))[0]))
    assert sorted(k for k in record if k != '_machine') == sorted([*RUNS, 'resume'])


@pytest.fixture(scope='module')
def recorded(reference, tmp_path_factory):
    """What the documented command records (`python tests/test_reference_runs.py DATA_DIR OUT.json`: this file run as
    __main__, in this process): every run once, each in its own folder, one torch thread. The tests below compare
    its runs with the committed record; a subprocess of it, beside each test's own run, trained every run twice."""
    import runpy
    import torch
    _, data_dir = reference
    out = tmp_path_factory.mktemp('record') / 'record.json'
    argv, threads = sys.argv, torch.get_num_threads()
    sys.argv = [__file__, data_dir, str(out)]
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            runpy.run_path(__file__, run_name='__main__')
    finally:
        sys.argv = argv
        torch.set_num_threads(threads)
    return json.loads(out.read_text())


# One xdist worker runs the module, so that `recorded` is made once (pytest.ini)
@pytest.mark.xdist_group('reference_runs')
@pytest.mark.parametrize('name', [*RUNS, 'resume'])
def test_run_computes_what_was_recorded(name, reference, recorded):
    record, _ = reference
    got, want = recorded[name], record[name]
    assert got['fingerprint'] == want['fingerprint'], "the corpus is not the recorded one"
    assert got['losses'] == want['losses'], "a training loss differs from the record"
    assert got['metrics'] == want['metrics'], "a metrics.csv row differs from the record"
    assert (got['best_val_loss'], got['weights']) == (want['best_val_loss'], want['weights'])


@pytest.mark.xdist_group('reference_runs')
def test_run_as_a_script_it_records_what_the_tests_compare(reference, recorded):
    """The documented command: every run, and this machine's name, which the_record() matches."""
    assert recorded == dict(reference[0], _machine=this_machine())


def main(data_dir, out):
    """Record every run into out."""
    import tempfile
    import torch
    torch.set_num_threads(1)
    record = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in [*RUNS, 'resume']:
            record[name] = record_of(name, os.path.abspath(data_dir), tmp)
            print(name, record[name]['losses'][-1], record[name]['weights'][:12], flush=True)
    with open(out, 'w', encoding='utf-8') as f:
        json.dump(dict(record, _machine=this_machine()), f, indent=1)


if __name__ == '__main__':
    main(*sys.argv[1:])
