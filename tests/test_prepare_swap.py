"""prepare.py replaces a prepared dataset in one step (lib/atomic_files.py new_folder): every call that opens, writes,
renames or removes is made to fail in turn, on both paths, and a corpus run is SIGKILLed at each such call and at
moments in time, and a Ctrl-C arrives just after each; the dataset there before is left byte for byte, or the new
one whole, and the workers end with it. How a worker's own end reads: test_prepare_workers.py."""

import builtins
import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

import prepare
from lib.atomic_files import remove_stale_temps
from lib.command_line import UserError
from lib.prepared_data import load_meta
from tests.conftest import ENV, REPO_ROOT, ctrl_c_put_back, tiny_corpus
from tests.test_corpus import folder_bytes, sentence

pytestmark = pytest.mark.usefixtures('gpt2_files')

WRAPPED = ('open', 'mkdir', 'rename', 'replace', 'remove', 'unlink', 'rmdir', 'fsync')  # of os; and open's files
FAILURES = [OSError(errno.ENOSPC, 'No space left on device'), MemoryError(), KeyboardInterrupt(),
            RuntimeError('unforeseen'), UserError('a mistake found late')]


class Faults:
    """Counts every os.open, mkdir, rename, replace, remove, unlink, rmdir and fsync, every open() and every write to
    a file it opened, and makes the k-th call fail (fail(name) raises, or kills the process). A call a change adds
    is counted, and so made to fail, without a word of this test changing."""

    def __init__(self, fail_at=0, fail=None, after=False):
        self.calls, self.fail_at, self.fail, self.after = [], fail_at, fail, after

    def hit(self, name, call):
        """call() counted as name; fail(name) comes before it (in its place), or with after=True once it returned."""
        self.calls.append(name)
        if len(self.calls) == self.fail_at and not self.after:
            self.fail(name)
        try:
            return call()
        finally:  # after it returned or raised
            if len(self.calls) == self.fail_at and self.after:
                self.fail(name)

    def install(self, setattr=setattr):
        def wrapped(name, real):
            return lambda *args, **kwargs: self.hit(name, lambda: real(*args, **kwargs))
        for name in WRAPPED:
            setattr(os, name, wrapped(f'os.{name}', getattr(os, name)))
        real_open, faults = builtins.open, self

        class Counted:  # a file whose writes are counted; everything else is the file's own
            def __init__(self, f):
                self.f = f

            def __getattr__(self, name):
                return getattr(self.f, name)

            def __enter__(self):
                return self

            def __iter__(self):
                return iter(self.f)

            def __exit__(self, *exc):
                return self.f.__exit__(*exc)

            def write(self, data):
                return faults.hit('write', lambda: self.f.write(data))
        setattr(builtins, 'open', lambda *args, **kwargs: Counted(self.hit('open', lambda: real_open(*args, **kwargs))))


def kill_self(name):
    os.kill(os.getpid(), signal.SIGKILL)


@pytest.fixture
def datasets(tmp_path):
    """An old dataset out/c (characters), and the inputs of a new one for each path: (old bytes, arguments by path)."""
    out = tmp_path / 'out'
    (tmp_path / 'old.txt').write_text(tiny_corpus(300, seed=3), encoding='utf-8')
    prepare.main([f'--input={tmp_path / "old.txt"}', f'--out_dir={out}', '--dataset=c'])
    (tmp_path / 'new.txt').write_text(tiny_corpus(500, seed=4), encoding='utf-8')
    (tmp_path / 'corpus').mkdir()
    with open(tmp_path / 'corpus' / 'a.jsonl', 'w', encoding='utf-8') as f:
        f.writelines(json.dumps({'text': sentence(k)}) + '\n' for k in range(400))
    args = {'one_file': [f'--input={tmp_path / "new.txt"}', f'--out_dir={out}', '--dataset=c'],
            'corpus': [f'--input={tmp_path / "corpus"}', f'--out_dir={out}', '--dataset=c', '--workers=1']}
    shutil.copytree(out, tmp_path / 'kept')
    return folder_bytes(out / 'c'), args


def restore(tmp_path):
    """out as the fixture left it: each run starts from the same state, so its k-th call is the recording's."""
    shutil.rmtree(tmp_path / 'out')
    shutil.copytree(tmp_path / 'kept', tmp_path / 'out')


def new_bytes(tmp_path, args):
    prepare.main(args)
    new = folder_bytes(tmp_path / 'out' / 'c')
    restore(tmp_path)
    return new


@pytest.mark.parametrize('path', ['one_file', 'corpus'])
def test_a_failure_at_any_write_or_rename_leaves_the_old_dataset_byte_for_byte(path, datasets, tmp_path,
                                                                                monkeypatch, capsys):
    held, args = datasets
    new = new_bytes(tmp_path, args[path])  # also: every lazy import done, so the runs below call alike
    recording = Faults()
    with monkeypatch.context() as patch:
        recording.install(patch.setattr)
        prepare.main(args[path])
    assert folder_bytes(tmp_path / 'out' / 'c') == new
    restore(tmp_path)
    kinds = set(recording.calls)
    assert {'write', 'open'} <= kinds, kinds
    # the call that puts the new dataset in place: the last rename (without one, there is no such moment)
    swap = max((k for k, name in enumerate(recording.calls, 1) if name in ('os.rename', 'os.replace')),
               default=len(recording.calls))
    for k in range(1, len(recording.calls) + 1):
        failure = FAILURES[k % len(FAILURES)]

        def fail(name):
            raise failure
        faults = Faults(k, fail)
        try:
            with monkeypatch.context() as patch:
                faults.install(patch.setattr)
                prepare.main(args[path])
            assert k > swap, k  # only a failure removing the old copy, once the new one is in place, is no error
        except (Exception, KeyboardInterrupt) as e:
            assert e is failure or isinstance(e, UserError), (k, e)
        assert faults.calls[:k] == recording.calls[:k]
        assert folder_bytes(tmp_path / 'out' / 'c') == (held if k <= swap else new), (k, faults.calls[k - 1])
        # what a failed cleanup left beside it, the next run removes (our own pid is no live writer then)
        remove_stale_temps(tmp_path / 'out' / 'c')
        assert os.listdir(tmp_path / 'out') == ['c'], k
        restore(tmp_path)
    assert {'os.fsync', 'os.rename'} <= kinds, kinds
    capsys.readouterr()
    print(f"\n{path}: {len(recording.calls)} calls made to fail in turn, the swap at call {swap}: {recording.calls}")


@pytest.fixture
def ctrl_c_raises():
    """SIGINT as a terminal has it, KeyboardInterrupt: a shell without job control (CI's, a background job) starts
    its children with it ignored."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


@pytest.mark.parametrize('path', ['one_file', 'corpus'])
def test_a_ctrl_c_just_after_any_call_leaves_the_old_dataset_or_the_new_one_and_still_stops_the_run(
        path, datasets, tmp_path, monkeypatch, ctrl_c_raises):
    """A Ctrl-C is a signal, not an error of a call: it lands once a call has returned, between two steps, where
    no failing call can. Sent just after each call in turn: out/c holds the old dataset byte for byte or the new
    one whole, never nothing (between the swap's two renames it waits for the second), and the run still ends."""
    held, args = datasets
    new = new_bytes(tmp_path, args[path])
    recording = Faults()
    with monkeypatch.context() as patch:
        recording.install(patch.setattr)
        prepare.main(args[path])
    restore(tmp_path)
    for k in range(1, len(recording.calls) + 1):
        ctrl_c_put_back(signal.default_int_handler)  # each run, once its dataset is in place, ignores Ctrl-C
        faults = Faults(k, lambda name: os.kill(os.getpid(), signal.SIGINT), after=True)
        with pytest.raises(KeyboardInterrupt), monkeypatch.context() as patch:
            faults.install(patch.setattr)
            prepare.main(args[path])
        assert folder_bytes(tmp_path / 'out' / 'c') in (held, new), (k, faults.calls[k - 1])
        assert os.listdir(tmp_path / 'out') == ['c'], (k, faults.calls[k - 1])  # no copy aside, no temporary
        restore(tmp_path)
    assert recording.calls.count('os.rename') >= 2, recording.calls  # the swap's two renames were among them


# prepare.py in forks of one launcher that has imported it and loaded GPT-2's BPE once: each fork is a process of
# its own, which a SIGKILL ends like `python prepare.py` (it makes no worker with --workers=1). A fresh interpreter
# for each of the ~40 runs cost ten times the runs themselves (0.6 s of CPU to start, 0.5 s to read the BPE files:
# reads, where a kill leaves what a kill at the first mkdir leaves). Every fork, the counting one too, starts from
# the launcher's same state, so its k-th call is the counting run's k-th.
PREPARE_LAUNCHER = f"""
import json, os, sys, traceback
sys.path.insert(0, {REPO_ROOT!r})
from tests.test_prepare_swap import Faults, kill_self
import prepare
from lib.command_line import run_cli
from lib.prepared_data import gpt2_encoding
gpt2_encoding()
for line in sys.stdin:
    fail_at, record, log, args = json.loads(line)
    pid = os.fork()
    if pid == 0:
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        sys.argv = ['prepare.py', *args]
        faults, code = Faults(fail_at, kill_self), 0
        faults.install()
        try:
            run_cli(prepare.main)
        except SystemExit as e:  # what the interpreter would make of it
            code = 0 if e.code is None else e.code if isinstance(e.code, int) else 1
        except BaseException:
            traceback.print_exc()
            code = 1
        finally:
            calls = json.dumps(faults.calls)
            open(record, 'w').write(calls)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    print(os.waitstatus_to_exitcode(status), flush=True)
"""


def prepare_launcher(tmp_path):
    """The launcher, and run(args, fail_at=0, record=os.devnull): prepare.py ARGS in a fork of it, SIGKILLing itself
    at its fail_at-th counted call (Faults), its calls listed in record; returns (exit code, what it printed)."""
    launcher = subprocess.Popen([sys.executable, '-c', PREPARE_LAUNCHER], cwd=REPO_ROOT, env=ENV,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    log = str(tmp_path / 'fork.log')

    def run(args, fail_at=0, record=os.devnull):
        launcher.stdin.write(json.dumps([fail_at, str(record), log, args]) + '\n')
        launcher.stdin.flush()
        code = int(launcher.stdout.readline())
        with open(log, encoding='utf-8', errors='replace') as f:
            return code, f.read()
    return launcher, run


def children(pid):
    """The pids whose parent is pid, read from /proc."""
    found = []
    for entry in os.listdir('/proc'):
        try:
            with open(f'/proc/{entry}/stat') as f:
                if entry.isdigit() and int(f.read().rsplit(')', 1)[1].split()[1]) == pid:
                    found.append(int(entry))
        except (OSError, ValueError, IndexError):
            continue
    return found


def alive(pid):
    try:
        with open(f'/proc/{pid}/stat') as f:
            return f.read().rsplit(')', 1)[1].split()[0] != 'Z'  # a zombie has ended; its parent has yet to reap it
    except OSError:
        return False


def kill_all(pids):
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.mark.slow
@pytest.mark.skipif(not os.path.isdir('/proc'), reason='finds the workers in /proc')
def test_sigkill_at_every_write_or_rename_of_a_corpus_leaves_the_old_dataset_or_the_new_one_whole(datasets,
                                                                                                  tmp_path):
    held, args = datasets
    new = new_bytes(tmp_path, args['corpus'])
    launcher, run = prepare_launcher(tmp_path)
    try:
        code, printed = run(args['corpus'], record=tmp_path / 'calls.json')
        assert code == 0 and folder_bytes(tmp_path / 'out' / 'c') == new, printed
        restore(tmp_path)
        calls = json.loads((tmp_path / 'calls.json').read_text())
        between = 0
        for k in range(1, len(calls) + 1):
            code, printed = run(args['corpus'], k)
            assert code == -signal.SIGKILL, (k, printed)
            killed = tmp_path / f'killed{k}'
            shutil.copytree(tmp_path / 'out', killed, symlinks=True)
            if not (tmp_path / 'out' / 'c').exists():  # killed between the two renames: the old folder is set aside
                between += 1
                assert load_meta(tmp_path / 'out' / 'c') and folder_bytes(tmp_path / 'out' / 'c') == held
            # a reader undoes a half swap, else sees the old or the new dataset
            load_meta(tmp_path / 'out' / 'c')
            assert folder_bytes(tmp_path / 'out' / 'c') in (held, new), k
            shutil.rmtree(tmp_path / 'out')
            os.rename(killed, tmp_path / 'out')  # and the next run cleans up and finishes the job
            prepare.main(args['corpus'])
            assert folder_bytes(tmp_path / 'out' / 'c') == new and os.listdir(tmp_path / 'out') == ['c'], k
            restore(tmp_path)
    finally:
        launcher.stdin.close()
        launcher.wait(timeout=60)
    assert between == 1
    print(f"\ncorpus: SIGKILL at each of {len(calls)} calls: {calls}")


@pytest.mark.slow
@pytest.mark.skipif(not os.path.isdir('/proc'), reason='finds the workers in /proc')
def test_sigkill_of_a_streamed_corpus_at_moments_in_time_leaves_the_old_dataset_or_the_new_one_whole(tmp_path):
    big, out = big_corpus(tmp_path)  # and out/c, a small dataset it is to replace
    shutil.copytree(out, tmp_path / 'kept')
    args = [sys.executable, 'prepare.py', f'--input={big}', f'--out_dir={out}', '--dataset=c', '--workers=2']
    started = time.monotonic()
    finished = subprocess.run(args, cwd=REPO_ROOT, env=ENV, capture_output=True, text=True, timeout=300)
    whole = time.monotonic() - started  # the moments below are shares of it: the same phases on any machine
    assert finished.returncode == 0, finished.stderr
    held, new, states = folder_bytes(tmp_path / 'kept' / 'c'), folder_bytes(out / 'c'), []
    for share in (0.05, 0.2, 0.4, 0.6, 0.8, 0.95, 1.1):
        restore(tmp_path)
        process = subprocess.Popen(args, cwd=REPO_ROOT, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(share * whole)
        workers = children(process.pid)
        process.kill()
        process.wait()
        deadline = time.monotonic() + 10
        while (left := [pid for pid in workers if alive(pid)]) and time.monotonic() < deadline:
            time.sleep(0.1)
        kill_all(left)
        assert not left, share  # the workers end with it (corpus.follow), not wait on its queue forever
        between = not (out / 'c').exists()
        load_meta(out / 'c')  # and a reader undoes a half swap
        state = folder_bytes(out / 'c')
        assert state in (held, new), share
        states.append(f"{share * whole:.1f} s: {'between the renames, ' * between}{'old' if state == held else 'new'}")
        if share == 0.4:  # the next run cleans up and finishes the job
            assert subprocess.run(args, cwd=REPO_ROOT, env=ENV, capture_output=True, timeout=300).returncode == 0
            assert folder_bytes(out / 'c') == new and os.listdir(out) == ['c']
    print(f"\nSIGKILL of a streamed corpus (a whole run: {whole:.1f} s): {states}")


def big_corpus(tmp_path, n_lines=28_000, copies=3):
    """Some MB of documents made here (a user has no ../shared): some seconds of tokenizing with two workers at the
    defaults; and beside it out/c, a small dataset prepared to be replaced."""
    lines = tiny_corpus(n_lines).splitlines()
    paragraphs = ['\n'.join(lines[k:k + 8]) for k in range(0, len(lines), 8)]  # tiny shakespeare's size and shape
    (tmp_path / 'big').mkdir()
    with open(tmp_path / 'big' / 'a.jsonl', 'w', encoding='utf-8') as f:
        f.writelines(json.dumps({'text': p}) + '\n' for p in paragraphs * copies)
    out = tmp_path / 'out'
    (tmp_path / 'old.txt').write_text(tiny_corpus(300, seed=3), encoding='utf-8')
    prepare.main([f'--input={tmp_path / "old.txt"}', f'--out_dir={out}', '--dataset=c'])
    return tmp_path / 'big', out


@pytest.mark.parametrize('held', ['the input itself', 'a checkpoint'])
def test_a_folder_that_holds_anything_but_a_dataset_is_never_replaced(held, tmp_path):
    """The swap replaces a folder whole, so it replaces only a prepared dataset's: a --dataset whose folder holds the
    input text (its name is the file's by default) or a run's checkpoint is one line, and every byte stays."""
    folder = tmp_path / 'book'
    folder.mkdir()
    text = folder / 'book.txt'
    text.write_text(tiny_corpus(300), encoding='utf-8')
    if held == 'a checkpoint':
        (folder / 'ckpt.pt').write_bytes(b'weights')
        text = tmp_path / 'book.txt'
        text.write_text(tiny_corpus(300), encoding='utf-8')
    before = folder_bytes(folder)
    with pytest.raises(UserError, match=r'book holds .*book\.txt|book holds .*ckpt\.pt'):
        prepare.main([f'--input={text}', f'--out_dir={tmp_path}'])
    assert folder_bytes(folder) == before


def test_a_reader_deletes_no_writers_temporary_folder(tmp_path):
    """A pid is alive only in its own PID namespace: a reader in another (a container, a node sharing the storage)
    sees a live writer's pid as dead. Reading a dataset therefore deletes nothing; the next prepare.py, a writer of
    that name, removes what dead writers left."""
    text = tmp_path / 'book.txt'
    text.write_text(tiny_corpus(300), encoding='utf-8')
    prepare.main([f'--input={text}', f'--out_dir={tmp_path}', '--dataset=b'])
    busy = tmp_path / '.b.tmp-4194303'  # above any pid_max: dead here, maybe alive in another namespace
    busy.mkdir()
    (busy / 'train.bin').write_bytes(b'half written')
    load_meta(str(tmp_path / 'b'))
    assert (busy / 'train.bin').read_bytes() == b'half written'
    prepare.main([f'--input={text}', f'--out_dir={tmp_path}', '--dataset=b'])
    assert not busy.exists()


def test_a_meta_json_nested_deeper_than_json_reads_is_one_line(tmp_path):
    folder = tmp_path / 'deep'
    folder.mkdir()
    (folder / 'meta.json').write_text('[' * 100_000 + ']' * 100_000)
    with pytest.raises(UserError, match='meta.json'):
        load_meta(str(folder))


def test_a_path_in_bytes_that_are_not_utf8_is_printed_escaped_under_a_strict_utf8_stdout(tmp_path):
    """A Latin-1 folder name, printed where stdout is strict UTF-8 (PYTHONIOENCODING=utf-8, an en_US.UTF-8 locale),
    ends the 'wrote' line in a UnicodeEncodeError after the dataset is written unless run_cli escapes it."""
    text = tmp_path / 'book.txt'
    text.write_text(tiny_corpus(300), encoding='utf-8')
    out = os.path.join(os.fsencode(tmp_path), b'caf\xe9')
    result = subprocess.run([sys.executable, 'prepare.py', f'--input={text}', b'--out_dir=' + out], cwd=REPO_ROOT,
                            env=dict(ENV, PYTHONIOENCODING='utf-8'), capture_output=True, timeout=120)
    assert result.returncode == 0 and b'Traceback' not in result.stderr, result.stderr[-500:]
    assert b'caf\\udce9' in result.stdout or b'caf\\xe9' in result.stdout
