"""docs/measure_gpu.sh, scaled down to a CPU: every step runs and leaves its file, at most 8 files in one folder,
so that the script is known to work on the day a GPU is lent for half an hour."""

import csv
import os
import subprocess

import pytest

from conftest import ENV, REPO_ROOT


@pytest.mark.slow
def test_measure_gpu_runs_every_step_on_a_cpu_into_at_most_eight_files(tiny_data, tmp_path):
    out = tmp_path / 'gpu'
    result = subprocess.run(['bash', 'docs/measure_gpu.sh', '--device=cpu', f'--out={out}', f'--data_dir={tiny_data}',
                             '--dataset=tiny'], cwd=REPO_ROOT, env=ENV, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    files = sorted(os.listdir(out))
    assert files == ['bench.txt', 'env.txt', 'init_loss.txt', 'summary.txt', 'tests.txt', 'training.csv',
                     'training.txt'] and len(files) <= 8
    summary = (out / 'summary.txt').read_text().splitlines()
    assert [line.split(':')[0] for line in summary] == ['env', 'tests', 'bench', 'init_loss', 'train tied',
                                                        'train untied', 'train shuffle', 'train pit']
    assert all(': ok' in line for line in summary), summary
    assert 'ratio' in (out / 'bench.txt').read_text() and 'muon' in (out / 'bench.txt').read_text()
    rows = list(csv.DictReader(open(out / 'training.csv')))
    assert {row['mode'] for row in rows} == {'tied', 'untied', 'shuffle', 'pit'}
    steps = [row for row in rows if row['step_loss']]  # the last row is the final evaluation alone
    assert all(float(row['step_loss']) > 0 and float(row['tokens_per_sec']) > 0 for row in steps)
    assert sorted({row['iter'] for row in steps}) == ['0', '2', '3']  # logged, and the evaluation at 3


def test_measure_gpu_refuses_an_unknown_option_in_one_line(tmp_path):
    result = subprocess.run(['bash', 'docs/measure_gpu.sh', '--device=tpu', f'--out={tmp_path}'], cwd=REPO_ROOT,
                            env=ENV, capture_output=True, text=True, timeout=30)
    assert result.returncode == 2 and result.stderr.strip() == \
        'error: --device=tpu is not allowed; choose one of: cuda, cpu'
    assert os.listdir(tmp_path) == []  # nothing written
