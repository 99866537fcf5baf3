"""The GPT-2-small verdict as configs and stages (config/gpt2_small_verdict.py, config/gpt2_small.sh): the grid
is what docs/gpt2-small.md says it is, and the plan's figures that the page quotes are what the plan computes."""

import os
import re
import subprocess
import sys

import pytest

import ablate
from lab import gpt2_small_plan
from lab.ablation_grid import parse_row

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGE = os.path.join(ROOT, 'docs', 'gpt2-small.md')


def test_the_grid_is_gpt2_small_at_20_tokens_a_parameter_untied_tied_and_shuffle_paired_by_seed():
    cfg = ablate.parse_args([gpt2_small_plan.CONFIG])
    assert (cfg['n_layer'], cfg['n_head'], cfg['n_embd'], cfg['block_size']) == (12, 12, 768, 1024)
    assert (cfg['init_std'], cfg['emb_scale'], cfg['zero_init_residual']) == (0.02, False, False)  # GPT-2's init
    tokens = cfg['max_iters'] * cfg['batch_size'] * cfg['block_size'] * cfg['gradient_accumulation_steps']
    assert tokens == pytest.approx(2.5e9, rel=0.001)
    rows = [parse_row(mode) for mode in cfg['modes'].split(',')]
    assert [row.tie_mode for row in rows] == ['untied', 'tied', 'shuffle'] and cfg['seeds'] == 3
    assert cfg['warmup_iters'] == pytest.approx(cfg['max_iters'] / 10, rel=0.01)  # a tenth of the run


def test_the_page_quotes_the_plan():
    lines = '\n'.join(gpt2_small_plan.plan(gpus=0))
    page = ' '.join(open(PAGE, encoding='utf-8').read().split())
    one_run, one_gpu, eight = re.findall(r'([\d.]+) h', lines)[:3]  # the rates stage's come after
    assert f"a run {one_run} h; the nine runs {one_gpu} h on one H100, and {eight} h on eight" in page
    assert 'eight H100s: 2 round(s)' in lines  # nine runs, one a GPU
    for figure in re.findall(r'at least ([\d.]+ GiB)|train.bin ([\d.]+ GiB)|about ([\d.]+ GiB), ([\d.]+ GiB)', lines):
        for value in filter(None, figure):
            assert value in page, value


def test_the_stage_script_names_its_stages_and_refuses_another():
    result = subprocess.run(['bash', os.path.join(ROOT, 'config', 'gpt2_small.sh'), 'nope'], capture_output=True,
                            text=True)
    assert result.returncode == 2 and all(stage in result.stdout for stage in ('prepare', 'plan', 'smoke', 'rates', 'run'))
    plan = subprocess.run([sys.executable, os.path.join(ROOT, 'lab', 'gpt2_small_plan.py'), '--gpus=4'],
                          capture_output=True, text=True, cwd=ROOT)
    assert plan.returncode == 0 and "this machine's 4 GPU(s): 3 round(s)" in plan.stdout


def test_the_rates_stage_holds_each_grid_rate_and_one_below_it_and_the_page_quotes_its_hours():
    grid = ablate.parse_args([gpt2_small_plan.CONFIG])
    rates = ablate.parse_args([gpt2_small_plan.RATES])
    swept = [parse_row(mode) for mode in rates['modes'].split(',')]
    for prior in map(parse_row, grid['modes'].split(',')):
        family = [row for row in swept if row.tie_mode == prior.tie_mode]
        assert prior in family                                           # the prior itself is measured
        assert any(row.embed_mult < prior.embed_mult for row in family), prior  # and a rate below it
    assert rates['max_iters'] < grid['max_iters'] and rates['out_dir'] != grid['out_dir']
    plan = '\n'.join(gpt2_small_plan.plan(gpus=0))
    hours = re.search(r'rates stage: \d+ runs of \d+ steps, ([\d.]+) h on one H100', plan)
    assert f"{hours.group(1)} h on one H100" in open(PAGE, encoding='utf-8').read()


@pytest.mark.parametrize('args, said', [
    (['lab/gpt2_small_plan.py', '--tokens_per_s=0'], '--tokens_per_s must be a positive finite number, got 0.0'),
    (['lab/gpt2_small_plan.py', '--tokens_per_s=-400000'], '--tokens_per_s must be a positive finite number'),
    (['lab/gpt2_small_plan.py', '--corpus_tokens=-5'], '--corpus_tokens must be a positive finite number, got -5'),
    (['lab/gpt2_small_plan.py', '--gpus=-3'], "--gpus must be -1 (this machine's GPUs) or a count of GPUs"),
])
def test_the_plan_refuses_a_rate_that_would_divide_by_zero_or_print_negative_hours(args, said):
    result = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and result.stderr.startswith(f"error: {said}") and result.stderr.count('\n') == 1, \
        result
    assert 'Traceback' not in result.stderr and result.stdout == ''


def test_a_stage_without_its_argument_is_one_line_and_exit_code_2():
    result = subprocess.run(['bash', 'config/gpt2_small.sh', 'prepare'], cwd=ROOT, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 2 and result.stderr.count('\n') == 1
    assert result.stderr.startswith('error: bash config/gpt2_small.sh prepare DIR') and 'is missing' in result.stderr
