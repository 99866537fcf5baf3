"""Many training runs side by side: worker processes with a share of the CPU threads each, a claim on
every run folder so that no two processes ever train the same run, a log and a bar, and Ctrl-C and
failed runs handled run by run.

The caller (ablate.py) gives a function run_fn(payload, progress) that trains one claimed run and
returns a dict with at least 'line' (what to print when it ends); it must be a module-level function
so that a worker process can import it. Nothing here knows what a run computes."""

import contextlib
import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import threading
import time
import traceback
from dataclasses import dataclass

from lib.command_line import UserError, ctrl_c_once, ending, put_back, sigint_blocked
from lib.progress import on_terminal, say

try:
    import fcntl
except ImportError:  # not POSIX: no claims (two commands on one out_dir are then the user's to avoid)
    fcntl = None


CLAIM_FILE = '.claim'       # in the run folder: locked (flock) by the process that trains the run, holds its pid
LOG_FILE = 'train.log'      # in the run folder: what the run printed, appended to by every process that trains it
RETRY_S = 1.0               # how often a run claimed by another process is tried again
PROGRESS_LINE_EVERY_S = 60  # not on a terminal: how often GridBar writes a line on the grid's progress
PROGRESS_EVERY_S = 0.2      # a worker reports its iterations at most this often


def duration(seconds):
    seconds = int(seconds)
    return f"{seconds // 3600}h{seconds // 60 % 60:02d}m" if seconds >= 3600 else f"{seconds // 60}m{seconds % 60:02d}s"


class GridBar:
    """ablate.py's progress over a grid: runs done of all, iterations done of all, elapsed and time left. On a
    terminal one bar (tqdm's estimate from the rate of all runs together), which lines printed through it leave
    whole; elsewhere the lines alone, and every PROGRESS_LINE_EVERY_S one on the grid's progress."""

    def __init__(self, runs_total, runs_done, iters_total, iters_done, enabled):
        from tqdm import tqdm
        self.lines = enabled and not on_terminal()
        self.bar = tqdm(total=iters_total, initial=iters_done, disable=not enabled or self.lines, dynamic_ncols=True,
                        unit='it', smoothing=0.05, desc=f"runs {runs_done}/{runs_total}")
        self.runs_total, self.runs_done, self.running = runs_total, runs_done, 0
        self.iters_total, self.iters_done, self.iters_at_start = iters_total, iters_done, iters_done
        self.started = self.last_line = time.monotonic()
        # The command's stdout as it is now: with --jobs=1 a run trains in this process with sys.stdout sent to its
        # train.log, and the grid's lines written meanwhile belong on the console, not in the run's log.
        self.out = sys.stdout

    def describe(self, running=None):
        self.running = self.running if running is None else running
        more = f", {self.running} running" if self.running else ""
        self.bar.set_description(f"runs {self.runs_done}/{self.runs_total}{more}")  # and redraws the bar

    def update(self, n=1):
        self.bar.update(n)
        self.iters_done += n
        if self.lines and time.monotonic() - self.last_line >= PROGRESS_LINE_EVERY_S:
            self.progress_line()

    def progress_line(self):
        """runs and iterations done, elapsed and (from the rate of this command's iterations) time left."""
        self.last_line = now = time.monotonic()
        rate = (self.iters_done - self.iters_at_start) / max(now - self.started, 1e-9)
        left = f", about {duration((self.iters_total - self.iters_done) / rate)} left" if rate > 0 else ""
        running = f", {self.running} running" if self.running else ""
        self.write(f"grid: {self.runs_done}/{self.runs_total} runs done{running}, {self.iters_done:,}/"
                   f"{self.iters_total:,} iterations ({100 * self.iters_done / max(1, self.iters_total):.0f} %), "
                   f"{duration(now - self.started)} elapsed{left}")

    def run_ended(self):
        self.runs_done += 1
        self.describe()

    def write(self, line):
        if self.lines:
            print(line, file=self.out, flush=True)
        else:
            self.bar.write(line, file=self.out)

    def close(self):
        self.bar.close()


@dataclass
class Task:
    label: str              # how messages name the run, e.g. 'tied seed 1337'
    run_dir: str
    iters: int              # the run's iterations in all, for the bar
    done_iters: int         # those already done (a checkpoint to resume from), counted by the bar from the start
    group: str = ''         # runs of one group have one shape: a worker keeps to one group where it can (torch.compile)
    payload: object = None  # what run_fn gets


def usable_cores():
    """The CPU cores this process may run on (a container's or taskset's limit, not the machine's count)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else os.cpu_count() or 1  # macOS, Windows


# ---------------------------------------------------------------- one run: its claim and its log

class Busy(Exception):
    """The run is claimed by another process: the exception's argument is its pid."""


class Claim:
    """This process's exclusive right to write run_dir: an flock on run_dir/CLAIM_FILE. The kernel drops it
    when the process ends, however it ends, so a killed trainer never leaves a run claimed."""

    def __init__(self, run_dir):
        os.makedirs(run_dir, exist_ok=True)
        self.fd = os.open(os.path.join(run_dir, CLAIM_FILE), os.O_RDWR | os.O_CREAT, 0o644)
        if fcntl is None:
            return
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = os.read(self.fd, 32).decode(errors='replace').strip() or '?'
            os.close(self.fd)
            raise Busy(owner) from None
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, f"{os.getpid()}\n".encode(), 0)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        os.close(self.fd)  # closing the last descriptor releases the lock


@contextlib.contextmanager
def output_to(path, whole_process):
    """Send this process's output to the log at path (appended) inside the block. whole_process: the
    descriptors 1 and 2 themselves, so that C code and child processes are caught too (a worker);
    else Python's sys.stdout and sys.stderr only, so that a bar drawn on the terminal stays there."""
    sys.stdout.flush()
    sys.stderr.flush()
    with open(path, 'a', buffering=1, encoding='utf-8', errors='replace') as log:
        if not whole_process:
            with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
                yield
            return
        saved = [os.dup(1), os.dup(2)]
        try:
            os.dup2(log.fileno(), 1)
            os.dup2(log.fileno(), 2)
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            for fd, old in zip((1, 2), saved):
                os.dup2(old, fd)
                os.close(old)


def last_line(path):
    """The log's last non-empty line: for a failed run, the error or the exception of its traceback."""
    try:
        with open(path, 'rb') as f:
            f.seek(max(0, os.path.getsize(path) - 4096))
            lines = [line.strip() for line in f.read().decode(errors='replace').splitlines() if line.strip()]
    except OSError:
        return '(no log)'
    return lines[-1][:300] if lines else '(empty log)'


def train_claimed(task, run_fn, progress, whole_process):
    """Claim the run and train it, its output in the run's log: ('busy', the pid of the process that holds it), ('done',
    outcome) or ('failed', why: the log's last line); a KeyboardInterrupt (Ctrl-C) is noted in the log and raised."""
    try:
        claim = Claim(task.run_dir)
    except Busy as e:
        return 'busy', e.args[0]
    except OSError as e:  # no folder can be made there (a file in the way, no permission)
        return 'failed', f"cannot claim {task.run_dir}: {e.strerror or e}"
    log, ended = os.path.join(task.run_dir, LOG_FILE), None
    with claim:
        with output_to(log, whole_process):
            try:
                ended = 'done', run_fn(task.payload, progress)
            except KeyboardInterrupt as e:
                print(str(e) or 'interrupted', file=sys.stderr)
                raise
            except UserError as e:
                print("error: " + " ".join(str(e).split()), file=sys.stderr)
            except Exception:
                traceback.print_exc()
        ended = ended or ('failed', last_line(log))  # read while the run is still ours: no other writer's line yet
    if ended[0] == 'done':
        progress.finish()  # outside the log: with --jobs=1, a line the bar prints is this command's
    return ended


# ---------------------------------------------------------------- a run's share of the grid's bar, and the queue

class RunProgress:
    """The bar a run trains with: one run's share of the grid's bar (in a worker, of ToParent), told where a resumed run
    really starts (the bar counted the checkpoint that planning saw, and another process may have moved it on since)."""

    def __init__(self, bar, task):
        self.bar, self.task, self.counted = bar, task, 0

    def begin(self, start_iter):
        self.update(start_iter - self.task.done_iters)

    def update(self, n=1):
        self.counted += n
        self.bar.update(n)

    def finish(self):
        """Count the whole run, whatever was reported (a run found finished by another process reports nothing)."""
        self.update(self.task.iters - self.task.done_iters - self.counted)

    def set_postfix(self, *args, **kwargs):
        pass


class Grid:
    """What the process that holds the bar knows of the grid: the runs to train, each with the moment from which
    it may be tried, and the runs it has said are claimed elsewhere."""

    def __init__(self, tasks, bar, on_done, on_failed):
        self.queue = [(task, 0.0) for task in tasks]  # (task, not before)
        self.bar, self.on_done, self.on_failed, self.told = bar, on_done, on_failed, set()

    def due(self):
        now = time.monotonic()
        return [entry for entry in self.queue if entry[1] <= now]

    def ended(self, task, kind, value):
        """A try at a run ended as train_claimed says: one claimed elsewhere goes to the back of the queue."""
        if kind == 'busy':
            self.queue.append((task, time.monotonic() + RETRY_S))
            if task.label not in self.told:
                self.told.add(task.label)
                say(self.bar, f"{task.label}: claimed by process {value}, which is training it; waiting for it")
            return
        (self.on_done if kind == 'done' else self.on_failed)(task, value)
        getattr(self.bar, 'run_ended', lambda: None)()


# ---------------------------------------------------------------- in this process, one run after another

def run_here(tasks, run_fn, bar, on_done, on_failed):
    """Train tasks one after another in this process, with its torch threads (bar: a GridBar, or anything
    with update()). A run claimed by another process goes to the back of the queue until it is free (then
    run_fn finds it finished, or resumes it). Ctrl-C: train.py's own handling saves the current run, and
    the KeyboardInterrupt is raised from here."""
    grid = Grid(tasks, bar, on_done, on_failed)
    while grid.queue:
        if not (due := grid.due()):
            time.sleep(RETRY_S)
            continue
        grid.queue.remove(due[0])
        task = due[0][0]
        grid.ended(task, *train_claimed(task, run_fn, RunProgress(bar, task), whole_process=False))


# ---------------------------------------------------------------- in worker processes, side by side

class ToParent:
    """A worker's end of the pipe, which is also the grid's bar for its runs: their iterations go to the parent's
    bar a few times a second, and always before the next message."""

    def __init__(self, conn):
        self.conn, self.pending, self.sent = conn, 0, time.monotonic()

    def update(self, n=1):
        self.pending += n
        if time.monotonic() - self.sent >= PROGRESS_EVERY_S:
            self.flush()

    def flush(self):
        if self.pending:
            # A parent that is gone (killed) breaks the pipe: the run stops here, its last checkpoint kept.
            self.conn.send(('progress', self.pending))
            self.pending, self.sent = 0, time.monotonic()

    def send(self, message):
        self.flush()
        self.conn.send(message)


def worker_main(conn, threads, run_fn):
    """A worker process: claims and trains the runs the parent sends, one at a time, until it gets None."""
    # A session of its own: the terminal's Ctrl-C reaches the parent alone, which passes it on once (twice
    # means "stop at once", as in train.py). SIGINT was blocked while this process started.
    with contextlib.suppress(OSError, AttributeError):
        os.setsid()
    parent = ToParent(conn)
    ctrl_c_once()  # the parent passes a Ctrl-C on at most twice; the first one ends the worker's work either way
    try:
        if hasattr(signal, 'pthread_sigmask'):
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # a Ctrl-C that came meanwhile lands here
        import torch
        torch.set_num_threads(threads)
        parent.send(('ready', os.getpid()))
        while (task := conn.recv()) is not None:
            parent.send(train_claimed(task, run_fn, RunProgress(parent, task), whole_process=True))
    except KeyboardInterrupt as e:
        with contextlib.suppress(OSError):
            parent.send(('interrupted', str(e) or 'interrupted'))
    except (EOFError, OSError):
        pass  # the parent is gone
    finally:
        ending()  # the process's exit follows; a Ctrl-C the parent passes on now would only interrupt it


class Worker:
    """The parent's side of one worker process."""

    def __init__(self, context, threads, run_fn, gpu=None):
        self.conn, child = context.Pipe()
        self.pid = self.task = None
        self.groups, self.gpu = set(), gpu
        # torch's thread pool (and inductor's compile pool) is sized from the environment at its import: the
        # worker starts with these two set, and this process's environment is put back as it was.
        # A GPU of its own (CUDA reads CUDA_VISIBLE_DEVICES once, when the worker first touches it): cuda is then it.
        sized = ('OMP_NUM_THREADS', 'TORCHINDUCTOR_COMPILE_THREADS') + (('CUDA_VISIBLE_DEVICES',) if gpu else ())
        saved = {key: os.environ.get(key) for key in sized}
        os.environ.update({key: str(threads) for key in sized[:2]}, **({'CUDA_VISIBLE_DEVICES': gpu} if gpu else {}))
        try:
            with sigint_blocked():  # a Ctrl-C while the worker imports torch lands once it can handle it
                self.process = context.Process(target=worker_main, args=(child, threads, run_fn), daemon=True)
                self.process.start()
        finally:  # only the two keys: clearing the whole environment would empty it for other threads meanwhile
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
        child.close()

    def interrupt(self):
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.process.pid, signal.SIGINT)


class WorkerPool(Grid):
    """run_in_workers' state: the grid, the workers, and what the parent has heard."""

    def __init__(self, tasks, run_fn, jobs, threads, bar, on_done, on_failed, gpus=None):
        super().__init__(tasks, bar, on_done, on_failed)
        self.gpus = gpus or []  # the k-th worker's GPU; a worker that replaces a lost one takes its GPU
        self.context = multiprocessing.get_context('spawn')  # forking a process that has run torch can hang
        self.run_fn, self.threads, self.stops, self.stopped, self.pids = run_fn, threads, [], [], []
        self.jobs, self.workers = min(jobs, len(tasks)), []

    def start(self):
        while len(self.workers) < self.jobs and not self.stops:
            gpu = self.gpus[len(self.workers)] if self.gpus else None
            self.workers.append(Worker(self.context, self.threads, self.run_fn, gpu))

    def on_sigint(self, signum, frame):
        self.stops.append(time.monotonic())
        os.write(2, b"\nCtrl-C: every run saves a checkpoint and stops; Ctrl-C again stops them at once\n"
                 if len(self.stops) == 1 else b"\nCtrl-C again: stopping every run at once\n")
        if len(self.stops) > 1:
            ending()  # every run told to stop at once: nothing more a Ctrl-C could ask
        for worker in self.workers:
            worker.interrupt()

    def hand_out(self):
        """Give every idle worker a run that is due: one of a group it has trained first, else one of a group
        no other worker has; so that under torch.compile each shape is compiled cold once, not once per worker
        at the same moment, and each worker reuses what it compiled."""
        for worker in self.workers:
            due = self.due()
            if worker.pid is None or worker.task is not None or self.stops or not due:
                continue
            elsewhere = set().union(*(w.groups | ({w.task.group} if w.task else set())
                                      for w in self.workers if w is not worker))
            entry = (next((e for e in due if e[0].group in worker.groups), None)
                     or next((e for e in due if e[0].group not in elsewhere), None) or due[0])
            self.queue.remove(entry)
            worker.task = entry[0]
            worker.conn.send(worker.task)

    def handle(self, worker, message):
        kind, value = message
        task = worker.task
        if kind == 'ready':
            worker.pid = value
            self.pids.append(value)
        elif kind == 'progress':
            self.bar.update(value)
        elif kind == 'interrupted' and (task is None or self.stops):
            if task is not None:
                self.stopped.append((task, value))
            worker.task = None
        else:  # 'busy', 'done', 'failed'; or 'interrupted' by a SIGINT sent to the worker alone: its run failed
            worker.task = None
            if kind == 'done':
                worker.groups.add(task.group)
            self.ended(task, 'failed' if kind == 'interrupted' else kind, value)

    def listen(self):
        """Wait for messages (or a worker's end) for up to RETRY_S, and act on them."""
        ready = multiprocessing.connection.wait([w.conn for w in self.workers] + [w.process.sentinel for w in self.workers],
                                                timeout=RETRY_S)
        for worker in list(self.workers):
            if worker.conn not in ready and worker.process.sentinel not in ready:
                continue
            with contextlib.suppress(EOFError, OSError):  # a broken pipe: the worker is gone
                while worker.conn.poll():
                    self.handle(worker, worker.conn.recv())
                if worker.process.is_alive():
                    continue
            self.lost(worker)

    def lost(self, worker):
        """A worker process ended: its run failed, unless Ctrl-C stopped it; a new worker takes the rest."""
        self.workers.remove(worker)
        worker.process.join()
        code = worker.process.exitcode
        if worker.pid is None and not self.stops:
            raise UserError(f"a worker process could not start (exit code {code}; its error is above); "
                            f"--jobs=1 trains in this process instead")
        if worker.task is not None and not self.stops:
            log = last_line(os.path.join(worker.task.run_dir, LOG_FILE))
            self.ended(worker.task, 'failed', f"its process ended with exit code {code}; its log ends: {log}")
        if self.queue and not self.stops:
            self.workers.append(Worker(self.context, self.threads, self.run_fn, worker.gpu))

    def finished(self):
        busy = [w for w in self.workers if w.task is not None or w.pid is None]
        return not busy if self.stops else not self.queue and not busy

    def close(self):
        """Tell every worker to end, and wait for it; a stuck one is terminated (its last checkpoint is whole,
        and a save under way is only a temporary file)."""
        for worker in self.workers:
            with contextlib.suppress(OSError):
                worker.conn.send(None)
        deadline = time.monotonic() + 60
        for worker in self.workers:
            worker.process.join(max(0.1, deadline - time.monotonic()))
            if worker.process.is_alive():
                worker.interrupt()
                worker.process.join(5)
            if worker.process.is_alive():
                worker.process.terminate()
                worker.process.join()


def run_in_workers(tasks, run_fn, jobs, threads, bar, on_done, on_failed, gpus=None):
    """Train tasks in min(jobs, len(tasks)) worker processes of `threads` torch threads each. Each run is claimed by the
    worker that trains it; one claimed elsewhere is tried again every RETRY_S. A failed run goes to on_failed (with its
    log's last line) and the others go on; a worker that dies is replaced. The first Ctrl-C asks every running run to
    save and stop, a second one to stop at once; then KeyboardInterrupt is raised, naming the runs stopped. gpus: the
    k-th worker's GPU (CUDA_VISIBLE_DEVICES), or None. Returns the pids of the workers."""
    pool = WorkerPool(tasks, run_fn, jobs, threads, bar, on_done, on_failed, gpus)
    # Only the main thread may set a handler; where SIGINT is ignored (a background job), it stays so.
    in_main = (threading.current_thread() is threading.main_thread()
               and signal.getsignal(signal.SIGINT) is not signal.SIG_IGN)
    previous = signal.signal(signal.SIGINT, pool.on_sigint) if in_main else None
    try:
        pool.start()  # after the handler: a Ctrl-C while the workers start is theirs to hear, once
        while not pool.finished():
            pool.hand_out()
            bar_running = sum(w.task is not None for w in pool.workers)
            if getattr(bar, 'running', bar_running) != bar_running:
                bar.describe(bar_running)
            pool.listen()
    except BaseException:
        for worker in pool.workers:  # the parent failed: every run saves and stops
            worker.interrupt()
        raise
    finally:
        pool.close()
        if in_main:
            put_back(signal.SIGINT, previous)
    if pool.stops:
        ending()
        raise KeyboardInterrupt("; ".join(f"{task.label} {message.split(':')[0]}" for task, message in pool.stopped)
                                or "stopped")
    return pool.pids
