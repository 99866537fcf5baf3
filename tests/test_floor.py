"""The floor under the models' losses (lab/floor.py): counting alone, checked against a hand computation and
against the one property every smoothed model must have, a distribution that sums to one in every context."""
import math

import numpy as np
import pytest

from lab.floor import DISCOUNT, kneser_ney_bigram_loss, unigram_loss


def test_kneser_ney_bigram_matches_a_hand_computation():
    # training bigrams (0,1), (1,0), (0,2); V = 3, D = 0.75. Every token follows exactly one other, so the
    # continuation probability is 1/3 each; after token 0 (seen twice, two kinds of successor):
    # P(1|0) = (1 - D) / 2 + D * 2 / 2 * 1/3 = 0.375
    pairs = np.array([[0, 1], [1, 0], [0, 2]])
    assert kneser_ney_bigram_loss(pairs, np.array([0, 1]), 3) == pytest.approx(-math.log(0.375))
    # after token 2, never a context in training: the continuation probability alone, 1/3
    assert kneser_ney_bigram_loss(pairs, np.array([2, 1]), 3) == pytest.approx(math.log(3))


def probability_table(pairs, vocab_size):
    """P(w | v) for every v, w, read back through the loss of each single bigram."""
    return np.array([[math.exp(-kneser_ney_bigram_loss(pairs, np.array([v, w]), vocab_size))
                      for w in range(vocab_size)] for v in range(vocab_size)])


def test_every_context_gets_a_distribution_that_sums_to_one():
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, 6, size=200) ** 2 % 7  # skewed, and token 7 of V = 8 never occurs
    pairs = np.stack([tokens[:-1], tokens[1:]], axis=1)
    table = probability_table(pairs, 8)
    assert np.allclose(table.sum(axis=1), 1.0)
    assert (table > 0).all()  # an unseen token in an unseen context still gets some mass


def test_unigram_matches_a_hand_computation_and_sums_to_one():
    # counts 2, 1, 0 of V = 3 tokens (N = 3, two seen): P = max(c - D, 0) / N + D * 2 / N / 3
    train = np.array([0, 0, 1])
    p = [(max(c - DISCOUNT, 0) + DISCOUNT * 2 / 3) / 3 for c in (2, 1, 0)]
    assert sum(p) == pytest.approx(1.0)
    for token in range(3):
        assert unigram_loss(train, np.array([token]), 3) == pytest.approx(-math.log(p[token]))


def test_the_bigram_floor_is_below_the_unigram_on_text_with_structure():
    # a text in which each token mostly decides the next: the bigram must use it
    rng = np.random.default_rng(1)
    tokens = [0]
    for _ in range(5000):
        tokens.append((tokens[-1] + 1) % 10 if rng.random() < 0.9 else int(rng.integers(10)))
    tokens = np.array(tokens)
    train, val = tokens[:4000], tokens[4000:]
    pairs = np.stack([train[:-1], train[1:]], axis=1)
    assert kneser_ney_bigram_loss(pairs, val, 10) < unigram_loss(train, val, 10) - 1.0
