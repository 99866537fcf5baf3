"""train.py and sample.py end to end on a tiny corpus: learning, checkpoints, metrics, resume,
the tie surviving it, DDP on CPU, and sampling."""

import csv
import math
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch

import sample
import train
from lab import run_results
from lib.command_line import UserError
from conftest import REPO_ROOT, assert_one_line_error, run_in_process, tiny_train_args, train_tiny_run

# one xdist worker runs this module: its module fixtures are made once (pytest.ini)
pytestmark = pytest.mark.xdist_group('train')


def run_training(data_dir, out_dir, **overrides):
    return train.train(train.parse_train_args(tiny_train_args(data_dir, out_dir, **overrides)))


def read_metrics(out_dir):
    with open(os.path.join(out_dir, 'metrics.csv'), newline='') as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope='module')
def trained(tiny_data, tmp_path_factory):
    out_dir = str(tmp_path_factory.mktemp('out'))
    summary = run_training(tiny_data, out_dir, max_iters=150, eval_interval=50)
    return out_dir, summary


def test_loss_decreases_and_outputs_are_written(trained):
    out_dir, summary = trained
    rows = read_metrics(out_dir)
    ckpt = torch.load(os.path.join(out_dir, 'ckpt.pt'), weights_only=True)
    assert [int(r['iter']) for r in rows] == list(range(0, 151, 5))
    first_val = float(rows[0]['val_loss'])
    assert first_val == pytest.approx(math.log(ckpt['meta']['vocab_size']), abs=0.3)  # ~log n at init
    assert summary['val_loss'] < first_val - 1.0
    assert float(rows[-1]['val_loss']) == pytest.approx(summary['val_loss'], abs=1e-4)
    assert all(float(r['tokens_per_sec']) > 0 for r in rows[1:])
    assert ckpt['iter_num'] == 150
    assert ckpt['meta']['tokenizer'] == 'char'
    for name, value in summary['model'].state_dict().items():
        assert torch.equal(ckpt['model'][name], value)


def test_bf16_autocast_on_cpu_learns_like_float32_and_keeps_float32_weights(trained, tiny_data, tmp_path):
    # --dtype=auto picks this on CPUs with native bf16; where bf16 is emulated it still must work.
    _, fp32 = trained
    bf16 = run_training(tiny_data, str(tmp_path), max_iters=150, eval_interval=50, dtype='bfloat16')
    assert bf16['val_loss'] == pytest.approx(fp32['val_loss'], abs=0.05)
    assert bf16['val_loss'] < float(read_metrics(str(tmp_path))[0]['val_loss']) - 1.0  # it learned
    ckpt = torch.load(os.path.join(str(tmp_path), 'ckpt.pt'), weights_only=True)
    assert all(value.dtype == torch.float32 for value in ckpt['model'].values())  # autocast: master weights fp32


def test_twenty_iterations_equal_ten_plus_resume_plus_ten(tiny_data, tmp_path):
    # lr_decay_iters pins the schedule to 20 iterations for the 10-iteration first half too.
    # Dropout on, so the restored global RNG matters as well as the data order.
    common = dict(lr_decay_iters=20, eval_interval=5, dropout=0.1, tie_mode='shuffle')
    straight = run_training(tiny_data, str(tmp_path / 'a'), max_iters=20, **common)
    run_training(tiny_data, str(tmp_path / 'b'), max_iters=10, **common)
    resumed = run_training(tiny_data, str(tmp_path / 'b'), max_iters=20, init_from='resume', **common)
    assert resumed['iters'] == 20
    assert resumed['data_fingerprint'] == straight['data_fingerprint']
    for name, value in straight['model'].state_dict().items():
        assert torch.equal(resumed['model'].state_dict()[name], value), name
    # The metrics of the resumed run continue the first half without gaps or repeats.
    assert [int(r['iter']) for r in read_metrics(str(tmp_path / 'b'))] == list(range(0, 21, 5))
    assert read_metrics(str(tmp_path / 'b'))[-1]['data_fingerprint'] == read_metrics(str(tmp_path / 'a'))[-1]['data_fingerprint']


def test_a_run_killed_after_its_best_point_keeps_that_best_when_resumed(tiny_data, tmp_path, monkeypatch):
    # At a learning rate of 3e-2 the tiny run's validation loss is lowest at iteration 15 and higher at every
    # evaluation after it. Killed at iteration 23, after its checkpoint of iteration 20, and resumed, the run must
    # end with iteration 15's best.pt and best_val_loss, as the unbroken run does: a resume that forgot the best so
    # far would take iteration 25's, worse, for a new best.
    common = dict(max_iters=30, eval_interval=5, learning_rate=3e-2, warmup_iters=0, grad_clip=0.0)
    straight_dir, broken_dir = tmp_path / 'straight', tmp_path / 'broken'
    straight = run_training(tiny_data, str(straight_dir), **common)
    best = torch.load(straight_dir / 'best.pt', weights_only=True)
    val = {int(r['iter']): float(r['val_loss']) for r in read_metrics(str(straight_dir)) if r['val_loss']}
    assert best['iter_num'] == min((i for i in val if i > 0), key=val.get) < 20  # the best before the checkpoint ...
    assert min(val[i] for i in val if i > 20) > best['val_loss']                   # ... and worse after it

    steps = []
    real_step = train.training_step

    def killed_at_iteration_23(*args, **kwargs):
        if len(steps) == 23:
            raise RuntimeError('killed')
        steps.append(None)
        return real_step(*args, **kwargs)
    monkeypatch.setattr(train, 'training_step', killed_at_iteration_23)
    with pytest.raises(RuntimeError, match='killed'):
        run_training(tiny_data, str(broken_dir), **common)
    monkeypatch.undo()
    assert torch.load(broken_dir / 'ckpt.pt', weights_only=True)['iter_num'] == 20
    resumed = run_training(tiny_data, str(broken_dir), init_from='resume', **common)

    assert resumed['best_val_loss'] == straight['best_val_loss'] == best['val_loss']
    kept = torch.load(broken_dir / 'best.pt', weights_only=True)
    assert (kept['iter_num'], kept['val_loss']) == (best['iter_num'], best['val_loss'])
    for name, value in best['model'].items():
        assert torch.equal(kept['model'][name], value), name
    ckpts = [torch.load(d / 'ckpt.pt', weights_only=True) for d in (straight_dir, broken_dir)]
    assert ckpts[0]['best_val_loss'] == ckpts[1]['best_val_loss'] == best['val_loss']


def test_the_tie_survives_a_resume(tiny_data, tmp_path):
    out_dir = str(tmp_path)
    run_training(tiny_data, out_dir, max_iters=10, tie_mode='tied')
    resumed = run_training(tiny_data, out_dir, max_iters=20, init_from='resume')
    assert resumed['model'].is_tied
    ckpt = torch.load(os.path.join(out_dir, 'ckpt.pt'), weights_only=True)
    assert ckpt['model']['lm_head.weight'].data_ptr() == ckpt['model']['token_embedding_table.weight'].data_ptr()


def test_every_tie_mode_trains(tiny_data, tmp_path):
    for mode in ('untied', 'small_init', 'proj', 'shufflenet', 'bert', 'logit_scale'):
        summary = run_training(tiny_data, str(tmp_path / mode), max_iters=20, eval_interval=20, tie_mode=mode)
        assert summary['model'].is_tied == (mode != 'untied')
        rows = read_metrics(str(tmp_path / mode))
        assert summary['val_loss'] < float(rows[0]['val_loss']), mode


# A pit run's checkpoint as an older version wrote it, one difference from today's at a time, that every reader
# refuses; a resume also refuses a config (below) or an optimizer state (test_optimizers.py) of an older version.
OLDER = {
    'pit_names': lambda ckpt: ckpt.update(model={k.replace('pit.', 'pit_'): v for k, v in ckpt['model'].items()}),
    'model_args': lambda ckpt: [ckpt['model_args'].pop(key) for key in ('gelu_approx', 'input_grad_scale')],
}


@pytest.fixture(scope='module')
def pit_run(tiny_data, tmp_path_factory):
    return train_tiny_run(tiny_data, tmp_path_factory, 'pit', tie_mode='pit', max_iters=10, eval_interval=5)


@pytest.mark.parametrize('older', OLDER)
def test_a_checkpoint_of_an_older_version_is_one_line_for_every_reader(older, pit_run, tiny_data, tmp_path):
    for name in ('ckpt.pt', 'best.pt'):
        ckpt = torch.load(os.path.join(pit_run, name), weights_only=True)
        OLDER[older](ckpt)
        torch.save(ckpt, tmp_path / name)
    ckpt_path, best_path = str(tmp_path / 'ckpt.pt'), str(tmp_path / 'best.pt')
    said = [f'checkpoint {ckpt_path} ', 'it was written by an older version of this project']
    for script, *args in (('sample.py', f'--out_dir={tmp_path}', '--max_new_tokens=5'),
                          ('export.py', f'--out_dir={tmp_path}', f'--to={tmp_path / "hf"}'),
                          ('bench.py', f'--out_dir={tmp_path}', '--init_from=resume', f'--data_dir={tiny_data}',
                           '--dataset=tiny'),
                          ('train.py', *tiny_train_args(tiny_data, str(tmp_path), max_iters=20, init_from='resume'))):
        assert_one_line_error(run_in_process(script, *args), *said)
    with pytest.raises(UserError, match=f'checkpoint {best_path} .*older version'):
        run_results.load_best(best_path)  # the lab's reader of best.pt, the others read through load_checkpoint


@pytest.mark.parametrize('key', ['optimizer', 'muon_qkv', 'ends_decay'])  # each newer than some checkpoints
def test_a_config_without_a_key_a_resume_reads_is_one_line_on_resume(key, pit_run, tiny_data, tmp_path):
    ckpt = torch.load(os.path.join(pit_run, 'ckpt.pt'), weights_only=True)
    ckpt['config'].pop(key)
    torch.save(ckpt, tmp_path / 'ckpt.pt')
    assert_one_line_error(run_in_process('train.py', *tiny_train_args(tiny_data, str(tmp_path), init_from='resume')),
                          f"checkpoint {tmp_path / 'ckpt.pt'} lacks config.{key}: it was written by an older version")
    assert run_in_process('sample.py', f'--out_dir={tmp_path}', '--max_new_tokens=5').returncode == 0  # weights read


def test_sample_gives_the_requested_samples_in_the_vocabulary(trained, tiny_data):
    out_dir, _ = trained
    samples = sample.generate_samples(dict(sample.DEFAULTS, out_dir=out_dir, start='ROMEO:', num_samples=4,
                                           max_new_tokens=80, device='cpu'))
    vocabulary = set(torch.load(os.path.join(out_dir, 'ckpt.pt'), weights_only=True)['meta']['chars'])
    assert len(samples) == 4
    for text in samples:
        assert len(text) == len('ROMEO:') + 80
        assert text.startswith('ROMEO:')
        assert set(text) <= vocabulary
    assert len(set(samples)) > 1  # sampled, not the same text four times


def test_sample_script_prints_each_sample_with_a_separator(trained):
    # sample.py's run_cli in this process (conftest.run_in_process); it starts as a process of its own, as a user
    # runs it, in test_robustness.py's sample_prompt_file_missing
    out_dir, _ = trained
    result = run_in_process('sample.py', f'--out_dir={out_dir}', '--num_samples=2', '--max_new_tokens=30',
                            '--device=cpu', '--start=All:')
    assert result.returncode == 0, result.stderr
    chunks = result.stdout.split(sample.SEPARATOR + '\n')
    assert len(chunks) == 3 and chunks[-1] == ''
    assert all(chunk.startswith('All:') and len(chunk) == len('All:') + 30 + 1 for chunk in chunks[:2])


@pytest.mark.parametrize('args, culprit', [
    (['--n_layr=2'], '--n_layr'),
    (['--max_iters=1.5'], '--max_iters'),
    (['--tie_mode=tide'], 'shufflenet'),
])
def test_train_rejects_bad_options_in_one_line(args, culprit):
    if args == ['--n_layr=2']:  # as the user runs it
        result = subprocess.run([sys.executable, 'train.py', *args], cwd=REPO_ROOT, capture_output=True, text=True,
                                timeout=60)
    else:  # the same run_cli, in this process (conftest.run_in_process)
        result = run_in_process('train.py', *args)
    assert result.returncode == 2
    assert culprit in result.stderr and 'Traceback' not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_the_data_fingerprint_chains_every_window_of_every_step(tiny_data, tmp_path):
    """The checkpoint's fingerprint is a CRC run over the window starts of every micro-batch of every step, in
    order, each step's carried into the next: computed here from the batch generator's seed alone, it must equal
    what the run saved (a CRC of the last step's windows alone, or of one micro-batch a step, would not)."""
    import zlib
    from lib.prepared_data import load_splits
    cfg = train.parse_train_args(tiny_train_args(tiny_data, str(tmp_path / 'out'), max_iters=6, eval_interval=3,
                                                 gradient_accumulation_steps=2))
    summary = train.train(cfg)
    generator, expected = torch.Generator().manual_seed(cfg['seed']), 0
    high = len(load_splits(cfg)[0]['train']) - cfg['block_size']
    for _ in range(6 * 2):
        starts = torch.randint(high, (cfg['batch_size'],), generator=generator)
        expected = zlib.crc32(starts.numpy().tobytes(), expected)
    saved = torch.load(os.path.join(cfg['out_dir'], 'ckpt.pt'), weights_only=True)['data_fingerprint']
    assert summary['data_fingerprint'] == saved == expected
    # Under DDP each rank draws every rank's starts from the one stream and keeps its own share: two ranks at one
    # micro-batch a step read, between them, the windows of one process at two, and both log that fingerprint
    tokens = load_splits(cfg)[0]['train']
    ranks = [SimpleNamespace(rank=rank, world_size=2, device='cpu') for rank in (0, 1)]
    one = train.next_batches(tokens, cfg, 2, torch.Generator().manual_seed(cfg['seed']), SimpleNamespace(
        rank=0, world_size=1, device='cpu'), 0)
    two = [train.next_batches(tokens, cfg, 1, torch.Generator().manual_seed(cfg['seed']), proc, 0) for proc in ranks]
    assert two[0][1] == two[1][1] == one[1]
    assert torch.equal(two[0][0][0][0], one[0][0][0]) and torch.equal(two[1][0][0][0], one[0][1][0])


def test_a_float16_runs_loss_scale_is_saved_and_put_back(tiny_data, tmp_path):
    """A CPU trains no float16 (train.py refuses it), so the scaler's state is checked directly: a scale that has
    backed off and a growth count part-way are in the checkpoint, and a resume's scaler starts from them."""
    from model import GPT, GPTConfig
    model = GPT(GPTConfig(vocab_size=16, block_size=8, n_layer=1, n_head=2, n_embd=16))
    optimizer = torch.optim.AdamW(model.parameters())
    scaler = torch.amp.GradScaler('cpu', init_scale=1024.0, growth_interval=100)
    scaler.load_state_dict(dict(scaler.state_dict(), scale=256.0, _growth_tracker=37))
    ckpt = train.checkpoint(model, optimizer, scaler, torch.Generator(), dict(seed=1), {}, 10, 3.0, 0)
    assert ckpt['scaler']['scale'] == 256.0 and ckpt['scaler']['_growth_tracker'] == 37
    fresh = torch.amp.GradScaler('cpu', init_scale=65536.0, growth_interval=100)
    train.restore(ckpt, GPT(model.config), torch.optim.AdamW(GPT(model.config).parameters()), fresh,
                  torch.Generator())
    assert fresh.get_scale() == 256.0 and fresh.state_dict()['_growth_tracker'] == 37


def test_the_gradient_source_probe_can_be_turned_off(tiny_data, tmp_path_factory):
    """--grad_probe=false (a speed run's): no grad_in or grad_out in metrics.csv; the default probes every logged
    step."""
    for probe in (True, False):
        out = train_tiny_run(tiny_data, tmp_path_factory, f'probe{probe}', max_iters=10, grad_probe=probe)
        with open(os.path.join(out, 'metrics.csv'), newline='') as f:
            rows = [row for row in csv.DictReader(f) if row['step_loss']]
        assert rows and all(bool(row.get('grad_in')) == probe and bool(row.get('grad_out')) == probe for row in rows)
