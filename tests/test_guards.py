"""Guards that hold on any machine: properties of gradient accumulation, the warmup, weight decay, top-k sampling
and the Kneser-Ney floor that are true whatever the CPU, so a bug in one of them fails here even where the
bit-exact reference runs (tests/test_reference_runs.py) skip for want of a record of this machine's kind."""
import copy
import math
from fractions import Fraction
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import train
from lab.floor import DISCOUNT, kneser_ney_bigram_loss
from lib.optimizers import build_optimizer
from model import GPT, GPTConfig
from sample import generate

pytestmark = pytest.mark.usefixtures('one_torch_thread')

SHAPE = dict(vocab_size=40, n_embd=32, n_layer=2, n_head=2, block_size=16, dropout=0.0)


# ---------------------------------------------------------------- (a) gradient accumulation

class RecordingSGD(torch.optim.SGD):
    """Plain SGD that keeps a copy of every gradient it steps with: training_step clears them right after."""

    def step(self, closure=None):
        self.seen = [p.grad.detach().clone() for group in self.param_groups for p in group['params']]
        return super().step(closure)


def step_gradients(model, batches):
    """The gradients train.training_step accumulates over the micro-batches, and the norm it measures."""
    optimizer = RecordingSGD(model.parameters(), lr=0.1)
    _, norm, _ = train.training_step(model, optimizer, torch.amp.GradScaler('cpu', enabled=False), batches,
                                     torch.autocast('cpu', enabled=False), grad_clip=0.0, measure_norm=True)
    return optimizer.seen, norm


@pytest.mark.parametrize('k', [2, 4])
def test_k_micro_batches_of_b_over_k_give_the_gradient_of_one_batch_of_b(k):
    """Gradient accumulation averages: k micro-batches of B/k tokens each must give one batch of B's gradient
    (each micro-batch's loss is a mean, so training_step divides by k). Plain SGD, not AdamW, and no clipping:
    AdamW's update and a clipped one are blind to the gradient's scale, which is what a missing division changes."""
    torch.manual_seed(0)
    model = GPT(GPTConfig(**SHAPE)).float()
    twin = copy.deepcopy(model)
    g = torch.Generator().manual_seed(1)
    x = torch.randint(SHAPE['vocab_size'], (8, SHAPE['block_size']), generator=g)
    y = torch.randint(SHAPE['vocab_size'], (8, SHAPE['block_size']), generator=g)
    whole, whole_norm = step_gradients(model, [(x, y)])
    parts, parts_norm = step_gradients(twin, list(zip(x.chunk(k), y.chunk(k))))
    for one, summed in zip(whole, parts):
        torch.testing.assert_close(summed, one, rtol=1e-5, atol=1e-6)
        # the comparison depends on the division: a gradient k times too large would fail it
        assert not torch.allclose(k * one, one, rtol=1e-5, atol=1e-6)
    assert parts_norm.item() == pytest.approx(whole_norm.item(), rel=1e-5)
    # and the steps agree too: SGD moved both copies alike
    for p, q in zip(model.parameters(), twin.parameters()):
        torch.testing.assert_close(q, p, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- (b) the warmup

# train.py's defaults, and a short schedule whose cosine ends before max_iters
SCHEDULES = [dict(decay_lr=True, learning_rate=1e-3, min_lr=1e-4, warmup_iters=100, max_iters=2000,
                  lr_decay_iters=None),
             dict(decay_lr=True, learning_rate=6e-4, min_lr=6e-5, warmup_iters=10, max_iters=50, lr_decay_iters=40)]


@pytest.mark.parametrize('cfg', SCHEDULES, ids=['defaults', 'short'])
def test_the_warmup_starts_and_ends_where_its_formula_says(cfg):
    """get_lr's documented warmup, learning_rate * (it + 1) / (warmup_iters + 1), exactly at every warmup step: a
    first step that is not zero, a last one a step below the peak, then the peak at warmup_iters (the cosine's
    start), so the warmup climbs by the same amount every step into the cosine, with no jump and no flat step."""
    lr, W = cfg['learning_rate'], cfg['warmup_iters']
    assert train.get_lr(0, cfg) == lr * 1 / (W + 1) > 0
    assert train.get_lr(W - 1, cfg) == lr * W / (W + 1) < lr
    for it in range(W):
        assert train.get_lr(it, cfg) == lr * (it + 1) / (W + 1), it
    assert train.get_lr(W, cfg) == pytest.approx(lr, rel=1e-12)
    rises = [train.get_lr(it + 1, cfg) - train.get_lr(it, cfg) for it in range(W)]  # the last one is into the cosine
    assert rises == pytest.approx([lr / (W + 1)] * W, rel=1e-9)


@pytest.mark.parametrize('cfg', SCHEDULES, ids=['defaults', 'short'])
def test_after_the_warmup_the_cosine_falls_to_min_lr_and_stays(cfg):
    """The cosine: from learning_rate at warmup_iters, never rising, halfway at the middle, min_lr from
    lr_decay_iters (max_iters when unset) on."""
    lr, W, low = cfg['learning_rate'], cfg['warmup_iters'], cfg['min_lr']
    end = cfg['lr_decay_iters'] or cfg['max_iters']
    rates = [train.get_lr(it, cfg) for it in range(W, end + 5)]
    assert all(a >= b for a, b in zip(rates, rates[1:]))
    assert train.get_lr((W + end) // 2, cfg) == pytest.approx((lr + low) / 2, rel=1e-9)  # W + end is even in both
    assert train.get_lr(end, cfg) == low and train.get_lr(end + 100, cfg) == low
    assert train.get_lr(end - 1, cfg) > low


# ---------------------------------------------------------------- (c) which parameters decay

def decay_of_each_parameter(model, optimizer):
    """{parameter name: its group's weight_decay}, every parameter in exactly one group."""
    decay = {}
    for group in optimizer.param_groups:
        for p in group['params']:
            assert id(p) not in decay, 'a parameter in two groups'
            decay[id(p)] = group['weight_decay']
    assert set(decay) == {id(p) for p in model.parameters()}
    return {name: decay[id(p)] for name, p in model.named_parameters()}


@pytest.mark.parametrize('optimizer', ['adamw', 'muon'])
@pytest.mark.parametrize('tie_mode', ['tied', 'untied', 'bert', 'proj'])
def test_every_matrix_decays_and_no_gain_or_bias_does(optimizer, tie_mode):
    """Weight decay pulls matrices toward zero; on a LayerNorm gain (whose identity is 1) or a bias it only
    fights the model, so nanoGPT decays every 2-D parameter and none of the 1-D ones. Checked on the groups
    train.py's own build_optimizer makes, with biases present (bias=True) and bert's LayerNorm and output bias.
    (pit's U and L are the one documented exception, tests/test_2026_remedies.py.)"""
    torch.manual_seed(0)
    model = GPT(GPTConfig(tie_mode=tie_mode, bias=True, **SHAPE))
    cfg = train.parse_train_args([f'--tie_mode={tie_mode}', f'--optimizer={optimizer}', '--weight_decay=0.1'])
    decay = decay_of_each_parameter(model, build_optimizer(model, cfg, 'cpu'))
    params = dict(model.named_parameters())
    undecayed_matrices = sorted(name for name in params if params[name].dim() >= 2 and decay[name] != 0.1)
    assert undecayed_matrices == [], f"matrices without weight decay: {undecayed_matrices}"
    decayed_vectors = sorted(name for name in params if params[name].dim() < 2 and decay[name] != 0.0)
    assert decayed_vectors == [], f"gains or biases under weight decay: {decayed_vectors}"
    norms = [m for m in model.modules() if isinstance(m, torch.nn.LayerNorm)]
    assert len(norms) == 2 * SHAPE['n_layer'] + 1 + (tie_mode == 'bert')
    for norm in norms:
        for p in (norm.weight, norm.bias):
            assert decay[next(name for name, q in params.items() if q is p)] == 0.0


# ---------------------------------------------------------------- (d) top-k sampling

class FixedLogits(torch.nn.Module):
    """A stand-in model for generate(): the same next-token logits whatever the context."""

    def __init__(self, logits):
        super().__init__()
        self.logits = logits
        self.config = SimpleNamespace(block_size=4)

    def forward(self, idx, last_only=False):
        return self.logits.expand(idx.size(0), 1, -1), None


# distinct logits, close enough that every kept token is drawn often, in an order that is not the tokens' own
LOGITS = torch.tensor([0.3, 1.0, 0.0, 0.8, 0.5, 0.9, 0.1, 0.6, 0.2, 0.7, 0.4])


@pytest.mark.parametrize('top_k', [1, 3, 5])
@pytest.mark.parametrize('temperature', [1.0, 0.7])
def test_top_k_draws_exactly_the_k_most_likely_tokens_each_as_often_as_softmax_says(top_k, temperature):
    """top_k keeps the k most likely tokens and no other: 6,000 draws never yield a token outside the top k and
    yield each of the k, at the rate of the softmax renormalised over them (the k-th and (k+1)-th logits differ
    by 0.1, so one token too many would be drawn hundreds of times)."""
    torch.manual_seed(0)
    idx = torch.zeros((600, 1), dtype=torch.long)
    out = generate(FixedLogits(LOGITS), idx, max_new_tokens=10, temperature=temperature, top_k=top_k)[:, 1:]
    counts = torch.bincount(out.reshape(-1), minlength=len(LOGITS))
    top = torch.topk(LOGITS, top_k).indices
    drawn, most_likely = sorted(torch.nonzero(counts).flatten().tolist()), sorted(top.tolist())
    assert drawn == most_likely, f"top_k={top_k} drew tokens {drawn}; the {top_k} most likely are {most_likely}"
    expected = torch.zeros_like(LOGITS)
    expected[top] = torch.softmax(LOGITS[top] / temperature, dim=0)
    assert torch.allclose(counts / counts.sum(), expected, atol=0.03)


# ---------------------------------------------------------------- (e) the Kneser-Ney floor

def test_kneser_ney_bigram_matches_a_hand_computation_with_repeated_bigrams():
    """The interpolated Kneser-Ney bigram on a text whose bigrams repeat, so that each token's continuation count
    (how many distinct tokens precede it) is not its count as a successor: 0 follows 2 times but after 1 kind,
    1 follows 3 times after 2 kinds, 2 follows 2 times after 2 kinds. Worked by hand below, in lab/floor.py's
    conventions (D = 0.75 off every bigram count; the freed mass D * N1+(v .) / c(v) goes to the continuation
    probability, which keeps D of its own mass for a uniform guess over V; an unseen context gets the
    continuation probability alone), to 1e-9."""
    assert DISCOUNT == 0.75
    D, V = Fraction(3, 4), 4  # token 3 never occurs in training
    text = np.array([0, 1, 0, 1, 0, 2, 1, 2])
    # bigrams (0,1) x2, (1,0) x2, (0,2), (2,1), (1,2): 5 kinds
    # continuation counts N1+(. w): 0 <- {1}: 1, 1 <- {0, 2}: 2, 2 <- {0, 1}: 2, 3: 0 (sum 5, 3 tokens seen);
    # successor counts c(. w) are 2, 3, 2, 0 instead
    follows = [1, 2, 2, 0]
    cont = [(max(n - D, 0) + D * 3 / V) / 5 for n in follows]
    assert cont == [Fraction(13, 80), Fraction(29, 80), Fraction(29, 80), Fraction(9, 80)] and sum(cont) == 1
    # contexts: c(0) = 3 with 2 kinds after it, c(1) = 3 with 2, c(2) = 1 with 1; 3 is never a context
    p = {(0, 1): (2 - D) / 3 + D * 2 / 3 * cont[1],   # 5/12 + 29/160
         (1, 0): (2 - D) / 3 + D * 2 / 3 * cont[0],   # 5/12 + 13/160
         (0, 2): (1 - D) / 3 + D * 2 / 3 * cont[2],   # 1/12 + 29/160
         (2, 3): 0 + D * 1 / 1 * cont[3],             # unseen bigram: 27/320
         (3, 1): cont[1],                             # unseen context: 29/80
         (1, 2): (1 - D) / 3 + D * 2 / 3 * cont[2],   # 1/12 + 29/160
         (2, 1): (1 - D) / 1 + D * 1 / 1 * cont[1]}   # 1/4 + 87/320
    assert p[(0, 1)] == Fraction(5, 12) + Fraction(29, 160) and p[(2, 1)] == Fraction(1, 4) + Fraction(87, 320)
    pairs = np.stack([text[:-1], text[1:]], axis=1)
    for (v, w), prob in p.items():
        assert abs(kneser_ney_bigram_loss(pairs, np.array([v, w]), V) + math.log(prob)) < 1e-9, (v, w)
    val = np.array([0, 1, 0, 2, 3, 1, 2, 1])  # every bigram above, once
    expected = -sum(math.log(prob) for prob in p.values()) / len(p)
    assert abs(kneser_ney_bigram_loss(pairs, val, V) - expected) < 1e-9
    # each context's distribution sums to one, the unseen context 3 included
    for v in range(V):
        total = sum(math.exp(-kneser_ney_bigram_loss(pairs, np.array([v, w]), V)) for w in range(V))
        assert abs(total - 1) < 1e-12, v
