"""Pretrained GPT-2 in, Hugging Face out, offline: a tiny GPT-2 made by transformers itself (random
weights, 2 layers, width 64, GPT-2's vocabulary so that tiktoken's tokenizer fits) stands in for the
real one. Loading gives transformers' logits and one shared matrix; fine-tuning and resuming run;
export round-trips with the tie declared; what cannot be done is one line."""

import importlib.util
import json
import os
import shutil
import sys

import pytest
import torch

if importlib.util.find_spec('transformers') is None:
    pytest.skip('transformers is optional: pip install transformers', allow_module_level=True)

import export  # noqa: E402
import init_loss  # noqa: E402
from lib import prepared_data  # noqa: E402
import prepare  # noqa: E402
import sample  # noqa: E402
import train  # noqa: E402
from lib.training_run import make_model_config  # noqa: E402
from lib.command_line import UserError  # noqa: E402
from conftest import assert_one_line_error, gpt2_files_cached, run, tiny_corpus, tiny_train_args  # noqa: E402
from lib import hf_gpt2  # noqa: E402
from model import GPT  # noqa: E402

# one xdist worker runs this module: its module fixtures are made once (pytest.ini)
pytestmark = pytest.mark.xdist_group('gpt2')

N_POSITIONS = 32
TOL = 1e-4  # docs/gpt2-interop.md's bar for "the same logits" in float32


def hf_gpt2_class():
    """transformers' GPT2LMHeadModel, imported when a test runs: at collection, which every xdist worker does,
    it would cost each of them about 3 s of CPU (a Zen 3), also the worker that never runs this module."""
    from transformers import GPT2LMHeadModel
    return GPT2LMHeadModel


@pytest.fixture(scope='module')
def hf_dir(tmp_path_factory):
    """A transformers GPT-2 folder. Every tensor is perturbed away from transformers' init (zero biases,
    unit LayerNorm gains), so a bias, gain or transpose mapped to the wrong place shows in the logits."""
    torch.manual_seed(0)
    from transformers import GPT2Config
    model = hf_gpt2_class()(GPT2Config(vocab_size=50257, n_positions=N_POSITIONS, n_embd=64, n_layer=2, n_head=2))
    with torch.no_grad():
        for p in model.parameters():  # the tied wte/lm_head is one parameter here, perturbed once
            p.add_(torch.randn_like(p) * 0.1)
    folder = tmp_path_factory.mktemp('hf') / 'tiny-gpt2'
    model.save_pretrained(folder)
    return str(folder)


def hf_logits(folder, idx):
    hf = hf_gpt2_class().from_pretrained(folder).float().eval()
    with torch.no_grad():
        return hf(idx).logits  # (B, T, vocab)


def our_logits(model, idx):
    with torch.no_grad():
        return model.eval()(idx)[0]  # (B, T, vocab)


def random_ids(T=N_POSITIONS, vocab=50257):
    return torch.randint(vocab, (2, T), generator=torch.Generator().manual_seed(1))


# ---------------------------------------------------------------- loading

def test_from_pretrained_gives_transformers_logits(hf_dir):
    model = hf_gpt2.from_pretrained(hf_dir)
    cfg = model.config
    assert (cfg.tie_mode, cfg.bias, cfg.emb_scale, cfg.gelu_approx) == ('tied', True, False, 'tanh')
    assert (cfg.vocab_size, cfg.block_size, cfg.n_layer, cfg.n_head, cfg.n_embd) == (50257, N_POSITIONS, 2, 2, 64)
    idx = random_ids()
    expected = hf_logits(hf_dir, idx)
    assert (our_logits(model, idx) - expected).abs().max().item() <= TOL
    # The bar is tight enough to see GPT-2's GELU: the exact one misses it on these weights.
    for block in model.blocks:
        block.mlp.gelu_approx = 'none'
    assert (our_logits(model, idx) - expected).abs().max().item() > TOL


def test_the_tie_survives_loading_as_one_tensor(hf_dir):
    model = hf_gpt2.from_pretrained(hf_dir)
    assert model.lm_head.weight is model.token_embedding_table.weight
    assert model.lm_head.weight.data_ptr() == model.token_embedding_table.weight.data_ptr()
    hf = hf_gpt2_class().from_pretrained(hf_dir)
    assert model.num_params() == hf.num_parameters() == sum(p.numel() for p in hf.parameters())
    # One tensor, so a training step that moves the head moves the embedding with it.
    _, loss = model.train()(random_ids(), random_ids())
    loss.backward()
    with torch.no_grad():
        model.lm_head.weight -= 0.1 * model.lm_head.weight.grad
    assert torch.equal(model.lm_head.weight, model.token_embedding_table.weight)


def test_untied_start_copies_the_head_and_a_shorter_block_crops_positions(hf_dir):
    model = hf_gpt2.from_pretrained(hf_dir, tie_mode='untied', block_size=16)
    assert not model.is_tied
    assert model.lm_head.weight.data_ptr() != model.token_embedding_table.weight.data_ptr()
    assert torch.equal(model.lm_head.weight, model.token_embedding_table.weight)
    assert model.position_embedding_table.weight.shape == (16, 64)
    idx = random_ids()
    assert (our_logits(model, idx[:, :16]) - hf_logits(hf_dir, idx)[:, :16]).abs().max().item() <= TOL
    with pytest.raises(UserError, match='longer than the 32 positions'):
        hf_gpt2.from_pretrained(hf_dir, block_size=64)


def test_loading_failures_are_user_errors(hf_dir, tmp_path, monkeypatch):
    with pytest.raises(UserError, match='no such folder'):
        hf_gpt2.from_pretrained(str(tmp_path / 'missing'))
    with pytest.raises(UserError, match='save_pretrained'):
        hf_gpt2.from_pretrained(str(tmp_path))  # a folder without config.json
    with monkeypatch.context() as m:
        m.setitem(sys.modules, 'transformers', None)  # what an uninstalled package looks like to import
        with pytest.raises(UserError, match='pip install transformers'):
            hf_gpt2.from_pretrained(hf_dir)
    import huggingface_hub.constants
    from huggingface_hub import try_to_load_from_cache
    if isinstance(try_to_load_from_cache('gpt2', 'config.json'), str):
        pytest.skip("gpt2 is in this machine's Hugging Face cache")
    monkeypatch.setattr(huggingface_hub.constants, 'HF_HUB_OFFLINE', True)  # no network: fail at once
    with pytest.raises(UserError, match='not in the Hugging Face cache.*works offline'):
        hf_gpt2.from_pretrained('gpt2')


# ---------------------------------------------------------------- fine-tuning, sampling, measuring

@pytest.fixture(scope='module')
def bpe_data(tmp_path_factory):
    """A GPT-2 BPE dataset named 'tinybpe'; returns its data_dir."""
    if not gpt2_files_cached():
        pytest.skip("tiktoken's GPT-2 files are not cached (set TIKTOKEN_CACHE_DIR)")
    root = tmp_path_factory.mktemp('bpe')
    (root / 'tinybpe.txt').write_text(tiny_corpus(1500), encoding='utf-8')
    prepare.main([f"--input={root / 'tinybpe.txt'}", '--dataset=tinybpe', f'--out_dir={root}', '--tokenizer=gpt2'])
    return str(root)


def finetune_args(data_dir, out_dir, init_from, **overrides):
    # No model keys: they come from the pretrained weights (tiny_train_args sets some, for scratch runs).
    settings = dict(dataset='tinybpe', data_dir=data_dir, out_dir=out_dir, init_from=init_from, block_size=16,
                    batch_size=4, max_iters=2, eval_interval=2, eval_iters=1, log_interval=1, warmup_iters=0,
                    learning_rate=1e-3, progress=False, device='cpu', dtype='float32', compile='false')
    settings.update(overrides)
    return train.parse_train_args([f'--{k}={v}' for k, v in settings.items()])


@pytest.fixture(scope='module')
def finetuned(hf_dir, bpe_data, tmp_path_factory):
    out_dir = str(tmp_path_factory.mktemp('finetuned'))
    summary = train.train(finetune_args(bpe_data, out_dir, hf_dir))
    return out_dir, summary


def test_finetune_two_steps_then_resume(finetuned, hf_dir, bpe_data):
    out_dir, summary = finetuned
    ckpt = torch.load(os.path.join(out_dir, 'ckpt.pt'), weights_only=True)
    assert ckpt['iter_num'] == 2
    args = ckpt['model_args']
    assert (args['gelu_approx'], args['bias'], args['tie_mode'], args['n_embd'], args['block_size']) == \
        ('tanh', True, 'tied', 64, 16)  # GPT-2's model, its position table cropped to the training window
    assert ckpt['model']['lm_head.weight'].data_ptr() == ckpt['model']['token_embedding_table.weight'].data_ptr()
    start = hf_gpt2.from_pretrained(hf_dir).state_dict()
    moved = (ckpt['model']['blocks.0.attn.c_attn.weight'] - start['blocks.0.attn.c_attn.weight']).abs().max()
    assert 0 < moved < 0.1  # trained from the pretrained weights, not from a fresh init

    # Resuming needs no --init_from=gpt2 any more: the model keys come from the checkpoint.
    resumed = train.train(finetune_args(bpe_data, out_dir, 'resume', max_iters=4))
    assert resumed['iters'] == 4 and resumed['model'].is_tied
    after = torch.load(os.path.join(out_dir, 'ckpt.pt'), weights_only=True)
    assert after['model_args'] == args and after['iter_num'] == 4


def test_sample_from_pretrained_is_greedy_gpt2(hf_dir, gpt2_files):
    prompt = 'ROMEO: But, soft!'
    [text] = sample.generate_samples(dict(sample.DEFAULTS, init_from=hf_dir, start=prompt, num_samples=1,
                                          max_new_tokens=5, temperature=0, device='cpu', dtype='float32'))
    # The same five tokens, chosen greedily from transformers' own logits.
    encode, decode = prepared_data.get_codec(dict(tokenizer='gpt2'))
    ids = torch.tensor([encode(prompt)])
    for _ in range(5):
        ids = torch.cat([ids, hf_logits(hf_dir, ids)[:, -1:].argmax(-1)], dim=1)
    assert text == decode(ids[0].tolist())


def test_init_loss_measures_a_pretrained_model_on_text(hf_dir, bpe_data, tmp_path, capsys):
    text = tmp_path / 'text.txt'
    text.write_text(' the' * 20 + ' cat sat on a mat' * 20, encoding='utf-8')
    init_loss.main([f'--init_from={hf_dir}', f'--text={text}', '--block_size=16', '--windows=3', '--json'])
    row = json.loads(capsys.readouterr().out)
    ids = prepared_data.get_codec(dict(tokenizer='gpt2'))[0](text.read_text(encoding='utf-8'))[:49]
    assert row['tokens'] == 48
    assert row['repeat_rate'] == pytest.approx(sum(a == b for a, b in zip(ids, ids[1:])) / 48, abs=1e-5)
    assert 0 < row['copy_prob'] < 1 and row['loss'] > 0
    assert set(row) >= {'loss', 'copy_prob', 'repeat_rate', 'self_margin', 'log_n'}


def test_a_pretrained_start_refuses_what_it_cannot_honour(hf_dir, bpe_data, tiny_data, tmp_path):
    # The shape key through the script, as a user meets it: one line naming the key.
    result = run('train.py', f'--init_from={hf_dir}', f'--data_dir={bpe_data}', '--dataset=tinybpe',
                 f'--out_dir={tmp_path}/a', '--n_layer=3', '--device=cpu')
    assert_one_line_error(result, '--n_layer=3', 'n_layer=2')
    assert not os.path.exists(tmp_path / 'a')  # refused before anything was written
    for data_dir, overrides, fragment in [
            (bpe_data, dict(block_size=64), 'longer than the 32 positions'),
            (bpe_data, dict(init_std=0.05), '--init_std'),
            (bpe_data, dict(zero_init_residual=False), '--zero_init_residual'),  # an init key off its default
            (bpe_data, dict(tie_mode='untied', head_init='zero'), '--head_init'),  # the head starts as the table
            (bpe_data, dict(n_layer=4), '--n_layer=4'),  # typed at train.py's default, still not the weights' 2
            (bpe_data, dict(tie_mode='shuffle'), '--tie_mode=shuffle'),
            (tiny_data, dict(dataset='tiny'), 'prepare.py --input=FILE --tokenizer=gpt2')]:  # char-level data
        with pytest.raises(UserError, match=fragment.replace('.', r'\.')):
            train.train(finetune_args(data_dir, str(tmp_path / 'b'), hf_dir, **overrides))
    assert not os.path.exists(tmp_path / 'b')


# ---------------------------------------------------------------- export

def safetensors_matrices(folder, shape):
    from safetensors import safe_open
    with safe_open(os.path.join(folder, 'model.safetensors'), 'pt') as f:
        return [key for key in f.keys() if tuple(f.get_slice(key).get_shape()) == shape]


@pytest.mark.parametrize('tie_mode', ['tied', 'untied'])
def test_export_round_trips_with_the_tie_declared(tie_mode, finetuned, hf_dir, bpe_data, tmp_path):
    if tie_mode == 'tied':
        out_dir = finetuned[0]
    else:
        out_dir = str(tmp_path / 'untied')  # fine-tuned with Muon: its checkpoint exports like any other
        train.train(finetune_args(bpe_data, out_dir, hf_dir, tie_mode='untied', optimizer='muon'))
    target = str(tmp_path / 'hf')
    export.main([f'--out_dir={out_dir}', f'--to={target}'])

    ckpt = torch.load(os.path.join(out_dir, 'ckpt.pt'), weights_only=True)
    ours = GPT(make_model_config(dict(ckpt['model_args'])))
    ours.load_state_dict(ckpt['model'])
    theirs = hf_gpt2_class().from_pretrained(target).eval()
    tied = tie_mode == 'tied'
    assert theirs.config.tie_word_embeddings is tied
    assert (theirs.lm_head.weight.data_ptr() == theirs.transformer.wte.weight.data_ptr()) is tied
    assert theirs.num_parameters() == ours.num_params()  # the shared matrix counted once, as here
    assert len(safetensors_matrices(target, (50257, 64))) == (1 if tied else 2)  # stored once when tied
    idx = random_ids(16)
    with torch.no_grad():
        assert (our_logits(ours, idx) - theirs(idx).logits).abs().max().item() <= TOL
    # And back: our loader reads the export into the same model, with the same tie.
    back = hf_gpt2.from_pretrained(target)
    assert back.is_tied is tied and back.config.tie_mode == tie_mode
    for name, value in ours.state_dict().items():
        assert torch.equal(back.state_dict()[name], value), name


def test_export_folds_logit_scale_and_gives_a_bias_free_model_zero_biases(tiny_data, tmp_path):
    out_dir = str(tmp_path / 'run')
    train.train(train.parse_train_args(tiny_train_args(tiny_data, out_dir, max_iters=2, eval_interval=2,
                                                       tie_mode='logit_scale', bias=False)))
    export.main([f'--out_dir={out_dir}', f'--to={tmp_path}/hf'])
    theirs = hf_gpt2_class().from_pretrained(str(tmp_path / 'hf')).eval()
    ckpt = torch.load(os.path.join(out_dir, 'ckpt.pt'), weights_only=True)
    ours = GPT(make_model_config(dict(ckpt['model_args'])))
    ours.load_state_dict(ckpt['model'])
    biases = {k: v for k, v in theirs.named_parameters() if k.endswith('.bias')}
    assert biases and all(torch.count_nonzero(v) == 0 for v in biases.values())
    assert theirs.num_parameters() == ours.num_params() + sum(v.numel() for v in biases.values())
    idx = random_ids(16, ours.config.vocab_size)
    with torch.no_grad():
        assert (our_logits(ours, idx) - theirs(idx).logits).abs().max().item() <= TOL
    assert json.loads((tmp_path / 'hf' / 'meta.json').read_text())['chars'] == ckpt['meta']['chars']


@pytest.mark.parametrize('emb_scale', [False, True])
def test_export_of_pit_is_an_untied_gpt2_with_its_two_matrices_and_the_same_logits(tiny_data, tmp_path, emb_scale):
    out_dir = str(tmp_path / 'run')
    trained = train.train(train.parse_train_args(tiny_train_args(tiny_data, out_dir, max_iters=8, eval_interval=4,
                                                                 tie_mode='pit', emb_scale=emb_scale)))
    export.main([f'--out_dir={out_dir}', f'--to={tmp_path}/hf'])
    theirs = hf_gpt2_class().from_pretrained(str(tmp_path / 'hf')).eval()
    assert theirs.config.tie_word_embeddings is False
    assert theirs.lm_head.weight.data_ptr() != theirs.transformer.wte.weight.data_ptr()
    ours = trained['model'].eval()
    idx = random_ids(16, ours.config.vocab_size)
    with torch.no_grad():
        assert (our_logits(ours, idx) - theirs(idx).logits).abs().max().item() <= TOL
        # the exported head is U S: the head scores the exported input rows like pit decodes them
        U = ours.token_embedding_table.weight
        scale = ours.config.n_embd ** 0.5 if emb_scale else 1.0
        assert torch.allclose(theirs.lm_head.weight @ theirs.transformer.wte.weight.t(), scale * U @ U.t(), atol=1e-4)


def test_export_never_touches_a_non_empty_folder_and_refuses_shuffle_in_one_line(tiny_data, finetuned, tmp_path):
    target = tmp_path / 'taken'
    target.mkdir()
    (target / 'mine.txt').write_text('keep me')
    with pytest.raises(UserError, match='not an empty folder'):
        export.main([f'--out_dir={finetuned[0]}', f'--to={target}'])
    assert os.listdir(target) == ['mine.txt'] and (target / 'mine.txt').read_text() == 'keep me'
    assert sorted(os.listdir(tmp_path)) == ['taken']  # no temporary folder left beside it

    out_dir = str(tmp_path / 'shuffle')
    train.train(train.parse_train_args(tiny_train_args(tiny_data, out_dir, max_iters=1, eval_interval=1,
                                                       tie_mode='shuffle')))
    result = run('export.py', f'--out_dir={out_dir}', f'--to={tmp_path}/hf')
    assert_one_line_error(result, 'tie_mode=shuffle', 'cannot be exported')
    assert not os.path.exists(tmp_path / 'hf')
    shutil.rmtree(out_dir)

    train.train(train.parse_train_args(tiny_train_args(tiny_data, out_dir, max_iters=1, eval_interval=1,
                                                       emb_scale=True)))
    with pytest.raises(UserError, match='emb_scale=True with tie_mode=tied cannot be exported'):
        export.main([f'--out_dir={out_dir}', f'--to={tmp_path}/hf'])
    with pytest.raises(UserError, match='no checkpoint at'):
        export.main([f'--out_dir={tmp_path}/none', f'--to={tmp_path}/hf'])
    assert not os.path.exists(tmp_path / 'hf')


def test_export_of_a_compact_vocabulary_says_its_ids_are_not_gpt2s_and_samples_back(gpt2_files, tmp_path, capsys):
    root = tmp_path / 'data'
    root.mkdir()
    (root / 'book.txt').write_text(tiny_corpus(400), encoding='utf-8')
    prepare.main([f"--input={root / 'book.txt'}", '--dataset=book', f'--out_dir={root}', '--tokenizer=gpt2',
                  '--compact_vocab=true'])
    out_dir = str(tmp_path / 'run')
    train.train(train.parse_train_args(tiny_train_args(str(root), out_dir, dataset='book', max_iters=2,
                                                       eval_interval=2)))
    capsys.readouterr()
    target = str(tmp_path / 'hf')
    export.main([f'--out_dir={out_dir}', f'--to={target}'])
    printed = capsys.readouterr().out
    meta = json.loads((tmp_path / 'hf' / 'meta.json').read_text())
    vocab = meta['vocab_size']
    assert vocab < 200 and len(meta['bpe_ids']) == vocab  # compact: a few dozen GPT-2 ids, renumbered
    assert f"compact GPT-2 BPE vocabulary: id i is GPT-2's id bpe_ids[i] in meta.json ({vocab} ids" in printed
    assert hf_gpt2_class().from_pretrained(target).config.vocab_size == vocab

    # Greedy samples through the export and straight from the checkpoint are the same text, decoded
    # with bpe_ids: read as GPT-2 ids, the exported head would give other tokens.
    settings = dict(sample.DEFAULTS, start='ROMEO:', num_samples=1, max_new_tokens=8, temperature=0,
                    device='cpu', dtype='float32')
    [from_export] = sample.generate_samples(dict(settings, init_from=target))
    [from_ckpt] = sample.generate_samples(dict(settings, init_from='resume', out_dir=out_dir))
    assert from_export == from_ckpt and from_export.startswith('ROMEO:') and len(from_export) > len('ROMEO:')
