"""ablate.py --jobs: runs side by side in worker processes, each run written by exactly one process (also
when two commands share an out_dir), the same losses as one run after another, one progress bar, a failed
run named with its log's last line while the others go on, and Ctrl-C stopping every run with a checkpoint."""

import contextlib
import csv
import io
import json
import os
import re
import signal
import threading
import time

import pytest
import torch

import ablate
from conftest import tiny_train_args, without_matplotlib
from lab import grid_runner, run_results

GRID = dict(max_iters=20, eval_interval=10, log_interval=1)
RUNS = [(mode, seed) for mode in ('untied', 'tied') for seed in (1337, 1338)]
TRAINS = re.compile(r'^ablate\.py: pid (\d+) trains ', re.M)  # the first line a process writes into a run's log
# What another torch thread count changes, measured: 1 against 2 threads, 300 iterations of this model, 4 runs:
# every logged loss equal to the 4 decimals metrics.csv keeps, or 1e-4 apart (the weights at most 5e-6 apart).
# The same thread count in another process: equal.
THREADS_TOLERANCE = 1e-4


# one torch thread (conftest.py); one xdist worker for the module, whose fixtures are then made once (pytest.ini)
pytestmark = [pytest.mark.usefixtures('one_torch_thread'), pytest.mark.xdist_group('ablate_jobs')]


def grid_args(data_dir, out_dir, *extra, **overrides):
    return tiny_train_args(data_dir, out_dir, **dict(GRID, **overrides)) + list(extra)


def trainers(run_dir):
    """The pids of every process that ever trained the run (each writes one header line into its log)."""
    with open(os.path.join(run_dir, grid_runner.LOG_FILE)) as f:
        return [int(pid) for pid in TRAINS.findall(f.read())]


def losses(run_dir):
    with open(os.path.join(run_dir, 'metrics.csv'), newline='') as f:
        return [(r['iter'], r['step_loss'], r['val_loss']) for r in csv.DictReader(f)]


def result(run_dir):
    with open(os.path.join(run_dir, 'result.json')) as f:
        return json.load(f)


@pytest.fixture(scope='module')
def side_by_side(tiny_data, tmp_path_factory):
    """untied, tied and shuffle x 2 seeds with --jobs=2, where shuffle seed 1338 cannot write its metrics.csv
    (a folder of that name is in the way); then untied and tied with --jobs=1 in this process."""
    root = tmp_path_factory.mktemp('jobs')
    parallel, serial = str(root / 'parallel'), str(root / 'serial')
    os.makedirs(os.path.join(parallel, 'shuffle-seed1338', 'metrics.csv'))
    args = grid_args(tiny_data, parallel, '--modes=untied,tied,shuffle', '--seeds=2', '--jobs=2')
    with pytest.raises(ablate.RunsFailed) as failed:
        ablate.ablate(ablate.parse_args(args), args)
    args = grid_args(tiny_data, serial, '--modes=untied,tied', '--seeds=2', '--jobs=1')
    with without_matplotlib():  # no test here looks at the figures (conftest.without_matplotlib)
        done = ablate.ablate(ablate.parse_args(args), args)
    return parallel, serial, failed.value, done


def test_this_module_runs_on_one_xdist_worker(request):
    # loadgroup keeps an xdist_group on one worker by suffixing its node ids with the group's name. Under pytest 9.2
    # the suffix no longer takes (pytest-dev/pytest-xdist#1386): nothing fails, but every worker builds this module's
    # grids (about 16 s of CPU each on a Zen 3); requirements.txt keeps pytest below 9.2.
    # Under any worker count the module carries the group's mark, which is what loadgroup reads; under xdist the
    # suffix shows the mark took (with -n 0 one process runs everything, and there is no suffix to read).
    (group,) = [mark for mark in request.node.iter_markers('xdist_group')]
    assert group.args == ('ablate_jobs',) or group.kwargs == {'name': 'ablate_jobs'}, group
    workers = int(os.environ.get('PYTEST_XDIST_WORKER_COUNT', '0'))
    assert request.node.nodeid.endswith('@ablate_jobs') == (workers > 0), (workers, request.node.nodeid)


def test_jobs_2_trains_every_run_in_exactly_one_worker_process(side_by_side):
    parallel, _, failed, _ = side_by_side
    workers = failed.done['workers']
    assert len(workers) == 2 and os.getpid() not in workers and failed.done['jobs'] == 2
    for mode, seed in RUNS + [('shuffle', 1337), ('shuffle', 1338)]:
        run_dir = os.path.join(parallel, f'{mode}-seed{seed}')
        (pid,) = trainers(run_dir)  # one process wrote the folder, once
        assert pid in workers
        if (mode, seed) != ('shuffle', 1338):  # the run that failed has no result
            assert result(run_dir)['pid'] == pid


def test_jobs_2_gives_the_losses_of_jobs_1(side_by_side):
    parallel, serial, _, done = side_by_side
    assert done['trained'] == RUNS and done['workers'] == []  # --jobs=1: in this process
    for mode, seed in RUNS:
        a, b = (os.path.join(root, f'{mode}-seed{seed}') for root in (parallel, serial))
        assert trainers(b) == [os.getpid()]
        rows_a, rows_b = losses(a), losses(b)
        assert [r[0] for r in rows_a] == [r[0] for r in rows_b] == [str(i) for i in range(21)]
        if result(a)['threads'] == result(b)['threads']:  # as on a 2-core machine: the same arithmetic
            assert rows_a == rows_b
        for ra, rb in zip(rows_a, rows_b):
            for x, y in zip(ra[1:], rb[1:]):
                assert (x == y == '') or abs(float(x) - float(y)) <= THREADS_TOLERANCE + 1e-9


def test_a_failed_run_is_named_with_its_logs_last_line_and_the_rest_go_on(side_by_side, tiny_data):
    parallel, _, failed, _ = side_by_side
    message = str(failed)
    log = os.path.join(parallel, 'shuffle-seed1338', grid_runner.LOG_FILE)
    last = grid_runner.last_line(log)
    assert last.startswith('error: ') and 'metrics.csv' in last
    assert message.startswith('1 of 6 runs failed (shuffle seed 1338: ' + last)
    for mode, seed in RUNS + [('shuffle', 1337)]:
        assert os.path.exists(os.path.join(parallel, f'{mode}-seed{seed}', 'result.json'))
    assert not os.path.exists(os.path.join(parallel, 'summary.json'))  # a summary waits for every run
    # Once the way is clear, the same command trains that run alone and summarises.
    os.rmdir(os.path.join(parallel, 'shuffle-seed1338', 'metrics.csv'))
    args = grid_args(tiny_data, parallel, '--modes=untied,tied,shuffle', '--seeds=2', '--jobs=1')
    with without_matplotlib():
        done = ablate.ablate(ablate.parse_args(args), args)
    assert done['trained'] == [('shuffle', 1338)] and len(done['skipped']) == 5
    assert json.load(open(os.path.join(parallel, 'summary.json')))['seeds'] == [1337, 1338]


@pytest.fixture(scope='module')
def shared_grid(tiny_data, tmp_path_factory):
    """untied and tied with --jobs=2 into an out_dir where another command holds untied's claim until the free run
    is done and the held one has been tried again; the summary may not evaluate anything in this process (its
    workers scored their runs). One grid for the two tests below: its two workers cost more than its runs."""
    out_dir = tmp_path_factory.mktemp('jobs') / 'shared'
    held = str(out_dir / 'untied-seed1337')
    claim = grid_runner.Claim(held)  # as a second ablate.py command training that run would hold it
    seen = []

    def other_command():  # lets go once the free run is done and the held one has been tried again
        deadline = time.time() + 120
        while not (out_dir / 'tied-seed1337' / 'result.json').exists() and time.time() < deadline:
            time.sleep(0.1)
        time.sleep(2 * grid_runner.RETRY_S)
        seen.append(sorted(os.listdir(held)))
        claim.__exit__()

    def evaluated_by_the_summary(*args, **kwargs):
        raise AssertionError("the summary evaluated a checkpoint that its worker should have scored")
    args = grid_args(tiny_data, str(out_dir), '--modes=untied,tied', '--jobs=2', progress='true')
    releaser = threading.Thread(target=other_command)
    releaser.start()
    out, err = io.StringIO(), io.StringIO()  # not a terminal, as under pytest's capture
    try:
        with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), \
                without_matplotlib():
            patch.setattr(run_results, 'loss_by_frequency', evaluated_by_the_summary)  # this process only
            done = ablate.ablate(ablate.parse_args(args), args)
    finally:
        releaser.join()
    return dict(out_dir=out_dir, held=held, seen=seen, args=args, done=done, out=out.getvalue(), err=err.getvalue())


def test_each_worker_scores_its_runs_on_the_whole_split_so_the_summary_evaluates_nothing(shared_grid):
    out_dir, args, done = shared_grid['out_dir'], shared_grid['args'], shared_grid['done']
    assert sorted(done['trained']) == [('tied', 1337), ('untied', 1337)]
    summary = json.load(open(out_dir / 'summary.json'))
    cfg = ablate.parse_args(args)
    for mode in ('untied', 'tied'):
        run_dir = str(out_dir / f'{mode}-seed1337')
        for best, cache in ((False, run_results.BUCKET_FILE), (True, run_results.BEST_BUCKET_FILE)):
            os.remove(os.path.join(run_dir, cache))  # scored here again, with this process's threads
            again = run_results.bucket_numbers(run_dir, run_results.BucketData(cfg), cfg, best=best)
            key = 'best_val_loss_all' if best else 'val_loss_all'
            assert summary['modes'][mode][key]['per_seed'] == [pytest.approx(again[key], abs=1e-6)]


def test_a_run_claimed_by_another_process_is_left_alone_until_it_is_free(shared_grid):
    held, done = shared_grid['held'], shared_grid['done']
    assert shared_grid['seen'] == [[grid_runner.CLAIM_FILE]]  # nothing written there while another process held it
    assert f"untied seed 1337: claimed by process {os.getpid()}, which is training it; waiting for it" in \
        shared_grid['out']
    assert done['trained'] == [('tied', 1337), ('untied', 1337)]
    (pid,) = trainers(held)
    assert pid in done['workers'] and result(held)['pid'] == pid
    # Not on a terminal: no bar drawn at all, and never a run's own progress (train.py's lines are labelled with
    # the tie mode); tests/test_progress.py has the grid's bar on a terminal and its lines here.
    printed = shared_grid['out'] + shared_grid['err']
    assert '\r' not in printed
    assert not re.search(r'^(un)?tied: iter', printed, re.M)


@pytest.mark.slow
def test_ctrl_c_stops_every_run_with_its_checkpoint_and_no_worker_is_left(tiny_data, tmp_path, warm):
    # ablate.py as a process of its own, SIGINT at its default: a fork of the worker's warm launcher
    # (conftest.WarmLauncher); its workers start as ablate.py starts them (multiprocessing's spawn)
    proc = warm('ablate.py', *grid_args(tiny_data, str(tmp_path), '--modes=untied,tied', '--jobs=2', max_iters=5000,
                                        eval_interval=10))
    run_dirs = [tmp_path / f'{mode}-seed1337' for mode in ('untied', 'tied')]
    deadline = time.time() + 120
    while not all((run_dir / 'ckpt.pt').exists() for run_dir in run_dirs):
        assert proc.poll() is None and time.time() < deadline, proc.communicate()
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)  # to ablate.py alone, as `kill -INT`; a terminal's Ctrl-C reaches it too
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    last = err.strip().splitlines()[-1]
    assert last.startswith('ablation interrupted (') and 're-run the same command' in last
    for run_dir in run_dirs:
        stopped_at = re.search(r'^interrupted at iteration (\d+): checkpoint saved', open(run_dir / 'train.log').read(),
                               re.M)
        assert stopped_at, run_dir
        ckpt = torch.load(run_dir / 'ckpt.pt', weights_only=True)
        assert ckpt['iter_num'] == int(stopped_at.group(1)) < 5000  # saved at the moment it stopped
        assert f"{run_dir.name.replace('-seed', ' seed ')} interrupted at iteration {ckpt['iter_num']}" in last
        assert not (run_dir / 'result.json').exists()
        (pid,) = trainers(run_dir)
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)  # the worker has ended (and was reaped)


def test_jobs_default_is_one_run_per_core_with_one_thread_each():
    cfg = ablate.parse_args(['config/ablate_char_sigma.py'])  # the README's command, no other flag
    cores = grid_runner.usable_cores()
    assert ablate.jobs_and_threads(cfg, 'cpu') == (cores, 1, None)
    assert ablate.jobs_and_threads(dict(cfg, jobs=1), 'cpu') == (1, cores, None)
    with pytest.raises(ablate.UserError, match='--jobs must be 0'):
        ablate.parse_args(['--jobs=-1'])


def test_the_default_shares_the_cores_among_the_runs_there_are_to_train(monkeypatch):
    # a sweep widened by one row, or a grid's last three runs on four cores: no core left idle beside them
    monkeypatch.setattr(ablate, 'usable_cores', lambda: 4)
    cfg = ablate.parse_args([])
    assert ablate.jobs_and_threads(cfg, 'cpu', 50) == (4, 1, None)
    assert ablate.jobs_and_threads(cfg, 'cpu', 2) == (2, 2, None)
    assert ablate.jobs_and_threads(cfg, 'cpu', 1) == (1, 4, None)  # in this process, with every core
    assert ablate.jobs_and_threads(dict(cfg, jobs=3), 'cpu', 1) == (3, 1, None)  # --jobs given is kept
    monkeypatch.setattr(ablate, 'visible_gpus', lambda: ['0', '1', '2'])
    assert ablate.jobs_and_threads(dict(cfg, device='cuda'), 'cuda', 2) == (2, 2, ['0', '1'])


def starting_nothing(on_start):
    """A stand-in for multiprocessing's spawn context: its processes only call on_start() when started, in this
    process, with its environment as a worker would inherit it, and end (joined) with exit code -9."""
    class End:
        def close(self):
            pass

    class Process:
        def __init__(self, target, args, daemon):
            pass

        def start(self):
            on_start()

        def join(self):
            self.exitcode = -9
    return type('Context', (), dict(Pipe=staticmethod(lambda: (End(), End())), Process=Process))


def test_on_a_node_of_gpus_each_worker_trains_on_a_gpu_of_its_own(monkeypatch):
    """G GPUs: G runs at a time, the k-th worker seeing only the k-th GPU; one GPU, or --device naming one: one run
    at a time, in this process, as before."""
    cfg = ablate.parse_args(['config/ablate_char_sigma.py'])
    cores = grid_runner.usable_cores()
    monkeypatch.setenv('CUDA_VISIBLE_DEVICES', '2,3,5,7')  # what a scheduler hands this job
    assert ablate.jobs_and_threads(cfg, 'cuda') == (4, max(1, cores // 4), ['2', '3', '5', '7'])
    assert ablate.jobs_and_threads(dict(cfg, jobs=6), 'cuda')[2] == ['2', '3', '5', '7', '2', '3']  # shared round
    assert ablate.jobs_and_threads(dict(cfg, device='cuda:1'), 'cuda:1') == (1, cores, None)
    monkeypatch.setenv('CUDA_VISIBLE_DEVICES', '0')
    assert ablate.jobs_and_threads(cfg, 'cuda') == (1, cores, None)  # one GPU: one run keeps it busy
    monkeypatch.delenv('CUDA_VISIBLE_DEVICES')
    monkeypatch.setattr(ablate.torch.cuda, 'device_count', lambda: 2)
    assert ablate.jobs_and_threads(cfg, 'cuda')[2] == ['0', '1']


def test_a_worker_is_started_seeing_its_gpu_alone_and_a_lost_workers_gpu_goes_to_its_replacement(monkeypatch):
    from lab import grid_runner
    monkeypatch.setenv('CUDA_VISIBLE_DEVICES', '0,1')
    started = []
    context = starting_nothing(lambda: started.append(os.environ.get('CUDA_VISIBLE_DEVICES')))
    pool = grid_runner.WorkerPool([], None, 2, 1, None, None, None, gpus=['0', '1'])
    pool.jobs, pool.context = 2, context
    pool.start()
    assert started == ['0', '1'] and [w.gpu for w in pool.workers] == ['0', '1']
    assert os.environ['CUDA_VISIBLE_DEVICES'] == '0,1'  # the parent's own view, as it was
    first = pool.workers[0]
    first.pid, pool.queue = 1234, [('a run still to train', 0.0)]
    pool.lost(first)  # its process ended (killed): a new worker takes its GPU, not another's
    assert started[-1] == '0' and [w.gpu for w in pool.workers] == ['1', '0']
    grid_runner.Worker(context, 1, run_fn=None)  # a CPU worker leaves the variable alone
    assert started[-1] == '0,1'


def test_a_worker_starts_with_its_thread_counts_and_leaves_the_parents_environment_as_it_was(monkeypatch):
    """torch sizes its pools from the environment at import, so a worker must start with OMP_NUM_THREADS and
    TORCHINDUCTOR_COMPILE_THREADS set to its threads; the parent's own values (one set, one unset) come back after."""
    from lab import grid_runner
    monkeypatch.setenv('OMP_NUM_THREADS', '7')
    monkeypatch.delenv('TORCHINDUCTOR_COMPILE_THREADS', raising=False)
    seen = {}
    context = starting_nothing(lambda: seen.update({key: os.environ.get(key)
                                                    for key in ('OMP_NUM_THREADS', 'TORCHINDUCTOR_COMPILE_THREADS')}))
    grid_runner.Worker(context, 3, run_fn=None)
    assert seen == {'OMP_NUM_THREADS': '3', 'TORCHINDUCTOR_COMPILE_THREADS': '3'}
    assert os.environ['OMP_NUM_THREADS'] == '7' and 'TORCHINDUCTOR_COMPILE_THREADS' not in os.environ


def test_a_worker_whose_work_is_done_ignores_the_ctrl_c_its_parent_passes_on():
    """A worker told there is nothing more (None) returns, and its process exits: freeing torch takes a while, and a
    Ctrl-C the parent passes on meanwhile (its pool still closing) would land in that exit as Python's 'Exception
    ignored ... KeyboardInterrupt'. So a worker's end is the run's end (command_line.ending): SIGINT ignored."""
    import subprocess
    import sys
    import textwrap
    from conftest import ENV, REPO_ROOT
    script = textwrap.dedent(f"""
        import multiprocessing, signal, sys
        sys.path.insert(0, {REPO_ROOT!r})
        from lab.grid_runner import worker_main
        ours, theirs = multiprocessing.Pipe()
        ours.send(None)
        worker_main(theirs, 1, None)
        print(ours.recv()[0], signal.getsignal(signal.SIGINT) is signal.SIG_IGN)
    """)
    result = subprocess.run([sys.executable, '-c', script], cwd=REPO_ROOT, env=ENV, capture_output=True, text=True,
                            timeout=120, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ['ready', 'True'], result.stdout
