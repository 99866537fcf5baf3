"""prepare.py --input=FOLDER: a corpus of .txt and .jsonl files, tokenized by worker processes into the bins train.py
reads, each document as the one-file path tokenizes it, every 200th document in val, and a kill leaves no
half-written file (lib/corpus.py)."""

import json
import os

import numpy as np
import pytest

import prepare
from lib import corpus
from lib.command_line import UserError
from lib.prepared_data import gpt2_encoding, load_meta

pytestmark = pytest.mark.usefixtures('gpt2_files')  # tiktoken's GPT-2 files, never downloaded (conftest.py)


def sentence(k):
    return f"Document {k}: the tied head scores its own token {k % 7} times over, and then learns. Ünïcode {k}."


@pytest.fixture(scope='module')
def folder(tmp_path_factory):
    """450 documents: 300 lines of a .jsonl file, then 150 .txt files (sorted after it), one blank line skipped."""
    root = tmp_path_factory.mktemp('corpus')
    with open(root / 'a.jsonl', 'w', encoding='utf-8') as f:
        for k in range(300):
            f.write(json.dumps({'text': sentence(k), 'url': 'x'}) + '\n' + ('\n' if k == 5 else ''))
    for k in range(300, 450):
        (root / f't{k}.txt').write_text(sentence(k), encoding='utf-8')
    (root / 'notes.md').write_text('not a corpus file', encoding='utf-8')
    return root


def prepared(folder, out, workers):
    prepare.main([f'--input={folder}', f'--out_dir={out}', '--dataset=c', f'--workers={workers}'])
    data_dir = os.path.join(out, 'c')
    return [np.fromfile(os.path.join(data_dir, f'{split}.bin'), dtype=np.uint16) for split in ('train', 'val')], \
        load_meta(data_dir)


def split_documents(ids, eot):
    ends = np.flatnonzero(ids == eot)
    return [ids[start:end].tolist() for start, end in zip(np.r_[0, ends[:-1] + 1], ends)]


def test_each_document_is_tokenized_as_the_one_file_path_does_and_every_200th_is_val(folder, tmp_path):
    (train, val), meta = prepared(folder, tmp_path / 'out', workers=2)
    encoding = gpt2_encoding()
    docs = [sentence(k) for k in range(450)]
    assert split_documents(train, encoding.eot_token) == [encoding.encode_ordinary(d) for k, d in enumerate(docs)
                                                          if k % 200 != 199]
    assert split_documents(val, encoding.eot_token) == [encoding.encode_ordinary(docs[k]) for k in (199, 399)]
    assert (meta['train_tokens'], meta['val_tokens'], meta['vocab_size']) == (len(train), len(val), 50257)
    assert meta['largest_id'] == {'train': int(train.max()), 'val': int(val.max())}  # what a start checks
    # the one-file path on one document's text gives its tokens too (train and val together)
    one = tmp_path / 'one.txt'
    one.write_text(docs[7], encoding='utf-8')
    prepare.main([f'--input={one}', f'--out_dir={tmp_path / "single"}', '--tokenizer=gpt2'])
    single = np.concatenate([np.fromfile(tmp_path / 'single' / 'one' / f'{s}.bin', dtype=np.uint16) for s in ('train', 'val')])
    assert single.tolist() == split_documents(train, encoding.eot_token)[7]


def test_one_worker_and_two_write_the_same_bins(folder, tmp_path):
    one, _ = prepared(folder, tmp_path / 'one', workers=1)
    two, _ = prepared(folder, tmp_path / 'two', workers=2)
    assert all(np.array_equal(a, b) for a, b in zip(one, two))


def test_a_kill_midway_leaves_no_prepared_folder_and_the_same_command_finishes_the_job(folder, tmp_path, monkeypatch):
    real = corpus.encode_chunk
    calls = []

    def killed(chunk):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(chunk)
    monkeypatch.setattr(corpus, 'encode_chunk', killed)
    with pytest.raises(KeyboardInterrupt):
        prepared(folder, tmp_path / 'out', workers=1)
    data_dir = tmp_path / 'out' / 'c'
    assert sorted(os.listdir(data_dir)) == []  # no bin under its real name, no meta.json, no temporary left
    monkeypatch.setattr(corpus, 'encode_chunk', real)
    again, _ = prepared(folder, tmp_path / 'out', workers=1)
    whole, _ = prepared(folder, tmp_path / 'whole', workers=1)
    assert all(np.array_equal(a, b) for a, b in zip(again, whole))


def test_a_corpus_file_that_is_not_json_lines_with_text_is_one_line_naming_it(tmp_path):
    (tmp_path / 'c').mkdir()
    (tmp_path / 'c' / 'x.jsonl').write_text('{"text": "fine"}\n{"body": "no text"}\n', encoding='utf-8')
    with pytest.raises(UserError, match=r'x\.jsonl:2 is not a JSON object whose "text" is a string'):
        prepare.main([f'--input={tmp_path / "c"}', f'--out_dir={tmp_path / "out"}', '--workers=1'])
    with pytest.raises(UserError, match='holds no .txt or .jsonl file'):
        prepare.main([f'--input={tmp_path / "c" / "*.md"}', f'--out_dir={tmp_path / "out"}'])
    with pytest.raises(UserError, match='--tokenizer=gpt2'):
        prepare.main([f'--input={tmp_path / "c"}', '--tokenizer=char', f'--out_dir={tmp_path / "out"}'])


# A rejected prepare.py leaves data/ as it was: each bad corpus or option against a dataset prepared before, the
# line it gets (file and line named where there is one), and the bytes of that dataset after.
GOOD_TEXT = [sentence(k) for k in range(400)]
BAD_CORPORA = {
    'malformed_line': ({'x.jsonl': '{"text": "fine"}\n{"text": "cut off\n'}, [], r'x\.jsonl:2 is not a JSON object'),
    'a_list_not_an_object': ({'x.jsonl': '{"text": "fine"}\n["text", "a"]\n'}, [], r'x\.jsonl:2 is not a JSON obj'),
    'text_null': ({'x.jsonl': '{"text": null}\n'}, [], r'x\.jsonl:1 is not a JSON object whose "text" is a string'),
    'text_a_number': ({'x.jsonl': '{"text": 42}\n'}, [], r'x\.jsonl:1 is not a JSON object whose "text" is a string'),
    'text_a_list': ({'x.jsonl': '{"text": ["a"]}\n'}, [], r'x\.jsonl:1 .*"text" is a string'),
    'latin1_txt': ({'a.txt': 'caf\u00e9'.encode('latin-1')}, [], r'a\.txt is not UTF-8 text \(bad byte at offset 3\)'),
    'latin1_jsonl_line': ({'x.jsonl': b'{"text": "ok"}\n{"text": "caf\xe9"}\n'}, [],
                          r'x\.jsonl:2 is not UTF-8 text'),
    'too_few_documents': ({f'd{k}.txt': sentence(k) for k in range(50)}, [], r'needs at least 200 documents'),
    'negative_workers': ({f'd{k}.txt': sentence(k) for k in range(3)}, ['--workers=-1'], r'--workers must be from 0'),
    'ten_thousand_workers': ({f'd{k}.txt': sentence(k) for k in range(3)}, ['--workers=10000'],
                             r'--workers must be from 0 \(one per core\) to \d+'),
    'a_folder_under_the_character_datasets_name': ({f'd{k}.txt': sentence(k) for k in range(300)},
                                                   ['--dataset=shakespeare_char'],
                                                   r'--dataset=shakespeare_char is always tokenized with char'),
}


@pytest.mark.parametrize('case', BAD_CORPORA)
def test_a_rejected_corpus_is_one_line_and_leaves_the_prepared_dataset_as_it_was(case, tmp_path):
    files, flags, message = BAD_CORPORA[case]
    dataset = 'shakespeare_char' if '--dataset=shakespeare_char' in flags else 'c'
    out = tmp_path / 'out'
    before = tmp_path / 'before.txt'
    before.write_text('\n\n'.join(GOOD_TEXT), encoding='utf-8')
    prepare.main([f'--input={before}', f'--out_dir={out}', f'--dataset={dataset}'])  # the dataset a typo must keep
    held = {name: (out / dataset / name).read_bytes() for name in sorted(os.listdir(out / dataset))}
    folder = tmp_path / 'corpus'
    folder.mkdir()
    for name, content in files.items():
        (folder / name).write_bytes(content if isinstance(content, bytes) else content.encode('utf-8'))
    with pytest.raises(UserError, match=message):
        prepare.main([f'--input={folder}', f'--out_dir={out}', f'--dataset={dataset}', '--workers=1', *flags]
                     if not any(flag.startswith('--workers') for flag in flags) else
                     [f'--input={folder}', f'--out_dir={out}', f'--dataset={dataset}', *flags])
    assert {name: (out / dataset / name).read_bytes() for name in sorted(os.listdir(out / dataset))} == held
