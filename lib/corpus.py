"""A corpus larger than memory (a folder or glob of .txt and .jsonl files, for prepare.py --input) tokenized with
GPT-2's BPE by worker processes and streamed into train.bin and val.bin, so that memory stays flat however large
the corpus or any one file in it. Every line of a .jsonl file is one document (its "text" field). A .txt file is
read in blocks and cut into documents at blank lines: a document runs to the first blank line after its first
DOCUMENT_BYTES (64 KiB), so a smaller file is one document; where LONGEST_DOCUMENT (1 MiB) passes without a blank
line, it ends at the last line end before that (else at the last whole character). The blank line stays with the
document it ends, so the documents of a file, joined, are the file; one large file feeds every worker.

Every VAL_EVERY-th document, counted over the files in sorted order, goes to val.bin: a fixed share (0.5 %) that
does not depend on the number of workers. Each document ends with GPT-2's <|endoftext|>, as OpenWebText's bins do
in NanoGPT. The bins and meta.json grow in a new folder that replaces the old one whole at the end (new_folder): a
kill or a failure anywhere leaves the old dataset as it was, and the same command starts the job again."""

import collections
import concurrent.futures
import contextlib
import errno
import glob
import hashlib
import itertools
import json
import multiprocessing
import os
import re
import signal
import stat
import threading
import time

import numpy as np

from lib.atomic_files import new_folder, signals_deferred
from lib.command_line import UserError, sigint_blocked
from lib.memory import format_bytes
from lib.prepared_data import DATASET_FILES, gpt2_encoding, largest, write_meta
from lib.progress import on_terminal

VAL_EVERY = 200   # document k (from 0) goes to val where k % VAL_EVERY == VAL_EVERY - 1
CHUNK_DOCS = 64   # documents a worker tokenizes at a time; at most 2 chunks a worker wait, so memory stays flat
SUFFIXES = ('.txt', '.jsonl')
DOCUMENT_BYTES = 1 << 16     # a .txt document's least size, unless its file ends first
LONGEST_DOCUMENT = 1 << 20   # and its greatest
READ_BYTES = 1 << 20         # what one read of a .txt takes: memory stays a few blocks whatever the file's size
LONGEST_LINE = 1 << 26       # a .jsonl document's greatest size (64 MiB): its token list in a worker is ~10x that
BLANK_LINE = re.compile(rb'\n\r?\n')
CONTROL = bytes(c for c in range(32) if c not in b'\t\n\v\f\r')  # what no text has more than a trace of
KINDS = ((stat.S_ISDIR, 'a folder'), (stat.S_ISFIFO, 'a pipe'), (stat.S_ISSOCK, 'a socket'))  # else a device
HELD = "each worker holds a few documents and their token ids; use fewer --workers, or cut the corpus's longest documents"


def shown(path):
    """A path as words, whatever its bytes: a name that is not UTF-8 (Latin-1, say) shows its odd bytes as \\xe9."""
    return os.fsencode(path).decode('utf-8', 'backslashreplace')


def not_a_source(path, pipes=False):
    """Why path is no source, as words after its name, or None: a regular file (or, named alone, a pipe) is read
    to its end once; a device would never end, and a dangling link or a loop has nothing to read."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return f"is a symlink to {shown(os.readlink(path))}, which is not there" if os.path.islink(path) else "not found"
    except OSError as e:
        return "is a symlink loop" if e.errno == errno.ELOOP else f"cannot be read ({e.strerror})"
    kind = next((kind for test, kind in KINDS if test(mode)), 'a device')
    return None if stat.S_ISREG(mode) or pipes and kind == 'a pipe' else \
        f"is {kind}, not a regular file{' or a pipe' if pipes else ''}"


def unchanged(f, path, before):
    """Refuse f if it changed since before (its os.fstat when opened) while read to its end: its size or the time it
    was last written. meta.json's sha256 and byte count are of the bytes tokenized, one version of the file."""
    after = os.fstat(f.fileno())
    if stat.S_ISREG(before.st_mode) and (f.tell(), after.st_size, after.st_mtime_ns) != \
            (before.st_size, before.st_size, before.st_mtime_ns):
        raise UserError(f"{shown(path)} changed while it was read ({before.st_size:,} bytes before, {f.tell():,} read, "
                        f"{after.st_size:,} after); prepare it when nothing writes to it")


def check_text(data, where):
    """NULs and other control characters are valid UTF-8, so a binary file or UTF-16 decodes: refused here instead."""
    if (share := 1 - len(data.translate(None, CONTROL)) / max(len(data), 1)) > 0.1:
        raise UserError(f"{where} is not text: {share:.0%} of its bytes are NUL or other control characters (a binary "
                        f"file? UTF-16?); give UTF-8 text")


def is_corpus(input_path):
    """--input names a corpus (a folder, or a glob pattern) rather than one file; a path that exists is no pattern."""
    return os.path.isdir(input_path) or not os.path.lexists(input_path) and any(c in input_path for c in '*?[')


def corpus_files(input_path):
    """The corpus's .txt and .jsonl files, sorted: the order that numbers its documents. What else the pattern met
    is not read, and a note says so: folders, and names that are no regular file (a device, a dangling link)."""
    found = sorted(glob.glob(os.path.join(glob.escape(input_path), '*') if os.path.isdir(input_path) else input_path))
    folders = [p for p in found if os.path.isdir(p)]
    odd = {p: why for p in found if p.endswith(SUFFIXES) and p not in folders and (why := not_a_source(p))}
    files = [p for p in found if p.endswith(SUFFIXES) and p not in folders and p not in odd]
    if not files:
        deeper = os.path.join(input_path, '*', '*.jsonl')
        inside = f"; its {len(folders)} folder(s) are not read: give a pattern such as {deeper}" if folders else ""
        inside += ''.join(f"; {shown(p)} {why}" for p, why in odd.items())
        raise UserError(f"--input={shown(input_path)} holds no .txt or .jsonl file{inside}")
    if folders:
        print(f"note: --input={shown(input_path)} has {len(folders)} folder(s) beside its files, not read (as "
              f"{shown(folders[0])}); give a pattern to take them")
    for p, why in odd.items():
        print(f"note: {shown(p)} {why}; not read")
    return files


def documents(files, digest, read_bytes):
    """Each document as (bytes read, text), in order; digest (hashlib) sees every byte read, read_bytes[0] counts
    them. What is not text, or a line that is not a JSON object whose "text" is a string, is one UserError naming the
    file and the line (or the byte), as the one-file path's: no worker meets a number where it expects text."""
    for path in files:
        with open(path, 'rb') as f:
            before = os.fstat(f.fileno())
            yield from (text_documents if path.endswith('.txt') else jsonl_documents)(f, shown(path), digest)
            unchanged(f, path, before)
            read_bytes[0] += f.tell()


def jsonl_documents(f, where, digest):
    for number, line in enumerate(iter(lambda: f.readline(LONGEST_LINE + 1), b''), 1):
        digest.update(line)
        if len(line) > LONGEST_LINE:  # read no further: one line must not fill a worker's memory
            raise UserError(f"{where}:{number} is longer than {format_bytes(LONGEST_LINE)}; a .jsonl line is one "
                            f"document (cut a longer text into several, or give it as a .txt)")
        if line.strip():
            yield len(line), json_text(decoded(line, f"{where}:{number}"), f"{where}:{number}")


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
        check_text(text.encode('utf-8'), f'{where}\'s "text"')
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
    if blank := BLANK_LINE.search(buffer, start + DOCUMENT_BYTES, limit):
        return blank.end()
    if len(buffer) > limit:  # no blank line within reach: the last line end, else the last whole character
        if (line := buffer.rfind(b'\n', start, limit)) >= 0:
            return line + 1
        while limit > start + 1 and buffer[limit] & 0xC0 == 0x80:  # a UTF-8 continuation byte: inside a character
            limit -= 1
        return limit
    return len(buffer) if final and len(buffer) > start else None


def decoded(data, where, offset=0):
    try:
        text = data.decode('utf-8')
    except UnicodeDecodeError as e:
        raise UserError(f"{where} is not UTF-8 text (bad byte at offset {offset + e.start}); convert it to "
                        f"UTF-8") from None
    check_text(data, f"{where} from offset {offset:,}" if offset else where)
    return text


def follow(parent):
    """A worker's start: it ends with prepare.py, which a SIGKILL (the OOM killer's) ends without a word to it, and
    whose queue it would wait on forever."""
    def watch():
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)
    threading.Thread(target=watch, daemon=True).start()


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
    numbered = enumerate(docs)
    while chunk := list(itertools.islice(numbered, CHUNK_DOCS)):
        read[0] += sum(size for _, (size, _) in chunk)
        yield [(index, text) for index, (_, text) in chunk]


def prepare_corpus(input_path, data_dir, dataset, workers, progress=True):
    """Tokenize the corpus into data_dir's train.bin, val.bin and meta.json; returns meta."""
    from tqdm import tqdm
    files = corpus_files(input_path)
    n_vocab = gpt2_encoding().n_vocab  # missing tiktoken files: one line now, not one per worker
    workers = workers or os.cpu_count() or 1
    digest, read, source_bytes, counts, top, started = hashlib.sha256(), [0], [0], [0, 0], [-1, -1], time.monotonic()
    bar = tqdm(total=sum(os.path.getsize(p) for p in files), unit='B', unit_scale=True,
               disable=not (progress and on_terminal()), desc=dataset)
    pool = concurrent.futures.ProcessPoolExecutor(workers, multiprocessing.get_context('spawn'), initializer=follow,
                                                  initargs=(os.getpid(),)) if workers > 1 else None
    try:
        with new_folder(data_dir, '--out_dir', DATASET_FILES) as tmp:
            with open(os.path.join(tmp, 'train.bin'), 'wb') as train_file, \
                    open(os.path.join(tmp, 'val.bin'), 'wb') as val_file:
                waiting = collections.deque()  # results in document order, at most 2 a worker ahead of the writer

                def write(parts):
                    for k, (f, ids) in enumerate(zip((train_file, val_file), parts)):
                        f.write(ids)  # not ids.tofile(f): numpy's short write on a full disk has no errno
                        counts[k] += len(ids)
                        top[k] = max(top[k], largest(ids))
                    bar.update(read[0] - bar.n)
                    bar.set_postfix(tokens_s=f"{sum(counts) / max(time.monotonic() - started, 1e-9):,.0f}",
                                    refresh=False)
                for chunk in chunks(documents(files, digest, source_bytes), read):
                    waiting.append(submit(pool, chunk))
                    while len(waiting) >= 2 * workers:
                        write(result(waiting.popleft(), pool))
                while waiting:
                    write(result(waiting.popleft(), pool))
            if counts[0] == 0 or counts[1] == 0:
                raise UserError(f"--input={shown(input_path)} gives {counts[0]:,} training and {counts[1]:,} "
                                f"validation tokens: val takes every {VAL_EVERY}th document (a .jsonl line, or about "
                                f"{DOCUMENT_BYTES // 1024} KiB of a .txt), so a corpus needs at least {VAL_EVERY} "
                                f"documents")
            meta = dict(dataset=dataset, tokenizer='gpt2', vocab_size=n_vocab, dtype='uint16',
                        train_tokens=counts[0], val_tokens=counts[1], source=f"{len(files)} files of {shown(input_path)}",
                        source_bytes=source_bytes[0], source_sha256=digest.hexdigest(),
                        source_location=shown(os.path.abspath(input_path)),
                        val_documents=f"every {VAL_EVERY}th document, from document {VAL_EVERY - 1}",
                        largest_id=dict(train=top[0], val=top[1]))  # what train.py checks the vocabulary against
            write_meta(tmp, meta)
    finally:
        bar.close()
        if pool:
            stop(pool)
    return meta


def stop(pool):
    """Every worker ends now, not after the chunks in hand (Python 3.11's executor has no public way): by SIGKILL,
    which ends a stopped one too (a SIGTERM would wait for its SIGCONT, and the interpreter's exit for it). And this
    process closes its copy of the pipe's end the results come on, whose other copies went with the workers: the
    executor's thread reading a result a worker left half written then sees the pipe end, where it waited forever,
    and the interpreter's exit with it."""
    for process in list((pool._processes or {}).values()):
        process.kill()
    pool._result_queue._writer.close()
    pool.shutdown(wait=False, cancel_futures=True)


@contextlib.contextmanager
def workers_starting():
    """Around a chunk handed out, which may start a worker for it: SIGINT blocked (sigint_blocked), so that a
    terminal's Ctrl-C, sent to every process of the job, reaches prepare.py alone, which ends its workers, not a
    worker mid-import that would print a traceback. Here it waits for the block's end, deferred (the executor's
    thread may take it despite this thread's mask), so that no start is cut in two."""
    with signals_deferred((signal.SIGINT,)), sigint_blocked():
        yield


def submit(pool, chunk):
    """A chunk handed to a worker (without workers, the chunk itself). A pool that broke since the last chunk (a
    worker killed) refuses this one at once; the refusal is kept in the chunk's place, so that result() names the
    dead worker for it as for a chunk in flight: one way out for every moment of the kill."""
    if not pool:
        return chunk
    try:
        with workers_starting():
            return pool.submit(encode_chunk, chunk)
    except concurrent.futures.process.BrokenProcessPool as refused:
        work = concurrent.futures.Future()
        work.set_exception(refused)
        return work


def result(work, pool):
    """The ids of a chunk (work: a worker's future, or the chunk itself without workers). A worker killed (the OOM
    killer's SIGKILL) is one line naming it; multiprocessing.Pool would have replaced it and waited forever, and the
    executor itself can miss a death (a worker killed while it holds the task queue's lock), so this watches the
    workers too: a second without the chunk, and any worker that exited stops the wait."""
    if not pool:
        return encode_chunk(work)
    while True:
        workers = list((pool._processes or {}).values())
        if not concurrent.futures.wait([work], timeout=1).done:  # a Ctrl-C here is this process's own
            if all(p.exitcode is None for p in workers):
                continue
        elif (failed := work.exception()) is None:
            return work.result()
        elif isinstance(failed, concurrent.futures.process.BrokenProcessPool):
            waited_until = time.monotonic() + 5
            # The executor's thread reaps the workers too; the thread that loses that race reads no exit code yet
            # (waitpid's ECHILD), so wait until every worker's code is in before choosing which one died.
            while any(p.exitcode is None for p in workers) and time.monotonic() < waited_until:
                time.sleep(0.02)
        elif isinstance(failed, (UserError, MemoryError)):  # a MemoryError: prepare.py's own line
            raise failed
        else:  # whatever a worker raised (a SystemExit, a KeyboardInterrupt of its own, the tokenizer's Rust panic,
            # which is no Exception) or met sending it back (an error that does not pickle): the worker's, not ours
            said = ' '.join(str(failed).split())[:200]
            raise UserError(f"tokenizing stopped: a worker process failed with {type(failed).__name__}"
                            f"{': ' + said if said else ''}: {HELD}")
        raise UserError(f"tokenizing stopped: {death(workers)}: {HELD}") from None


def death(workers):
    """Which worker ended, and how, in words. Every end counts (a worker runs until the pool stops), but the
    executor SIGTERMs the rest once one is gone, so an end by SIGTERM is named only where no other explains it, and
    then all of them: which came first, the exit codes cannot tell."""
    ended = [p for p in workers if p.exitcode is not None]
    if not ended:
        return "a worker process ended"
    first = [p for p in ended if p.exitcode != -signal.SIGTERM][:1] or ended
    code = first[0].exitcode
    who = (f"worker process {first[0].pid}" if len(first) == 1 else
           f"one of worker processes {', '.join(str(p.pid) for p in first)}")
    if code >= 0:
        return f"{who} exited with code {code}"
    try:
        name = signal.Signals(-code).name
    except ValueError:  # a real-time signal has no name of its own
        name = f"signal {-code}"
    oom = ", most likely by the out-of-memory killer" if code == -signal.SIGKILL else ""  # its way to end one
    return f"{who} was killed by {name}{oom}"
