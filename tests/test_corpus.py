"""prepare.py --input=FOLDER: a corpus of .txt and .jsonl files, tokenized by worker processes into the bins train.py
reads, each document as the one-file path tokenizes it, every 200th document in val, and a kill leaves no
half-written file (lib/corpus.py)."""

import hashlib
import json
import os
import shutil

import numpy as np
import pytest

import prepare
from lib import corpus
from lib.command_line import UserError
from lib.prepared_data import gpt2_encoding, load_meta
from tests.conftest import FileActingMidRead, assert_one_line_error, run_in_process

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
    read = b''.join((folder / name).read_bytes() for name in sorted(os.listdir(folder)) if name != 'notes.md')
    assert (meta['source_bytes'], meta['source_sha256']) == (len(read), hashlib.sha256(read).hexdigest())
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


def test_one_large_text_file_is_cut_at_blank_lines_feeds_val_and_does_not_depend_on_the_read_size(tmp_path,
                                                                                                  monkeypatch):
    """The sizes shrunk 300-fold: a document runs to the first blank line after 200 bytes, at most 1,000 bytes
    (then to its last line end, else its last whole character); the documents, joined, are the file."""
    monkeypatch.setattr(corpus, 'DOCUMENT_BYTES', 200)
    monkeypatch.setattr(corpus, 'LONGEST_DOCUMENT', 1000)
    paragraphs = [sentence(k) + ('\nand a second line' if k % 3 else '') for k in range(3000)]
    text = '\n\n'.join(paragraphs[:1200]) + '\r\n\r\n' + '\n\n'.join(paragraphs[1200:]) + '\n' + 'é' * 700 + \
        '\n'.join(['ü' * 30] * 40) + '\n\n' + sentence(0)  # 1,400 bytes without a newline, then 40 lines, no blank
    (tmp_path / 'c').mkdir()
    (tmp_path / 'c' / 'book.txt').write_text(text, encoding='utf-8')
    sizes, bins = [], []
    for read_bytes in (64, 1 << 20):
        monkeypatch.setattr(corpus, 'READ_BYTES', read_bytes)
        bins.append(prepared(tmp_path / 'c', tmp_path / f'out{read_bytes}', workers=2)[0])
    assert all(np.array_equal(a, b) for a, b in zip(*bins))  # where a document ends is the text's, not the read's
    encoding = gpt2_encoding()
    train, val = (split_documents(ids, encoding.eot_token) for ids in bins[0])
    docs = [train.pop(0) if k % 200 != 199 else val.pop(0) for k in range(len(train) + len(val))]
    texts = [encoding.decode(doc) for doc in docs]
    assert ''.join(texts) == text and len(docs) >= 400 and not train and not val  # two documents in val, at least
    assert all(doc == encoding.encode_ordinary(t) for doc, t in zip(docs, texts))
    for t, after in zip(texts, texts[1:]):
        reach = (t + after).encode('utf-8')[200:1000]  # a document that ends elsewhere than a blank line had none
        assert 200 <= len(t.encode('utf-8')) <= 1000
        assert t.endswith(('\n\n', '\r\n\r\n')) or not (b'\n\n' in reach or b'\n\r\n' in reach)
    assert any(t.endswith('é') for t in texts) and any(t.endswith('ü\n') for t in texts)  # the two fallbacks


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
    assert not (tmp_path / 'out').exists()  # no dataset folder, no temporary, not even the --out_dir made for them
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


class Link(str):
    """A symbolic link to make, where BAD_CORPORA gives a file's content."""


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
    'a_byte_order_mark': ({'x.jsonl': '\ufeff{"text": "a"}\n'}, [], r'x\.jsonl:1 starts with a byte-order mark'),
    'utf16_txt': ({'a.txt': 'hello'.encode('utf-16')}, [], r'a\.txt is not UTF-8 text \(bad byte at offset 0\)'),
    'txt_cut_inside_a_character': ({'a.txt': 'caf\u00e9'.encode('utf-8')[:-1]}, [], r'a\.txt .*at offset 3\)'),
    'a_lone_surrogate': ({'x.jsonl': '{"text": "ok"}\n{"text": "a \\ud800 b"}\n'}, [],
                         r'x\.jsonl:2 has a lone surrogate \(\\ud800\) at character 2'),
    'text_an_object': ({'x.jsonl': '{"text": {"a": 1}}\n'}, [], r'x\.jsonl:1 is not a JSON object whose "text"'),
    'a_json_string_line': ({'x.jsonl': '"just text"\n'}, [], r'x\.jsonl:1 is not a JSON object'),
    'no_text_key': ({'x.jsonl': '{"body": "x"}\n'}, [], r'x\.jsonl:1 is not a JSON object whose "text"'),
    'trailing_garbage': ({'x.jsonl': '{"text": "a"} x\n'}, [], r'x\.jsonl:1 is not a JSON object'),
    'an_empty_jsonl': ({'x.jsonl': ''}, [], r'gives 0 training and 0 validation tokens.*at least 200 documents'),
    'only_blank_lines': ({'x.jsonl': '\n \n\t\n'}, [], r'at least 200 documents'),
    'a_line_too_long': ({'x.jsonl': '{"text": "a"}\n{"text": "' + 'a' * 100 + '"}\n'}, [],
                        r'x\.jsonl:2 is longer than 64 bytes; a \.jsonl line is one document', {'LONGEST_LINE': 64}),
    'only_subfolders': ({'sub/a.txt': 'x'}, [], r'holds no \.txt or \.jsonl file; its 1 folder\(s\) are not read'),
    'a_pattern_of_folders': ({'sub/a.txt': 'x'}, ['--input={corpus}/*'], r'its 1 folder\(s\) are not read'),
    'a_pattern_matching_nothing': ({'a.txt': 'x'}, ['--input={corpus}/*.md'], r'holds no \.txt or \.jsonl file$'),
    'a_folder_that_is_not_there': ({'a.txt': 'x'}, ['--input={corpus}/nope/'], r'--input file not found'),
    'a_character_tokenizer': ({'a.txt': 'x'}, ['--tokenizer=char'], r'use --tokenizer=gpt2 and no --compact_vocab'),
    'a_compact_vocabulary': ({'a.txt': 'x'}, ['--compact_vocab=true'], r'use --tokenizer=gpt2 and no --compact_vocab'),
    'a_default_corpus_source': ({'a.txt': 'x'}, ['--source=registry'], r'--source chooses the default corpus'),
    'a_dataset_that_is_a_path': ({'a.txt': 'x'}, ['--dataset=../x'], r"--dataset='\.\./x' must be a plain folder"),
    'an_empty_out_dir': ({'a.txt': 'x'}, ['--out_dir='], r'--out_dir must name a folder'),
    'a_dataset_folder_that_is_a_file': ({'a.txt': 'x'}, ['--out_dir={corpus}', '--dataset=a.txt'],
                                        r'cannot write --out_dir=.*a\.txt: .*a\.txt is a file, not a folder'),
    'workers_not_a_number': ({'a.txt': 'x'}, ['--workers=abc'], r"--workers expects an integer, got 'abc'"),
    'workers_a_fraction': ({'a.txt': 'x'}, ['--workers=1.5'], r"--workers expects an integer, got '1\.5'"),
    'progress_not_a_boolean': ({'a.txt': 'x'}, ['--progress=maybe'], r'--progress expects a boolean'),
    'an_unknown_tokenizer': ({'a.txt': 'x'}, ['--tokenizer=gpt3'], r"--tokenizer='gpt3' is not allowed; choose one"),
    'a_misspelt_option': ({'a.txt': 'x'}, ['--worker=2'], r'unknown key --worker; did you mean --workers\?'),
    'mostly_nul': ({'a.txt': '\0' * 300}, [], r'a\.txt is not text: 100% of its bytes are NUL or other control'),
    'nul_in_a_json_text': ({'x.jsonl': '{"text": "ok"}\n{"text": "\\u0000\\u0000 a"}\n'}, [],
                           r'x\.jsonl:2\'s "text" is not text: 50% of its bytes are NUL'),
    'a_latin1_file_name': ({'caf\udce9.txt': b'caf\xe9'}, [], r'caf\\xe9\.txt is not UTF-8 text \(bad byte at offset 3'),
    'only_a_dangling_link': ({'a.txt': Link('nowhere.txt')}, [],
                             r'holds no \.txt or \.jsonl file; .*a\.txt is a symlink to nowhere\.txt, which is not there$'),
    'only_a_device': ({'a.txt': Link('/dev/zero')}, [], r'a\.txt is a device, not a regular file$'),
}


def folder_bytes(folder):
    """A prepared dataset's files and their bytes: what a rejected prepare.py must leave as it was."""
    return {name: (folder / name).read_bytes() for name in sorted(os.listdir(folder))}


@pytest.mark.parametrize('case', BAD_CORPORA)
def test_a_rejected_corpus_is_one_line_and_leaves_the_prepared_dataset_as_it_was(case, tmp_path, monkeypatch):
    files, flags, message, *shrunk = BAD_CORPORA[case]
    for name, value in (shrunk[0] if shrunk else {}).items():
        monkeypatch.setattr(corpus, name, value)
    dataset = 'shakespeare_char' if '--dataset=shakespeare_char' in flags else 'c'
    out = tmp_path / 'out'
    before = tmp_path / 'before.txt'
    before.write_text('\n\n'.join(GOOD_TEXT), encoding='utf-8')
    prepare.main([f'--input={before}', f'--out_dir={out}', f'--dataset={dataset}'])  # the dataset a typo must keep
    held = folder_bytes(out / dataset)
    folder = tmp_path / 'corpus'
    for name, content in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, Link):
            (folder / name).symlink_to(content)
        else:
            (folder / name).write_bytes(content if isinstance(content, bytes) else content.encode('utf-8'))
    with pytest.raises(UserError, match=message):  # the later of two same options wins, as on the command line
        prepare.main([f'--input={folder}', f'--out_dir={out}', f'--dataset={dataset}', '--workers=1',
                      *(flag.format(corpus=folder) for flag in flags)])
    assert folder_bytes(out / dataset) == held
    assert len(BAD_CORPORA) >= 30


FAULTS = {  # raised where the bins are written, halfway through the corpus: what the user then reads
    'out_of_memory': (MemoryError(), 'out of memory (an allocation failed) preparing --input='),
    'a_full_disk': (OSError(28, 'No space left on device', 'c/train.bin.tmp'), 'No space left on device'),
}


@pytest.mark.parametrize('fault', FAULTS)
def test_a_fault_midway_is_one_line_and_leaves_the_prepared_dataset_as_it_was(fault, folder, tmp_path, monkeypatch):
    error, fragment = FAULTS[fault]
    out = tmp_path / 'out'
    prepared(folder, out, workers=1)
    held = folder_bytes(out / 'c')
    calls = []

    def failing(ids):
        calls.append(1)
        if len(calls) == 3:
            raise error
        return int(ids.max()) if len(ids) else -1
    monkeypatch.setattr(corpus, 'largest', failing)
    assert_one_line_error(run_in_process('prepare.py', f'--input={folder}', f'--out_dir={out}', '--dataset=c',
                                         '--workers=1'), fragment)
    assert folder_bytes(out / 'c') == held


def test_what_is_not_a_regular_file_is_a_note_and_the_rest_is_read(folder, tmp_path, capsys):
    corpus_dir = tmp_path / 'corpus'
    shutil.copytree(folder, corpus_dir)
    for name, target in [('zero.txt', '/dev/zero'), ('gone.jsonl', 'nowhere'), ('loop.txt', 'loop.txt')]:
        (corpus_dir / name).symlink_to(target)
    capsys.readouterr()
    (train, val), meta = prepared(corpus_dir, tmp_path / 'out', workers=1)
    assert capsys.readouterr().out.splitlines()[:3] == [
        f'note: {corpus_dir}/gone.jsonl is a symlink to nowhere, which is not there; not read',
        f'note: {corpus_dir}/loop.txt is a symlink loop; not read',
        f'note: {corpus_dir}/zero.txt is a device, not a regular file; not read']
    assert meta['source'] == f'151 files of {corpus_dir}'


def test_a_corpus_file_that_grows_while_read_is_refused(folder, tmp_path, monkeypatch):
    out = tmp_path / 'out'
    prepared(folder, out, workers=1)
    held = folder_bytes(out / 'c')
    corpus_dir = tmp_path / 'corpus'
    shutil.copytree(folder, corpus_dir)
    grows = corpus_dir / 'a.jsonl'
    real_open = open

    class Appended(FileActingMidRead):  # a writer adds a document while the first line is read
        def readline(self, *args):
            line = self.f.readline(*args)
            if self.f.tell() == len(line):
                with real_open(grows, 'a') as f:
                    f.write('{"text": "one more"}\n')
            return line
    monkeypatch.setattr(corpus, 'open', lambda path, *args: Appended(path, *args) if path == str(grows)
                        else real_open(path, *args), raising=False)
    size = grows.stat().st_size
    with pytest.raises(UserError, match=rf'^{grows} changed while it was read \({size:,} bytes before, '
                                        rf'{size + 21:,} read, {size + 21:,} after\); prepare it when nothing writes'):
        prepared(corpus_dir, out, workers=1)
    assert folder_bytes(out / 'c') == held
