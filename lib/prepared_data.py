"""A dataset as prepare.py leaves it, read back: data/NAME/meta.json and the codec it names
(characters, GPT-2 BPE, or a compact GPT-2 vocabulary), and the token files train.bin and val.bin
as tensors (or, past a size, left in their files), from which train.get_batch draws its windows."""

import json
import os
import time

import numpy as np

from lib.atomic_files import remove_stale_temps
from lib.command_line import UserError
from lib.memory import memory_shortfall, out_of_memory_reason

DATASET_FILES = ('train.bin', 'val.bin', 'meta.json')  # a prepared dataset's folder holds these and nothing else

REPLACEMENT = "\ufffd"  # what decode shows for an id that names no token
FIELDS = dict(dataset=str, source=str, source_location=str, source_sha256=str, source_bytes=int, val_documents=str)
GPT2_VOCAB = 50257  # tiktoken's gpt2 n_vocab: the bound of a compact vocabulary's bpe_ids


def _prepare_command(data_dir):
    parent, name = os.path.split(os.path.normpath(data_dir))
    dataset = ("" if name == "shakespeare_char" else " --dataset=shakespeare" if name == "shakespeare"
               else f" --input=FILE --dataset={name}")
    out_dir = "" if os.path.normpath(parent or ".") == "data" else f" --out_dir={parent or '.'}"
    return f"python prepare.py{dataset}{out_dir}"


def load_meta(data_dir):
    """Read DIR/meta.json and check that it is consistent, that the bins it describes are there and complete, and
    that their largest ids are in the vocabulary. A prepare.py killed mid-swap is undone first (new_folder)."""
    remove_stale_temps(os.path.realpath(data_dir), reader=True)  # a kill between a swap's renames, undone
    path = os.path.join(data_dir, "meta.json")
    if not os.path.isfile(path):
        raise UserError(f"no prepared data in {data_dir} (meta.json is missing); create it with: {_prepare_command(data_dir)}")
    try:
        with open(path, encoding="utf-8") as f:
            meta = json.load(f)
    except (OSError, ValueError, RecursionError) as e:  # RecursionError: nesting deeper than json reads
        raise UserError(f"{path} is unreadable ({e}); re-create it with: {_prepare_command(data_dir)}") from None
    if problem := _meta_problem(meta):
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
        if "largest_id" in meta:  # prepare.py records each split's largest, so this reads no split
            check_token_ids(bin_path, [meta["largest_id"][split]], meta, data_dir)
    return meta


def write_meta(data_dir, meta):
    """meta.json beside the bins it describes, then the whole checked as a reader will check it."""
    with open(os.path.join(data_dir, "meta.json"), "wb") as f:
        f.write((json.dumps(meta, indent=1, ensure_ascii=False) + "\n").encode("utf-8"))
    load_meta(data_dir)


def _meta_problem(meta):
    """What makes meta (a parsed meta.json) unusable, as words after its path, or None if nothing does."""
    if not isinstance(meta, dict):
        return f"holds a JSON {type(meta).__name__}, not an object"
    required = ["vocab_size", "tokenizer", "dtype", "train_tokens", "val_tokens"]
    if missing := [key for key in required + (["chars"] if meta.get("tokenizer") == "char" else []) if key not in meta]:
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
    if dtype is None or dtype.kind != "u" or not dtype.isnative:  # '>u2' on a little-endian machine: every id swapped
        return f"gives dtype={meta['dtype']!r}; it must be an unsigned integer type such as uint16 or uint32"
    if meta["vocab_size"] - 1 > np.iinfo(dtype).max:
        return f"gives vocab_size={meta['vocab_size']}, too many ids for dtype={meta['dtype']}"
    bpe_ids = meta.get("bpe_ids")
    if "bpe_ids" in meta:
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
    if wrong := [key for key, kind in FIELDS.items() if key in meta and not isinstance(meta[key], kind)]:
        return f"gives {wrong[0]}={meta[wrong[0]]!r}; it must be {'text' if FIELDS[wrong[0]] is str else 'an integer'}"
    largest = meta.get("largest_id")
    if "largest_id" in meta and not (isinstance(largest, dict) and all(
            isinstance(largest.get(split), int) and not isinstance(largest.get(split), bool) and largest[split] >= -1
            for split in ("train", "val"))):
        return f"gives largest_id={largest!r}; it must be {{\"train\": ID, \"val\": ID}}, each an integer >= -1"
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
    if len(tokens) and (top := int(np.max(tokens))) >= meta["vocab_size"]:
        raise UserError(f"{bin_path} holds token id {top} but {os.path.join(data_dir, 'meta.json')} gives "
                        f"vocab_size={meta['vocab_size']} (ids 0 to {meta['vocab_size'] - 1}): the meta.json is stale "
                        f"or was edited; re-create both with: {_prepare_command(data_dir)}")


def gpt2_encoding():
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
    if meta["tokenizer"] == "gpt2":
        return _gpt2_codec(gpt2_encoding(), meta.get("bpe_ids"))
    chars = meta["chars"]
    stoi = {ch: i for i, ch in enumerate(chars)}

    def encode(text):
        if unknown := list(dict.fromkeys(ch for ch in text if ch not in stoi)):
            shown = ", ".join(repr(ch) for ch in unknown[:10])
            more = f" and {len(unknown) - 10} more" if len(unknown) > 10 else ""
            raise UserError(f"prompt has characters not in the vocabulary: {shown}{more}")
        return [stoi[ch] for ch in text]

    def decode(ids):
        return "".join(chars[i] if 0 <= i < len(chars) else REPLACEMENT for i in ids)
    return encode, decode


def _gpt2_codec(encoding, bpe_ids):
    """(encode, decode) of GPT-2's BPE; with bpe_ids (a compact GPT-2 vocabulary), each GPT-2 id to its place there."""
    gpt2_ids = range(encoding.n_vocab) if bpe_ids is None else bpe_ids  # our id i is GPT-2's gpt2_ids[i]
    compact = None if bpe_ids is None else {gpt2_id: i for i, gpt2_id in enumerate(bpe_ids)}

    def encode(text):
        # Same as prepare: special-token text is ordinary text, as it was in the training data.
        ids = encoding.encode_ordinary(text)
        if compact is None:
            return ids
        if unknown := list(dict.fromkeys(i for i in ids if i not in compact)):
            # The model has no row for a token its training text never had: name the pieces, not the ids.
            pieces = [encoding.decode_single_token_bytes(i).decode("utf-8", errors="replace") for i in unknown]
            shown = ", ".join(repr(p) for p in pieces[:10])
            more = f" and {len(pieces) - 10} more" if len(pieces) > 10 else ""
            raise UserError(f"prompt has GPT-2 tokens not in this compact vocabulary (they never occur in the "
                            f"prepared text): {shown}{more}")
        return [compact[i] for i in ids]

    def decode(ids):
        # An untrained model with a padded vocabulary can emit ids that name no token.
        pieces = (encoding.decode_single_token_bytes(gpt2_ids[i]) if 0 <= i < len(gpt2_ids) else REPLACEMENT.encode()
                  for i in ids)
        return b"".join(pieces).decode("utf-8", errors="replace")
    return encode, decode


def largest(ids):
    """A split's (or a part's) largest token id, -1 for none: what meta.json records, prepare.py's and a corpus's alike,
    so that train.py need not read the split to check its ids against the vocabulary."""
    return int(ids.max()) if len(ids) else -1


def compact_ids(ids):
    """GPT-2 ids -> (ids renumbered 0..k-1 in increasing GPT-2 order, the k GPT-2 ids kept, in that order)."""
    kept = np.unique(ids)
    return np.searchsorted(kept, ids), kept


# A split whose int64 copy would be larger than this is read from its file as it is needed (memory-mapped, as NanoGPT
# reads OpenWebText's 9 B tokens) instead of held in memory: GPT-2 small's 2.5 B tokens a run would be 20 GB a
# process. Below it, memory is faster (one gather from a tensor a batch) and costs little.
IN_MEMORY_MAX_BYTES = 1 << 30
CHECK_CHUNK = 1 << 26  # tokens scanned at a time for ids outside the vocabulary, so the check's memory stays flat


class MappedTokens:
    """A split left in its .bin file (np.memmap): len() and tokens[offsets] as train.get_batch uses an int64 tensor, the
    windows read from the file (the page cache keeps what is hot), so memory does not grow with the corpus."""

    def __init__(self, tokens):
        self.tokens = tokens  # an np.memmap of the file, read-only

    def __len__(self):
        return len(self.tokens)

    def __getitem__(self, offsets):
        import torch
        return torch.from_numpy(self.tokens[offsets.numpy()].astype(np.int64))


def in_memory(tokens):
    """A split as an int64 tensor in memory: get_batch's gather then needs no conversion a batch."""
    import torch
    return torch.from_numpy(tokens.astype(np.int64))


def where_held(splits):
    """How the header names where the splits live: 'in memory', or which are memory-mapped."""
    mapped = [name for name, tokens in splits.items() if isinstance(tokens, MappedTokens)]
    return f"memory-mapped from {', '.join(f'{name}.bin' for name in mapped)}" if mapped else "in memory"


def load_splits(cfg, in_memory_max_bytes=None):
    """The prepared token splits and the dataset's metadata: each split an int64 tensor read once into memory, or,
    where that copy would pass in_memory_max_bytes (IN_MEMORY_MAX_BYTES), a MappedTokens over its file; get_batch
    draws the same windows from either."""
    limit = IN_MEMORY_MAX_BYTES if in_memory_max_bytes is None else in_memory_max_bytes
    data_dir = os.path.join(cfg['data_dir'], cfg['dataset'])
    meta = load_meta(data_dir)  # UserError naming the prepare.py command if missing
    held = (f"train.py holds a split of up to {limit / 2 ** 30:g} GiB in memory, 8 bytes a token (a larger one stays "
            f"in its file); use less data or a machine with more memory")
    # Refused before reading where the splits held (int64, both at once) cannot fit: a machine that overcommits would
    # let numpy read until the kernel killed it.
    tokens = sum(n for n in (meta['train_tokens'], meta['val_tokens']) if 8 * n <= limit)  # load_meta matched the bins
    if short := memory_shortfall(8 * tokens, 'cpu'):
        raise UserError(f"the prepared data in {data_dir} ({tokens:,} tokens) needs {short}: {held}")
    splits, started = {}, time.time()
    for split in ('train', 'val'):
        path = os.path.join(data_dir, f'{split}.bin')
        try:
            tokens = np.memmap(path, dtype=np.dtype(meta['dtype']), mode='r') if os.path.getsize(path) else \
                np.zeros(0, dtype=np.dtype(meta['dtype']))
            # Every id must be in the vocabulary (an IndexError deep in the model otherwise): load_meta checked the
            # largest that prepare.py records; a dataset prepared before it did is scanned.
            for start in range(0, len(tokens) if 'largest_id' not in meta else 0, CHECK_CHUNK):
                check_token_ids(path, tokens[start:start + CHECK_CHUNK], meta, data_dir)
            if len(tokens) <= cfg['block_size']:
                raise UserError(f"{path} has {len(tokens)} tokens, fewer than one context window plus one "
                                f"(--block_size={cfg['block_size']}); use a smaller --block_size or more text")
            splits[split] = MappedTokens(tokens) if 8 * len(tokens) > limit else in_memory(tokens)
        except OSError as e:
            raise UserError(f"cannot read {path}: {e.strerror}; re-create it with python prepare.py "
                            f"--dataset={cfg['dataset']}") from None
        except MemoryError as e:  # numpy's, making a split's int64 copy
            raise UserError(f"out of memory ({out_of_memory_reason(e)}) reading {path}: {held}") from None
    if 'largest_id' not in meta:
        print(f"{data_dir}: prepared before meta.json recorded each split's largest id, so every token was read to "
              f"check it ({time.time() - started:.1f} s); prepare it again to start without reading the corpus")
    return splits, meta
