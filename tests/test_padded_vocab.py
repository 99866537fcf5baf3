"""--pad_vocab (docs/performance.md, "A padded vocabulary"): the head's matmul padded to a multiple of 64 rows, for
the GPU's sake. Everything a user sees must be that of the real vocabulary: logits, losses, gradients and so
training, the tie, pit's U, samples, checkpoints, the initial-loss table and the GPT-2 export. Each comparison is
padded against unpadded from the same seed, and a record of the matmul's shapes shows that the padding did take
place."""

import importlib.util
import math
import os

import pytest
import torch
from torch.overrides import TorchFunctionMode

import train
from conftest import assert_one_line_error, run_in_process, tiny_train_args
from lib.command_line import UserError
from lib.device import autocast_context, pick_pad_vocab
from lib.run_files import read_metrics
from model import GPT, GPTConfig, TIE_MODES
from lib.optimizers import build_optimizer
from sample import generate

N = 50  # real rows; 64 with padding, so 14 padded columns would take a quarter of the probability at init
SHAPE = dict(vocab_size=N, block_size=16, n_layer=2, n_head=2, n_embd=32, dropout=0.0)
EXACT = dict(rtol=0, atol=1e-6)  # float32 on one CPU: equal but for the order of a sum; a padded class moves by 0.1+


class HeadShapes(TorchFunctionMode):
    """The row counts of the weights that F.linear multiplies by: where the padding shows, if anywhere."""

    def __init__(self):
        super().__init__()
        self.rows = set()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is torch.nn.functional.linear:
            self.rows.add(args[1].shape[0])
        return func(*args, **(kwargs or {}))


def model(mode, pad, **overrides):
    torch.manual_seed(0)
    return GPT(GPTConfig(**{**SHAPE, 'tie_mode': mode, 'pad_vocab_to': pad, **overrides}))


def train_steps(m, steps=3):
    """A few AdamW steps with pit's retraction, as train.py takes them; returns the last step's logits and loss."""
    optimizer = build_optimizer(m, dict(weight_decay=0.1, learning_rate=1e-2, beta1=0.9, beta2=0.99), 'cpu')
    generator = torch.Generator().manual_seed(1)
    for _ in range(steps):
        idx = torch.randint(N, (4, SHAPE['block_size'] + 1), generator=generator)
        logits, loss = m(idx[:, :-1], idx[:, 1:])
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        m.after_optimizer_step()
    return logits.detach(), loss.detach()


@pytest.mark.parametrize('mode', TIE_MODES)
def test_a_padded_head_gives_the_same_logits_loss_and_training_in_every_mode(mode):
    plain, padded = model(mode, 1), model(mode, 64)
    with HeadShapes() as shapes:
        logits, loss = train_steps(padded)
    assert 64 in shapes.rows and N not in shapes.rows  # the head's matmul did run on 64 rows
    expected_logits, expected_loss = train_steps(plain)
    assert logits.shape == (4, SHAPE['block_size'], N)  # every consumer sees n columns
    torch.testing.assert_close(logits, expected_logits, **EXACT)
    torch.testing.assert_close(loss, expected_loss, **EXACT)
    # the weights trained alike: no padded row exists, none drew gradient or moved a real one
    ours, theirs = padded.state_dict(), plain.state_dict()
    assert ours.keys() == theirs.keys() and ours['token_embedding_table.weight'].shape == (N, SHAPE['n_embd'])
    for name in ours:
        torch.testing.assert_close(ours[name], theirs[name], **EXACT, msg=name)
    assert padded.num_params() == plain.num_params()
    assert padded.is_tied == (mode != 'untied')  # one Parameter, read at the input and scored at the output
    if mode == 'pit':  # U keeps orthonormal columns (n > d): the retraction saw the n real rows only
        U = padded.token_embedding_table.weight
        torch.testing.assert_close(U.t() @ U, torch.eye(SHAPE['n_embd']), rtol=0, atol=1e-5)


def test_a_padded_head_under_bf16_autocast_scores_the_real_vocabulary():
    idx = torch.randint(N, (4, SHAPE['block_size'] + 1), generator=torch.Generator().manual_seed(2))
    results = []
    for pad in (1, 64):
        with autocast_context('cpu', 'bfloat16'), HeadShapes() as shapes:
            logits, loss = model('tied', pad)(idx[:, :-1], idx[:, 1:])
        results.append((logits.float(), loss))
    assert 64 in shapes.rows
    (logits, loss), (padded_logits, padded_loss) = results
    assert padded_logits.shape == logits.shape
    torch.testing.assert_close(padded_logits, logits, rtol=0, atol=0.05)  # bf16's own rounding, far below a class
    assert padded_loss.item() == pytest.approx(loss.item(), abs=0.01)     # 14 padded classes: +0.25 at init


def test_sampling_never_yields_a_padded_id_and_samples_as_unpadded():
    prompt = torch.zeros((8, 1), dtype=torch.long)
    samples = []
    for pad in (1, 64):
        m = model('tied', pad).eval()
        torch.manual_seed(3)
        with HeadShapes() as shapes:
            samples.append(generate(m, prompt, max_new_tokens=40))
    assert 64 in shapes.rows
    assert int(samples[1].max()) < N  # 320 draws: a padded id would come up in about a fifth of them
    assert torch.equal(samples[1], samples[0])
    m.config.pad_vocab_to = 64  # greedy and top-k read the same n logits
    assert torch.equal(generate(m, prompt, 10, temperature=0), generate(model('tied', 1).eval(), prompt, 10, temperature=0))


def test_auto_pads_on_cuda_only_and_a_bad_value_is_one_line(tiny_data, tmp_path):
    assert [pick_pad_vocab('auto', d) for d in ('cuda', 'cuda:1', 'cpu', 'mps')] == [64, 64, 1, 1]
    assert [pick_pad_vocab(v, 'cpu') for v in ('true', 'false')] == [64, 1]
    assert pick_pad_vocab('false', 'cuda') == 1
    result = run_in_process('train.py', *tiny_train_args(tiny_data, str(tmp_path / 'out'), pad_vocab='maybe'))
    assert_one_line_error(result, '--pad_vocab', 'auto, true, false')


def test_runs_made_before_the_key_count_as_auto_and_others_must_match():
    import ablate
    wanted = dict(train.DEFAULTS, vocab_size=65)
    before = {key: value for key, value in wanted.items() if key != 'pad_vocab'}
    ablate.check_same_config(wanted, before, 'result.json', 'out/tied-seed1')  # an earlier grid still counts
    with pytest.raises(UserError, match="pad_vocab='true'"):
        ablate.check_same_config(wanted, dict(before, pad_vocab='true'), 'result.json', 'out/tied-seed1')


def test_training_padded_writes_the_run_and_checkpoint_of_training_unpadded(tiny_data, tmp_path, one_torch_thread,
                                                                            capsys):
    runs, headers = {}, {}
    for pad in ('true', 'false'):
        out_dir = str(tmp_path / pad)
        summary = train.train(train.parse_train_args(tiny_train_args(tiny_data, out_dir, pad_vocab=pad)))
        headers[pad] = [line for line in capsys.readouterr().out.splitlines() if line.startswith('device ')]
        ckpt = torch.load(os.path.join(out_dir, 'ckpt.pt'), weights_only=True)
        runs[pad] = summary, read_metrics(os.path.join(out_dir, 'metrics.csv')), ckpt
    (padded, padded_rows, padded_ckpt), (plain, plain_rows, plain_ckpt) = runs['true'], runs['false']
    n = plain_ckpt['meta']['vocab_size']
    assert n % 64 and padded['model'].config.pad_vocab_to == 64 and plain['model'].config.pad_vocab_to == 1
    # the run's header says so where the head is padded, and only there
    assert len(headers['true']) == 1 and headers['true'][0].endswith(f"the head's matmul padded to {n + -n % 64:,} rows")
    assert len(headers['false']) == 1 and 'padded' not in headers['false'][0]
    # every logged number: losses, the copy probe, the gradient probes (tokens/s and time aside)
    measured = ('step_loss', 'train_loss', 'val_loss', 'copy_prob', 'self_margin', 'grad_norm', 'grad_in', 'grad_out')
    for ours, theirs in zip(padded_rows, plain_rows, strict=True):
        for key in measured:
            if theirs[key]:
                assert float(ours[key]) == pytest.approx(float(theirs[key]), rel=1e-4, abs=1e-6), (ours['iter'], key)
    # the checkpoint holds the real vocabulary's rows, one storage for the tie, and no record of the padding
    assert padded_ckpt['model_args'] == plain_ckpt['model_args'] and 'pad_vocab_to' not in padded_ckpt['model_args']
    weights = padded_ckpt['model']
    assert weights['token_embedding_table.weight'].shape == (n, 32)
    assert weights['lm_head.weight'].data_ptr() == weights['token_embedding_table.weight'].data_ptr()
    for name, value in plain_ckpt['model'].items():
        torch.testing.assert_close(weights[name], value, rtol=1e-4, atol=1e-6, msg=name)
    # a padded run resumes unpadded (on another machine, say) and the other way round: the tie kept, the same run
    resumed = {}
    for pad, other in (('true', 'false'), ('false', 'true')):
        resumed[other] = train.train(train.parse_train_args(tiny_train_args(
            tiny_data, str(tmp_path / pad), init_from='resume', max_iters=50, eval_interval=10, pad_vocab=other)))
        assert resumed[other]['model'].is_tied and resumed[other]['model'].config.pad_vocab_to == pick_pad_vocab(other, 'cpu')
    assert resumed['true']['val_loss'] == pytest.approx(resumed['false']['val_loss'], rel=1e-4)


def test_the_initial_loss_table_is_the_real_vocabularys():
    import init_loss
    args = ['--json', '--vocab_size=50', '--n_embd=32', '--n_layer=1', '--n_head=2', '--block_size=16', '--seeds=2',
            '--modes=tied,small_init,pit']
    tables = {}
    with HeadShapes() as shapes:
        for pad in ('true', 'false'):
            result = run_in_process('init_loss.py', *args, f'--pad_vocab={pad}')
            assert result.returncode == 0, result.stderr
            tables[pad] = result.stdout
    assert 64 in shapes.rows
    assert tables['true'] == tables['false']
    rows = [__import__('json').loads(line) for line in tables['true'].splitlines()]
    assert len(rows) == 12 and {row['vocab_size'] for row in rows} == {50}
    assert {row['log_n'] for row in rows} == {round(math.log(50), 4)}
    assert init_loss.DEFAULTS['pad_vocab'] == 'auto'


@pytest.mark.skipif(importlib.util.find_spec('transformers') is None,
                    reason='transformers is optional: pip install transformers')
def test_the_export_of_a_padded_run_is_a_gpt2_of_the_real_vocabulary(tiny_data, tmp_path, one_torch_thread):
    import export
    from transformers import GPT2LMHeadModel
    out_dir = str(tmp_path / 'run')
    summary = train.train(train.parse_train_args(tiny_train_args(tiny_data, out_dir, max_iters=10, eval_interval=5,
                                                                 pad_vocab='true')))
    ours = summary['model'].eval()
    assert ours.config.pad_vocab_to == 64
    export.main([f'--out_dir={out_dir}', f'--to={tmp_path}/hf'])
    theirs = GPT2LMHeadModel.from_pretrained(str(tmp_path / 'hf')).eval()
    n = ours.config.vocab_size
    assert theirs.config.vocab_size == n and theirs.transformer.wte.weight.shape == (n, 32)
    assert theirs.config.tie_word_embeddings and theirs.lm_head.weight.data_ptr() == theirs.transformer.wte.weight.data_ptr()
    idx = torch.randint(n, (2, 16), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        torch.testing.assert_close(theirs(idx).logits, ours(idx)[0], rtol=0, atol=1e-4)  # the padded model's logits
