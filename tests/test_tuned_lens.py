"""The tuned lens (lab/tuned_lens.py): identity blocks make every layer's lens the final loss, a random model's
lenses lie near log n, a trained model's fall with depth, and a tied model's logit lens at layer 0 is the copy
machine of (*) that the translator undoes."""

import math

import pytest
import torch

import train
from conftest import tiny_train_args
from lab import run_results, tuned_lens
from lib import prepared_data
from model import GPT, GPTConfig

# one torch thread (conftest.py); one xdist worker for the module, whose fixtures are then made once (pytest.ini)
pytestmark = [pytest.mark.usefixtures('one_torch_thread'), pytest.mark.xdist_group('tuned_lens')]

SHAPE = dict(vocab_size=53, n_embd=32, n_layer=2, n_head=2, block_size=16)


@pytest.fixture(scope='module')
def splits(tiny_data):
    loaded, _ = prepared_data.load_splits(dict(data_dir=tiny_data, dataset='tiny', block_size=16))
    return loaded


@pytest.fixture(scope='module')
def trained_run(tiny_data, tmp_path_factory, one_torch_thread):
    out_dir = str(tmp_path_factory.mktemp('lens'))
    summary = train.train(train.parse_train_args(tiny_train_args(tiny_data, out_dir, n_layer=3, max_iters=200,
                                                                 eval_interval=200, tie_mode='tied')))
    return out_dir, summary['model']


@pytest.mark.parametrize('tie_mode', ['tied', 'untied', 'pit'])
def test_identity_blocks_make_every_layers_lens_the_final_loss(tie_mode, splits):
    torch.manual_seed(0)
    model = GPT(GPTConfig(tie_mode=tie_mode, zero_init_residual=True, **SHAPE))
    result = tuned_lens.tuned_lens(model, splits, steps=20)
    final = result['tuned'][-1]
    # every layer holds the same state as the last: the translator stays the identity, whatever it trains on
    assert result['tuned'] == pytest.approx([final] * 3, abs=1e-5)
    assert result['logit'] == pytest.approx([final] * 3, abs=1e-5)
    assert result['layers'] == ['embedding', 'block 1', 'block 2'] and result['targets'] == len(splits['val']) - 1


def test_a_random_models_lenses_lie_near_log_n(splits):
    torch.manual_seed(0)
    model = GPT(GPTConfig(tie_mode='untied', **SHAPE))  # GPT-2's init: every logit small, near uniform
    result = tuned_lens.tuned_lens(model, splits, steps=20)
    assert result['tuned'] == pytest.approx([math.log(53)] * 3, abs=0.05)


def test_a_trained_models_lenses_fall_with_depth_to_its_own_loss(trained_run, splits):
    out_dir, model = trained_run
    result = tuned_lens.tuned_lens_of_run(out_dir)
    tuned = result['tuned']
    assert tuned[0] > tuned[1] > tuned[2] > tuned[3], tuned
    assert tuned[0] < result['log_n']  # even the embedding's state holds something (the bigram statistics)
    # the last layer is the model itself: its whole-split loss, as the frequency buckets score it
    sums, counts = run_results.loss_by_frequency(model, splits['val'], torch.zeros(53, dtype=torch.long), 16, 'cpu')
    assert tuned[-1] == pytest.approx(sum(sums) / sum(counts), abs=1e-5)
    assert result['logit'][-1] == tuned[-1]


def test_the_translator_undoes_the_tied_logit_lens_at_the_embedding(trained_run):
    out_dir, _ = trained_run
    result = tuned_lens.tuned_lens_of_run(out_dir)
    # tied: the logit lens reads layer 0 (about w_i) through W itself; the translator reads what it holds
    assert result['tuned'][0] < result['logit'][0] - 0.1, result


def test_an_ablation_lenses_the_rows_it_is_told_to_and_draws_the_lens_and_the_rate_sweep(tiny_data, tmp_path):
    import json
    import ablate
    args = tiny_train_args(tiny_data, str(tmp_path / 'grid'), max_iters=10, eval_interval=10) + [
        '--modes=untied,untied_e3_h0.3,untied_e3,tied', '--tuned_lens=untied,tied', '--jobs=1']
    ablate.ablate(ablate.parse_args(args), args)
    info = json.load(open(tmp_path / 'grid' / 'summary.json'))
    for row in ('untied', 'tied'):  # lensed: every layer, and the last one is the run's own whole-split loss
        cells = info['modes'][row]
        assert cells['lens_tuned_1']['mean'] == pytest.approx(cells['val_loss_all']['mean'], abs=1e-5)
        assert (tmp_path / 'grid' / f'{row}-seed1337' / 'tuned_lens.json').exists()
    assert info['modes']['untied_e3']['lens_tuned_0']['mean'] is None  # not asked for: not lensed
    assert not (tmp_path / 'grid' / 'untied_e3-seed1337' / 'tuned_lens.json').exists()
    text = (tmp_path / 'grid' / 'summary.md').read_text()
    assert 'Tuned lens' in text and 'tied minus untied' not in text and "| tied | " in text
    for figure in ('tuned_lens.png', 'rate_sweep.png'):
        assert (tmp_path / 'grid' / figure).read_bytes()[:4] == b'\x89PNG'
