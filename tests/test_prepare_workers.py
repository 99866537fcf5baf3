"""prepare.py's tokenizing workers, however one ends (the OOM killer's SIGKILL mid-chunk, between two chunks,
mid-read of a chunk or mid-write of its result; stopped while another dies; a SIGTERM, an exit): one line that
names the worker and how it ended, within seconds, no worker left, and the old dataset byte for byte. A terminal's
Ctrl-C, which reaches the workers too, is prepare.py's alone to answer."""

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

import prepare
from lib.command_line import UserError
from tests.conftest import ENV, REPO_ROOT, sigint_as_a_terminal_sends_it, tiny_corpus
from tests.test_corpus import folder_bytes, sentence
from tests.test_prepare_swap import alive, big_corpus, children, kill_all

pytestmark = pytest.mark.usefixtures('gpt2_files')


@pytest.mark.slow
@pytest.mark.skipif(not os.path.isdir('/proc'), reason='finds the workers in /proc')
def test_a_worker_killed_midway_is_one_line_within_seconds_and_the_old_dataset_stays(tmp_path):
    big, out = big_corpus(tmp_path)  # and out/c, a small dataset it is to replace
    held = folder_bytes(out / 'c')
    process = subprocess.Popen([sys.executable, 'prepare.py', f'--input={big}', f'--out_dir={out}', '--dataset=c',
                                '--workers=2'], cwd=REPO_ROOT, env=ENV, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    growing = out / f'.c.tmp-{process.pid}' / 'train.bin'
    deadline = time.monotonic() + 60
    while not (growing.exists() and growing.stat().st_size) and process.poll() is None:  # streaming, mid-corpus
        assert time.monotonic() < deadline
        time.sleep(0.01)
    workers = [pid for pid in children(process.pid) if b'spawn_main' in open(f'/proc/{pid}/cmdline', 'rb').read()]
    assert workers and process.poll() is None
    os.kill(workers[0], signal.SIGKILL)
    killed = time.monotonic()
    try:
        _, stderr = process.communicate(timeout=30)
    finally:  # a Pool's replacement worker would outlive it
        kill_all(children(process.pid) + workers + [process.pid])
    assert time.monotonic() - killed < 15
    assert process.returncode == 2 and stderr.splitlines() == [stderr.strip()], stderr
    assert stderr.startswith(f'error: tokenizing stopped: worker process {workers[0]} was killed by SIGKILL, most '
                             f'likely by the out-of-memory killer: each worker holds'), stderr
    assert folder_bytes(out / 'c') == held and os.listdir(out) == ['c']


def test_a_worker_death_the_executor_misses_still_ends_the_wait_in_seconds():
    """The executor can miss a worker's death (one killed while it holds the task queue's lock) and leave its future
    pending forever: corpus.result watches the workers itself. A future that never completes beside a worker the
    OOM killer took is one line naming it within seconds, not a hang."""
    import concurrent.futures
    import types
    from lib import corpus
    killed = types.SimpleNamespace(pid=4242, exitcode=-signal.SIGKILL)
    alive = types.SimpleNamespace(pid=4243, exitcode=None)
    pool = types.SimpleNamespace(_processes={alive.pid: alive, killed.pid: killed})
    started = time.monotonic()
    with pytest.raises(UserError, match=r'^tokenizing stopped: worker process 4242 was killed by SIGKILL, most likely '
                                        r'by the out-of-memory killer'):
        corpus.result(concurrent.futures.Future(), pool)
    assert time.monotonic() - started < 5
    done = concurrent.futures.Future()
    done.set_result('ids')
    pool._processes = {alive.pid: alive}  # every worker alive: the wait is the chunk's, however long
    assert corpus.result(done, pool) == 'ids'


@pytest.mark.parametrize('kill_before', [2, 6], ids=['before-any-write', 'after-writes'])
def test_a_worker_killed_before_a_chunk_is_handed_out_is_the_same_one_line(kill_before, tmp_path, monkeypatch):
    """A worker the OOM killer takes between two chunks: the pool refuses the next chunk at once (submit raises, not
    a future), at a moment the in-flight kill above reaches only by chance. Here the kill is placed just before the
    kill_before-th chunk is handed out: before the writer has a chunk's ids, and after it has written some (it keeps
    at most 2 chunks a worker, here 4, waiting)."""
    import concurrent.futures
    big, out = big_corpus(tmp_path, n_lines=4_000, copies=1)  # 500 documents: 8 chunks
    held = folder_bytes(out / 'c')
    real_submit, handed, victims, refusals = concurrent.futures.ProcessPoolExecutor.submit, [0], [], []

    def submit_after_a_kill(pool, *args):
        handed[0] += 1
        if handed[0] == kill_before:
            victims.append(next(iter(pool._processes.values())).pid)
            os.kill(victims[0], signal.SIGKILL)
            deadline = time.monotonic() + 30
            while not pool._broken:  # the executor's own thread sees the death and breaks the pool
                assert time.monotonic() < deadline
                time.sleep(0.01)
        try:
            return real_submit(pool, *args)
        except concurrent.futures.process.BrokenProcessPool:
            refusals.append(handed[0])
            raise
    monkeypatch.setattr(concurrent.futures.ProcessPoolExecutor, 'submit', submit_after_a_kill)
    with pytest.raises(UserError) as refused:
        prepare.main([f'--input={big}', f'--out_dir={out}', '--dataset=c', '--workers=2', '--progress=false'])
    assert str(refused.value).startswith(f'tokenizing stopped: worker process {victims[0]} was killed by SIGKILL, '
                                         f'most likely by the out-of-memory killer')
    assert refusals[0] == kill_before  # the pool refused the chunk after the kill: the path this test is for
    assert folder_bytes(out / 'c') == held and os.listdir(out) == ['c']


# prepare.py whose tokenizing workers end at a point of their work, planted in each worker: spawn runs this file in
# every worker, under the name __mp_main__, before its first task. The first worker there does it and writes its
# pid beside; with `stopped`, the first stops itself (SIGSTOP, as a Ctrl-Z to it alone) and the next one is killed.
FAULTY_WORKERS = f"""
import json, os, signal, sys
from multiprocessing import connection
sys.path.insert(0, {REPO_ROOT!r})
POINT, HOW, MARKS = json.loads(os.environ['PLANTED'])  # the workers' argv is prepare.py's

def first(role):
    try:
        fd = os.open(os.path.join(MARKS, role), os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    except FileExistsError:
        return False
    os.write(fd, str(os.getpid()).encode())
    return True

class Unsendable(Exception):  # as an error whose pickling fails on the way back
    def __reduce__(self):
        raise TypeError('cannot pickle Unsendable')

class PanicException(BaseException):  # as the tokenizer's Rust panic: not an Exception
    pass

def end():
    if HOW == 'stopped' and first('stopped'):
        os.kill(os.getpid(), signal.SIGSTOP)
    elif HOW.startswith('raises') and first('ended'):
        raised = dict(PanicException=PanicException('planted'), SystemExit=SystemExit(3),
                      KeyboardInterrupt=KeyboardInterrupt('planted'))
        raise raised.get(HOW.removeprefix('raises-'), Unsendable())
    elif first('ended'):
        os._exit(0) if HOW == 'exit-0' else os.kill(os.getpid(), getattr(signal, HOW.replace('stopped', 'SIGKILL')))
        __import__('time').sleep(5)

if __name__ == '__mp_main__':
    from lib import corpus
    send, recv, encode = connection.Connection._send, connection.Connection._recv, corpus.encode_chunk
    def half_sent(self, buf, *args):  # a result: half of it in the pipe
        if POINT == 'writing-its-result' and len(buf) > 4096:
            send(self, buf[:len(buf) // 2])
            end()
        return send(self, buf, *args)
    def half_read(self, size, *args):  # a chunk: half of it out of the pipe
        if POINT == 'reading-a-chunk' and size > 4096:
            recv(self, size // 2)
            end()
        return recv(self, size, *args)
    def tokenizing(chunk):
        if POINT == 'tokenizing':
            end()
        return encode(chunk)
    connection.Connection._send, connection.Connection._recv, corpus.encode_chunk = half_sent, half_read, tokenizing

if __name__ == '__main__':
    import prepare
    from lib.command_line import run_cli
    sys.argv = ['prepare.py', *sys.argv[1:]]
    run_cli(prepare.main)
"""


@pytest.mark.slow
@pytest.mark.skipif(not os.path.isdir('/proc'), reason='finds the workers in /proc')
@pytest.mark.parametrize('point, how, named', [
    ('reading-a-chunk', 'SIGKILL', 'was killed by SIGKILL, most likely by the out-of-memory killer'),
    ('writing-its-result', 'SIGKILL', 'was killed by SIGKILL, most likely by the out-of-memory killer'),
    ('tokenizing', 'stopped', 'was killed by SIGKILL, most likely by the out-of-memory killer'),
    ('tokenizing', 'SIGTERM', 'was killed by SIGTERM'),
    ('tokenizing', 'exit-0', 'exited with code 0'),
    ('tokenizing', 'raises-PanicException', 'failed with PanicException: planted'),
    ('tokenizing', 'raises-Unsendable', "failed with TypeError: cannot pickle Unsendable"),
    ('tokenizing', 'raises-SystemExit', 'failed with SystemExit: 3'),  # not this process's exit
    ('tokenizing', 'raises-KeyboardInterrupt', 'failed with KeyboardInterrupt: planted')])  # nor its Ctrl-C
def test_a_worker_ending_at_any_point_of_its_work_is_one_line_that_names_it_and_prepare_ends(point, how, named,
                                                                                             tmp_path):
    """However a worker ends, mid-read of a chunk, mid-write of a result (the executor's reader then waits on half
    a message), stopped while another is killed (a SIGTERM never reaches a stopped process), or failing with an
    error of its own (one that does not pickle back too), prepare.py prints one line naming that worker (or, for an
    error, which a future brings without a pid, what it was) and how it ended, exits within seconds, and leaves no
    worker and the old dataset."""
    (tmp_path / 'big').mkdir()  # chunks of 64 documents of ~3.5 KB: larger than a pipe holds, so a write of one blocks
    with open(tmp_path / 'big' / 'a.jsonl', 'w', encoding='utf-8') as f:
        f.writelines(json.dumps({'text': ' '.join([sentence(k)] * 40)}) + '\n' for k in range(600))
    out, marks = tmp_path / 'out', tmp_path / 'marks'
    (tmp_path / 'old.txt').write_text(tiny_corpus(300, seed=3), encoding='utf-8')
    prepare.main([f'--input={tmp_path / "old.txt"}', f'--out_dir={out}', '--dataset=c'])
    held = folder_bytes(out / 'c')
    marks.mkdir()
    (tmp_path / 'faulty.py').write_text(FAULTY_WORKERS, encoding='utf-8')
    process = subprocess.Popen([sys.executable, str(tmp_path / 'faulty.py'), f'--input={tmp_path / "big"}',
                                f'--out_dir={out}', '--dataset=c', '--workers=2', '--progress=false'], cwd=REPO_ROOT,
                               env=dict(ENV, PLANTED=json.dumps([point, how, str(marks)])),
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        _, stderr = process.communicate(timeout=60)
        left = [pid for pid in children(process.pid) if alive(pid)]
    finally:
        kill_all(children(process.pid) + [int((marks / m).read_text() or 0) for m in os.listdir(marks)]
                 + [process.pid])
    assert process.returncode == 2 and stderr.splitlines() == [stderr.strip()], stderr
    victim = (marks / 'ended').read_text()
    # the executor SIGTERMs the other worker too: which SIGTERM came first, the exit codes cannot tell
    who = (rf'(worker process {victim}|one of worker processes (\d+, )*{victim}(, \d+)*)' if how == 'SIGTERM' else
           'a worker process' if how.startswith('raises') else f'worker process {victim}')  # a future names none
    assert re.fullmatch(rf'error: tokenizing stopped: {who} {named}: each worker holds .*\n', stderr), stderr
    assert not left and folder_bytes(out / 'c') == held and os.listdir(out) == ['c']


@pytest.mark.slow
@pytest.mark.skipif(not os.path.isdir('/proc'), reason='finds the workers in /proc')
def test_a_terminals_ctrl_c_as_the_workers_start_is_answered_by_prepare_alone(tmp_path):
    """A terminal sends Ctrl-C to every process of the job, the workers too: here the moment the first one is
    mid-import, where its own KeyboardInterrupt would print a traceback. prepare.py alone answers ('interrupted',
    exit 130), no worker is left, and the old dataset stays."""
    big, out = big_corpus(tmp_path, n_lines=4_000, copies=1)
    held = folder_bytes(out / 'c')
    process = subprocess.Popen([sys.executable, 'prepare.py', f'--input={big}', f'--out_dir={out}', '--dataset=c',
                                '--workers=2', '--progress=false'], cwd=REPO_ROOT, env=ENV, start_new_session=True,
                               preexec_fn=sigint_as_a_terminal_sends_it, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    deadline, workers = time.monotonic() + 60, []
    try:
        while not (workers := [pid for pid in children(process.pid) if b'spawn_main' in read(pid, 'cmdline')
                               and b'numpy' in read(pid, 'maps')]):  # past Python's start, in its imports
            assert process.poll() is None and time.monotonic() < deadline, process.returncode
            time.sleep(0.002)
        os.killpg(process.pid, signal.SIGINT)  # the job: prepare.py leads its own process group
        _, stderr = process.communicate(timeout=30)
        left = [pid for pid in children(process.pid) + workers if alive(pid)]
    finally:
        kill_all(children(process.pid) + workers + [process.pid])
    assert process.returncode == 130 and stderr == 'interrupted\n', stderr
    assert not left and folder_bytes(out / 'c') == held and os.listdir(out) == ['c']


def read(pid, name):
    try:
        with open(f'/proc/{pid}/{name}', 'rb') as f:
            return f.read()
    except OSError:  # ended meanwhile
        return b''


def test_ctrl_c_pressed_on_as_a_finished_prepare_exits_changes_nothing(tmp_path):
    """The dataset written and said, Ctrl-C every few milliseconds until the process is gone: exit code 0, the
    output as it was, nothing of Python's (its executor's exit join raised KeyboardInterrupt: 'Exception ignored')."""
    (tmp_path / 'corpus').mkdir()
    with open(tmp_path / 'corpus' / 'a.jsonl', 'w', encoding='utf-8') as f:
        f.writelines(json.dumps({'text': sentence(k)}) + '\n' for k in range(400))
    process = subprocess.Popen([sys.executable, 'prepare.py', f'--input={tmp_path / "corpus"}',
                                f'--out_dir={tmp_path / "out"}', '--dataset=c', '--workers=2', '--progress=false'],
                               cwd=REPO_ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               preexec_fn=sigint_as_a_terminal_sends_it)
    try:
        said = [process.stdout.readline()]
        while said[-1] and not said[-1].startswith('wrote'):
            said.append(process.stdout.readline())
        landed = 0
        while process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGINT)
                landed += 1
            time.sleep(0.002)
        said.append(process.stdout.read())
        stderr = process.stderr.read()
    finally:
        kill_all(children(process.pid) + [process.pid])
    assert said[-2].startswith('wrote') and landed, (said, landed)
    assert process.returncode == 0 and stderr == '', (process.returncode, stderr)
