"""A corpus larger than memory (a folder or glob of .txt and .jsonl files, for prepare.py --input) tokenized with
GPT-2's BPE by worker processes and streamed into train.bin and val.bin, so that memory stays flat however large
the corpus. Every .txt file is one document, and every line of a .jsonl file one (its "text" field).

Every VAL_EVERY-th document, counted over the files in sorted order, goes to val.bin: a fixed share (0.5 %) that
does not depend on the number of workers. Each document ends with GPT-2's <|endoftext|>, as OpenWebText's bins do
in NanoGPT. The bins grow under temporary names and are renamed only when whole, meta.json last (any old one is
removed first): a kill leaves no half-written file under a real name, and the same command starts the job again.
"""

import collections
import glob
import hashlib
import json
import multiprocessing
import os
import time

import numpy as np

from lib.atomic_files import atomic_path, atomic_write_bytes, make_folder, remove_stale_temps
from lib.command_line import UserError
from lib.prepared_data import gpt2_encoding, largest
from lib.progress import on_terminal

VAL_EVERY = 200   # document k (from 0) goes to val where k % VAL_EVERY == VAL_EVERY - 1
CHUNK_DOCS = 64   # documents a worker tokenizes at a time; at most 2 chunks a worker wait, so memory stays flat
SUFFIXES = ('.txt', '.jsonl')


def is_corpus(input_path):
    """--input names a corpus (a folder, or a glob pattern) rather than one file."""
    return os.path.isdir(input_path) or any(c in input_path for c in '*?[')


def corpus_files(input_path):
    """The corpus's .txt and .jsonl files, sorted: the order that numbers its documents."""
    pattern = os.path.join(input_path, '*') if os.path.isdir(input_path) else input_path
    files = sorted(p for p in glob.glob(pattern) if os.path.isfile(p) and p.endswith(SUFFIXES))
    if not files:
        raise UserError(f"--input={input_path} holds no .txt or .jsonl file; give a folder or a pattern of them")
    return files


def documents(files, digest):
    """Each document's text in order; digest (hashlib) sees every byte read. What is not UTF-8 text, or a line that
    is not a JSON object whose "text" is a string, is one UserError naming the file and the line, as the one-file
    path's: nothing is replaced in silence, and no worker meets a number where it expects text."""
    for path in files:
        with open(path, 'rb') as f:
            if path.endswith('.txt'):
                data = f.read()
                digest.update(data)
                yield len(data), decoded(data, path)
                continue
            for number, line in enumerate(f, 1):
                digest.update(line)
                if line.strip():
                    try:
                        text = json.loads(decoded(line, f"{path}:{number}"))['text']
                    except (ValueError, KeyError, TypeError):
                        text = None
                    if not isinstance(text, str):
                        raise UserError(f"{path}:{number} is not a JSON object whose \"text\" is a string (one "
                                        f"document a line: {{\"text\": \"...\"}})")
                    yield len(line), text


def decoded(data, where):
    try:
        return data.decode('utf-8')
    except UnicodeDecodeError as e:
        raise UserError(f"{where} is not UTF-8 text (bad byte at offset {e.start}); convert it to UTF-8") from None


def encode_chunk(chunk):
    """A worker's part: (train ids, val ids) of (index, text) documents, each ending with <|endoftext|>."""
    encoding = gpt2_encoding()
    parts = {True: [], False: []}
    for index, text in chunk:
        parts[index % VAL_EVERY == VAL_EVERY - 1].append(encoding.encode_ordinary(text) + [encoding.eot_token])
    return [np.concatenate([np.array(doc, dtype=np.uint16) for doc in parts[is_val]] or [np.zeros(0, np.uint16)])
            for is_val in (False, True)]


def chunks(docs, read):
    """Lists of CHUNK_DOCS (index, text); read[0] counts the bytes handed out, for the bar."""
    chunk = []
    for index, (size, text) in enumerate(docs):
        read[0] += size
        chunk.append((index, text))
        if len(chunk) == CHUNK_DOCS:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def prepare_corpus(input_path, data_dir, dataset, workers, progress=True):
    """Tokenize the corpus into data_dir's train.bin, val.bin and meta.json; returns meta."""
    from tqdm import tqdm
    files = corpus_files(input_path)
    total = sum(os.path.getsize(p) for p in files)
    n_vocab = gpt2_encoding().n_vocab  # missing tiktoken files: one line now, not one per worker
    workers = workers or os.cpu_count() or 1
    make_folder(os.path.dirname(data_dir) or '.', '--out_dir')
    os.makedirs(data_dir, exist_ok=True)
    for name in ('train.bin', 'val.bin', 'meta.json'):
        remove_stale_temps(os.path.join(data_dir, name))
    meta_path = os.path.join(data_dir, 'meta.json')
    digest, read, counts, top, started = hashlib.sha256(), [0], [0, 0], [-1, -1], time.monotonic()
    bar = tqdm(total=total, unit='B', unit_scale=True, disable=not (progress and on_terminal()), desc=dataset)
    pool = multiprocessing.get_context('spawn').Pool(workers) if workers > 1 else None
    try:
        with atomic_path(os.path.join(data_dir, 'train.bin')) as train_tmp, \
                atomic_path(os.path.join(data_dir, 'val.bin')) as val_tmp, \
                open(train_tmp, 'wb') as train_file, open(val_tmp, 'wb') as val_file:
            waiting = collections.deque()  # results in document order, at most 2 a worker ahead of the writer

            def write(parts):
                for k, (f, ids) in enumerate(zip((train_file, val_file), parts)):
                    ids.tofile(f)
                    counts[k] += len(ids)
                    top[k] = max(top[k], largest(ids))
                bar.update(read[0] - bar.n)
                bar.set_postfix(tokens_s=f"{sum(counts) / max(time.monotonic() - started, 1e-9):,.0f}", refresh=False)
            for chunk in chunks(documents(files, digest), read):
                if pool is None:
                    write(encode_chunk(chunk))
                    continue
                waiting.append(pool.apply_async(encode_chunk, (chunk,)))
                while len(waiting) >= 2 * workers:
                    write(waiting.popleft().get())
            while waiting:
                write(waiting.popleft().get())
            if counts[0] == 0 or counts[1] == 0:  # refused while the new bins are temporaries: the old dataset stays
                raise UserError(f"--input={input_path} gives {counts[0]:,} training and {counts[1]:,} validation "
                                f"tokens: val takes every {VAL_EVERY}th document, so a corpus needs at least "
                                f"{VAL_EVERY} documents")
            if os.path.exists(meta_path):  # every check passed: from the bins' renames to the new meta.json, the
                os.remove(meta_path)        # folder must not claim the old data
    finally:
        bar.close()
        if pool is not None:
            pool.terminate()
    meta = dict(dataset=dataset, tokenizer='gpt2', vocab_size=n_vocab, dtype='uint16',
                train_tokens=counts[0], val_tokens=counts[1], source=f"{len(files)} files of {input_path}",
                source_bytes=total, source_sha256=digest.hexdigest(), source_location=os.path.abspath(input_path),
                val_documents=f"every {VAL_EVERY}th document, from document {VAL_EVERY - 1}",
                largest_id=dict(train=top[0], val=top[1]))  # what train.py checks the vocabulary against
    atomic_write_bytes(meta_path, (json.dumps(meta, indent=1, ensure_ascii=False) + '\n').encode('utf-8'))
    return meta
