"""A named input that does not exist (a dataset, a file, a folder) is one line naming it, exit code 2 and
nothing written, never silently replaced by a default; where a fallback is the documented behaviour, it is
announced on a line of its own (docs/robustness.md, "Fallbacks are said, never taken silently")."""

import json

import pytest

import ablate
import bench
import prepare
import sample
import train
from conftest import assert_one_line_error, run, run_in_process, tiny_train_args
from lib.command_line import UserError


def test_bench_with_a_named_dataset_that_is_not_there_is_one_line():
    # was an AttributeError traceback; before that, a silent vocab_size of 65
    line = assert_one_line_error(run_in_process('bench.py', '--dataset=nope', '--bench_iters=1'), 'data/nope')
    assert 'meta.json is missing' in line


def test_bench_without_the_default_dataset_says_it_times_vocab_65(monkeypatch, tmp_path, capsys):
    monkeypatch.chdir(tmp_path)  # a fresh clone: no data/ at all
    cfg = train.parse_train_args([], bench.DEFAULTS)
    assert bench.vocab_size(cfg) == 65
    assert capsys.readouterr().err == ("note: no prepared data in data/shakespeare_char, so vocab_size is 65 (tiny "
                                       "shakespeare's characters); --vocab_size=N or --dataset=NAME times another\n")
    with pytest.raises(UserError, match='no prepared data in elsewhere/shakespeare_char'):
        bench.vocab_size(dict(cfg, data_dir='elsewhere'))  # named: no fallback
    assert bench.vocab_size(dict(cfg, vocab_size=80)) == 80 and capsys.readouterr().err == ''


def test_bench_times_the_shape_init_from_names(tiny_data, tmp_path, capsys):
    out_dir = str(tmp_path / 'run')
    train.train(train.parse_train_args(tiny_train_args(tiny_data, out_dir, max_iters=2, eval_interval=2)))
    capsys.readouterr()
    cfg = train.parse_train_args(['--init_from=resume', f'--out_dir={out_dir}'], bench.DEFAULTS)
    bench.take_shape_of_start(cfg)  # was ignored: train.py's default shape, 4 layers and width 128
    assert (cfg['n_layer'], cfg['n_head'], cfg['n_embd'], cfg['block_size']) == (1, 2, 32, 16)
    assert capsys.readouterr().err.startswith('note: --init_from=resume: timing a fresh model of its shape (1 layers')
    cfg = train.parse_train_args(['--init_from=gpt2'], bench.DEFAULTS)
    bench.take_shape_of_start(cfg)  # from the name alone: no weights, no transformers
    assert (cfg['n_layer'], cfg['n_embd'], cfg['vocab_size'], cfg['block_size'], cfg['bias']) == (12, 768, 50257, 64, True)
    with pytest.raises(UserError, match='no checkpoint at nowhere/ckpt.pt'):
        bench.take_shape_of_start(train.parse_train_args(['--init_from=resume', '--out_dir=nowhere'], bench.DEFAULTS))


def test_sample_refuses_an_out_dir_it_would_ignore():
    cfg = dict(sample.DEFAULTS, init_from='gpt2', out_dir='out-mine')
    with pytest.raises(UserError, match='--out_dir=out-mine names a run.s checkpoint, but --init_from=gpt2'):
        sample.generate_samples(cfg)


def test_sample_says_a_folder_without_meta_json_is_read_as_gpt2_bpe(tmp_path, capsys, monkeypatch, gpt2_files):
    folder = tmp_path / 'hf'
    folder.mkdir()
    with pytest.raises(UserError, match='not a folder written by transformers'):  # no model there: one line only
        sample.generate_samples(dict(sample.DEFAULTS, init_from=str(folder)))
    assert capsys.readouterr().err == ''
    (folder / 'config.json').write_text(json.dumps(dict(model_type='gpt2', vocab_size=50257, n_positions=1024,
                                                        n_embd=768, n_layer=12, n_head=12)))

    def weights_not_read(*args, **kwargs):
        raise UserError('stopped before the weights')
    monkeypatch.setattr(sample, 'from_pretrained', weights_not_read)
    with pytest.raises(UserError, match='stopped before the weights'):
        sample.generate_samples(dict(sample.DEFAULTS, init_from=str(folder)))
    assert capsys.readouterr().err == (f"note: {folder} has no meta.json (export.py writes one), so its token ids "
                                       f"are read as GPT-2 BPE\n")


def test_prepare_announces_the_fallback_corpus(tmp_path, monkeypatch, capsys):
    def offline():
        raise OSError('no network')
    monkeypatch.setitem(prepare.SOURCES['tinyshakespeare'], 'fetch', offline)
    monkeypatch.setitem(prepare.SOURCES['registry'], 'fetch', lambda: b'To be, or not to be.\n' * 50)
    prepare.main([f'--out_dir={tmp_path}'])
    notes = [line for line in capsys.readouterr().err.splitlines() if line.startswith('note: ')]
    assert notes == ["note: tinyshakespeare could not be downloaded (tinyshakespeare: OSError: no network), so this "
                     "is the fallback corpus, " + prepare.SOURCES['registry']['name'] + "; --source=tinyshakespeare "
                     "insists on the first, --input=FILE prepares any text"]
    prepare.main([f'--out_dir={tmp_path}'])  # again: the cached fallback wins, and says so
    (note,) = [line for line in capsys.readouterr().err.splitlines() if line.startswith('note: ')]
    assert 'is not cached and this one is, from an earlier run' in note
    prepare.main([f'--out_dir={tmp_path}', '--source=registry'])  # asked for: no note
    assert 'note:' not in capsys.readouterr().err


def test_ablate_with_a_named_dataset_that_is_not_there_writes_nothing(tmp_path):
    out_dir = tmp_path / 'out'
    with pytest.raises(UserError, match=f'no prepared data in {tmp_path}/nope'):
        ablate.ablate(ablate.parse_args(['--dataset=nope', f'--data_dir={tmp_path}', f'--out_dir={out_dir}']))
    assert not out_dir.exists()


def test_init_loss_refuses_text_without_a_pretrained_model_instead_of_ignoring_it():
    result = run('init_loss.py', '--text=book.txt', '--modes=tied', '--n_layer=1', '--n_embd=32', '--n_head=2')
    assert_one_line_error(result, '--text', '--init_from')
    assert result.stdout == ''  # no random-token table printed in its place
