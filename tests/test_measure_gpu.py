"""docs/measure_gpu.sh, scaled down to a CPU: every step runs and leaves its file, at most 8 files in one folder,
with the interpreter it is given (the one running these tests), so that the script is known to work on the day
someone runs it on a GPU; and its GPU budget adds up to 9 minutes."""

import csv
import os
import re
import subprocess
import sys

import pytest

from conftest import ENV, REPO_ROOT

SCRIPT = os.path.join(REPO_ROOT, 'docs', 'measure_gpu.sh')


def measure(*args, cwd=REPO_ROOT, timeout=30):
    return subprocess.run(['bash', SCRIPT, *args], cwd=cwd, env=ENV, capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_measure_gpu_runs_every_step_on_a_cpu_into_at_most_eight_files(tiny_data, tmp_path):
    # Run from another folder, with a PATH whose python3 is not this one: the script must use --python.
    out = tmp_path / 'gpu'
    (tmp_path / 'bin').mkdir()
    (tmp_path / 'bin' / 'python3').write_text('#!/bin/sh\necho "the python3 on PATH ran" >&2; exit 3\n')
    (tmp_path / 'bin' / 'python3').chmod(0o755)
    env = dict(ENV, PATH=f"{tmp_path / 'bin'}:{ENV['PATH']}")
    result = subprocess.run(['bash', SCRIPT, '--device=cpu', '--out=gpu', f'--data_dir={tiny_data}', '--dataset=tiny',
                             f'--python={sys.executable}'], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    files = sorted(os.listdir(out))
    assert files == ['bench.txt', 'env.txt', 'init_loss.txt', 'speed.txt', 'summary.txt', 'tests.txt', 'training.csv',
                     'training.txt'] and len(files) <= 8
    summary = (out / 'summary.txt').read_text().splitlines()
    assert [line.split(':')[0] for line in summary] == ['env', 'tests', 'bench', 'init_loss', 'train tied',
                                                        'train untied', 'train shuffle', 'train pit', 'train', 'speed']
    assert all(': ok' in line for line in summary), summary
    assert f'python {sys.executable}' in (out / 'env.txt').read_text()
    assert 'the python3 on PATH ran' not in ''.join(path.read_text() for path in out.iterdir())
    assert re.search(r'^\d+ passed, \d+ deselected', (out / 'tests.txt').read_text(), re.M)  # the cuda_branch ones
    assert 'ratio' in (out / 'bench.txt').read_text() and 'muon' in (out / 'bench.txt').read_text()
    rows = list(csv.DictReader(open(out / 'training.csv')))
    assert {row['mode'] for row in rows} == {'tied', 'untied', 'shuffle', 'pit'}
    steps = [row for row in rows if row['step_loss']]  # the last row is the final evaluation alone
    assert all(float(row['step_loss']) > 0 and float(row['tokens_per_sec']) > 0 for row in steps)
    assert sorted({row['iter'] for row in steps}) == ['0', '2', '3']  # logged, and the evaluation at 3
    speed = (out / 'speed.txt').read_text()
    times = re.search(r'^priming run [\d.]+ s; T\(10\) ([\d.]+) s, T\(40\) ([\d.]+) s$', speed, re.M)
    per_iteration = re.search(r'^per iteration: this-project (-?[\d.]+) ms$', speed, re.M)
    assert times and per_iteration, speed
    short, long = map(float, times.groups())
    assert float(per_iteration.group(1)) == pytest.approx(1000 * (long - short) / 30, abs=0.05)  # printed to 1 ms


def test_the_gpu_budget_adds_up_to_nine_minutes():
    text = open(SCRIPT).read()
    limits = dict(pair.split('=') for pair in re.search(r'^    limits=\((.*)\)$', text, re.M).group(1).split())
    assert sum(map(int, limits.values())) <= 540
    # the comment's table is the budget the script runs
    table = dict(re.findall(r'^#   (\w+) +(\d+) s  ', text, re.M))
    assert table.pop('total') == str(sum(map(int, limits.values())))
    assert table == limits


def test_measure_gpu_refuses_what_it_cannot_run_in_one_line(tmp_path):
    for args, line in [(['--device=tpu'], 'error: --device=tpu is not allowed; choose one of: cuda, cpu'),
                       (['--python=/no/such/python'],
                        'error: --python=/no/such/python: no such interpreter; give the path of a python with torch'),
                       ([f'--nanogpt={tmp_path}'],
                        f'error: --nanogpt={tmp_path} has no train.py; give a karpathy/nanoGPT checkout')]:
        result = measure(*args, f'--out={tmp_path}/out')
        assert result.returncode == 2 and result.stderr.strip() == line
        assert not os.path.exists(tmp_path / 'out')  # nothing written
