"""A corpus larger than memory (a folder or glob of .txt and .jsonl files, for prepare.py --input) tokenized with
GPT-2's BPE by worker processes and streamed into train.bin and val.bin, so that memory stays flat however large
the corpus or any one file in it. Every line of a .jsonl file is one document (its "text" field). A .txt file is
read in blocks and cut into documents at blank lines: a document runs to the first blank line after its first
DOCUMENT_BYTES (64 KiB), so a smaller file is one document; where LONGEST_DOCUMENT (1 MiB) passes without a blank
line, it ends at the last line end before that (else at the last whole character). The blank line stays with the
document it ends, so the documents of a file, joined, are the file; one large file feeds every worker.

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
import re
import time

import numpy as np

from lib.atomic_files import atomic_path, atomic_write_bytes, make_folder, remove_stale_temps
from lib.command_line import UserError
from lib.memory import format_bytes
from lib.prepared_data import gpt2_encoding, largest
from lib.progress import on_terminal

VAL_EVERY = 200   # document k (from 0) goes to val where k % VAL_EVERY == VAL_EVERY - 1
CHUNK_DOCS = 64   # documents a worker tokenizes at a time; at most 2 chunks a worker wait, so memory stays flat
SUFFIXES = ('.txt', '.jsonl')
DOCUMENT_BYTES = 1 << 16     # a .txt document's least size, unless its file ends first
LONGEST_DOCUMENT = 1 << 20   # and its greatest
READ_BYTES = 1 << 20         # what one read of a .txt takes: memory stays a few blocks whatever the file's size
LONGEST_LINE = 1 << 26       # a .jsonl document's greatest size (64 MiB): its token list in a worker is ~10x that
BLANK_LINE = re.compile(rb'\n\r?\n')


def is_corpus(input_path):
    """--input names a corpus (a folder, or a glob pattern) rather than one file."""
    return os.path.isdir(input_path) or any(c in input_path for c in '*?[')


def corpus_files(input_path):
    """The corpus's .txt and .jsonl files, sorted: the order that numbers its documents; and the folders the pattern
    met, which are not read (a note says so)."""
    pattern = os.path.join(input_path, '*') if os.path.isdir(input_path) else input_path
    found = glob.glob(pattern)
    files = sorted(p for p in found if os.path.isfile(p) and p.endswith(SUFFIXES))
    folders = sorted(p for p in found if os.path.isdir(p))
    if not files:
        deeper = os.path.join(input_path, '*', '*.jsonl')
        inside = f"; its {len(folders)} folder(s) are not read: give a pattern such as {deeper}" if folders else ""
        raise UserError(f"--input={input_path} holds no .txt or .jsonl file{inside}")
    return files, folders


def documents(files, digest):
    """Each document as (bytes read, text), in order; digest (hashlib) sees every byte read. What is not UTF-8 text,
    or a line that is not a JSON object whose "text" is a string, is one UserError naming the file and the line (or
    the byte), as the one-file path's: nothing is replaced in silence, and no worker meets a number where it expects
    text."""
    for path in files:
        with open(path, 'rb') as f:
            if path.endswith('.txt'):
                yield from text_documents(f, path, digest)
                continue
            for number, line in enumerate(iter(lambda: f.readline(LONGEST_LINE + 1), b''), 1):
                digest.update(line)
                if len(line) > LONGEST_LINE:  # read no further: one line must not fill a worker's memory
                    raise UserError(f"{path}:{number} is longer than {format_bytes(LONGEST_LINE)}; a .jsonl line is one "
                                    f"document (cut a longer text into several, or give it as a .txt)")
                if line.strip():
                    yield len(line), json_text(decoded(line, f"{path}:{number}"), f"{path}:{number}")


def json_text(line, where):
    """The "text" of one .jsonl line, which must be a JSON object whose "text" is a string of real characters."""
    if line.startswith('\ufeff'):
        raise UserError(f"{where} starts with a byte-order mark, which JSON does not allow; save the file as UTF-8 "
                        f"without one")
    try:
        text = json.loads(line)['text']
    except (ValueError, KeyError, TypeError):
        text = None
    if not isinstance(text, str):
        raise UserError(f"{where} is not a JSON object whose \"text\" is a string (one document a line: "
                        f"{{\"text\": \"...\"}})")
    try:
        text.encode('utf-8')
    except UnicodeEncodeError as e:  # "\ud800" in JSON: the tokenizer would replace it in silence
        raise UserError(f"{where} has a lone surrogate (\\u{ord(text[e.start]):04x}) at character {e.start} of its "
                        f"\"text\", which is no character; remove it or pair it") from None
    return text


def text_documents(f, path, digest):
    """The documents of an open .txt file, READ_BYTES at a time; where they end does not depend on READ_BYTES."""
    buffer, start, offset = b'', 0, 0  # offset: the file position of buffer[0]; start: the next document's, in buffer
    while True:
        block = f.read(READ_BYTES)
        digest.update(block)
        buffer, offset, start = buffer[start:] + block, offset + start, 0
        while (end := document_end(buffer, start, final=not block)) is not None:
            yield end - start, decoded(buffer[start:end], path, offset + start)
            start = end
        if not block:
            return


def document_end(buffer, start, final):
    """Where the document that begins at buffer[start] ends, or None until more of the file is read."""
    limit = start + LONGEST_DOCUMENT
    blank = BLANK_LINE.search(buffer, start + DOCUMENT_BYTES, limit)
    if blank:
        return blank.end()
    if len(buffer) > limit:  # no blank line within reach: the last line end, else the last whole character
        line = buffer.rfind(b'\n', start, limit)
        if line >= 0:
            return line + 1
        while limit > start + 1 and buffer[limit] & 0xC0 == 0x80:  # a UTF-8 continuation byte: inside a character
            limit -= 1
        return limit
    return len(buffer) if final and len(buffer) > start else None


def decoded(data, where, offset=0):
    try:
        return data.decode('utf-8')
    except UnicodeDecodeError as e:
        raise UserError(f"{where} is not UTF-8 text (bad byte at offset {offset + e.start}); convert it to "
                        f"UTF-8") from None


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
    files, folders = corpus_files(input_path)
    if folders:
        print(f"note: --input={input_path} has {len(folders)} folder(s) beside its files, not read (as "
              f"{folders[0]}); give a pattern to take them")
    total = sum(os.path.getsize(p) for p in files)
    n_vocab = gpt2_encoding().n_vocab  # missing tiktoken files: one line now, not one per worker
    workers = workers or os.cpu_count() or 1
    make_folder(data_dir, '--out_dir')  # a file in the way is one line
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
                                f"tokens: val takes every {VAL_EVERY}th document (a .jsonl line, or about "
                                f"{DOCUMENT_BYTES // 1024} KiB of a .txt), so a corpus needs at least {VAL_EVERY} "
                                f"documents")
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
