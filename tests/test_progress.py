"""What train.py and ablate.py show while they run: a redrawn bar on a terminal, plain lines elsewhere (a log
file, nohup, CI), where a bar would be one enormous line of carriage returns."""

import fcntl
import os
import pty
import re
import select
import struct
import termios
import time

import ablate
from conftest import tiny_train_args
from lab import grid_runner


# train.py as a process of its own whose stderr is a file or a terminal: a fork of the worker's warm launcher
# (conftest.WarmLauncher), which opens them as `python train.py` would find them, without an interpreter start.
def test_train_to_a_file_writes_a_line_per_logged_iteration_and_no_carriage_return(tiny_data, tmp_path, warm):
    log = tmp_path / 'train.log'
    process = warm('train.py', *tiny_train_args(tiny_data, str(tmp_path / 'out'), max_iters=20, log_interval=5,
                                                eval_interval=10, progress=True),
                   stdout=str(log), stderr='stdout')  # as `python train.py > train.log 2>&1`
    assert process.wait(timeout=120) == 0
    text = log.read_text()
    assert '\r' not in text
    lines = re.findall(r'^tied: iter (\d+)/20: loss [\d.]+, lr [\d.e+-]+, [\d,]+ tokens/s(, val [\d.]+)?$', text, re.M)
    assert [int(it) for it, _ in lines] == [0, 5, 10, 15]  # every logged iteration, once
    assert [bool(val) for _, val in lines] == [True, False, True, False]  # the evaluations at 0 and 10
    assert text.splitlines()[-1].startswith('done: 20 iterations')


def test_train_on_a_terminal_draws_the_bar_instead(tiny_data, tmp_path, warm):
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack('HHHH', 24, 100, 0, 0))  # 100 columns, as a terminal has
    process = warm('train.py', *tiny_train_args(tiny_data, str(tmp_path / 'out'), max_iters=20, log_interval=5,
                                                progress=True), stderr=os.ttyname(slave))  # opened by its name
    drawn, deadline = b'', time.monotonic() + 120
    while time.monotonic() < deadline:  # the slave stays open here until the run has ended: read until then
        if select.select([master], [], [], 0.1)[0]:
            drawn += os.read(master, 4096)
        elif process.poll() is not None:
            break
    os.close(slave)
    stdout, _ = process.communicate(timeout=120)
    os.close(master)
    assert process.returncode == 0
    assert b'\r' in drawn and b'20/20' in drawn  # tqdm redrew its bar to the end
    assert 'iter 5/20' not in stdout  # and no lines beside it


def test_ablate_without_a_terminal_writes_a_line_per_run_and_on_the_grids_progress(tiny_data, tmp_path, capsys,
                                                                                   monkeypatch):
    monkeypatch.setattr(grid_runner, 'PROGRESS_LINE_EVERY_S', 0)  # every update: the line shows in a short grid
    cfg = ablate.parse_args(tiny_train_args(tiny_data, str(tmp_path / 'grid'), max_iters=10, eval_interval=10,
                                            progress=True) + ['--modes=untied,tied', '--jobs=1'])
    ablate.run_all(cfg, ablate.plan_runs(cfg))
    out, err = capsys.readouterr()
    assert '\r' not in out + err
    assert re.search(r'^untied seed 1337: val loss [\d.]+ \(best [\d.]+\) after 10 iterations', out, re.M)
    assert re.search(r'^tied seed 1337: val loss', out, re.M)
    grid = re.findall(r'^grid: (\d)/2 runs done, ([\d,]+)/20 iterations \((\d+) %\), \d+m\d\ds elapsed', out, re.M)
    assert grid and grid[-1] == ('1', '20', '100')  # counted to the end (the line before the second run's end)
    # with --jobs=1 a run trains in this process, its output going to its train.log: the grid's lines while it
    # trains are still the command's, not the run's
    assert ('0', '5', '25') in grid and ('1', '15', '75') in grid
    for run in ('untied-seed1337', 'tied-seed1337'):
        assert 'grid: ' not in (tmp_path / 'grid' / run / 'train.log').read_text(), run
