"""The intervals every verdict is read from, checked against a computation by hand on made-up per-seed values:
the paired one (the mean of per-seed differences, Student's t on n - 1 degrees of freedom) and Welch's."""
import math

import pytest

from lab.ablation_report import PAIRED, paired_interval, versus_table, welch_interval

# five seeds of two modes; the per-seed differences are 0.2, 0.1, 0.1, 0.2, 0.3
A = [1.0, 1.2, 0.9, 1.1, 1.3]
B = [0.8, 1.1, 0.8, 0.9, 1.0]


def test_the_paired_interval_is_the_mean_difference_with_t_on_n_minus_1_degrees():
    # mean 0.18; sample sd sqrt(0.028 / 4) = 0.083666; t(0.975, 4 df) = 2.776; half = 2.776 * 0.083666 / sqrt(5)
    half = 2.776 * math.sqrt(0.028 / 4) / math.sqrt(5)
    diff, low, high = paired_interval(A, B)
    assert diff == pytest.approx(0.18)
    assert (low, high) == pytest.approx((0.18 - half, 0.18 + half))
    assert low == pytest.approx(0.0761, abs=1e-4) and high == pytest.approx(0.2839, abs=1e-4)


def test_welch_interval_by_hand():
    # variances of the means 0.025 / 5 and 0.017 / 5; Welch-Satterthwaite df = 0.0084^2 / (0.005^2 / 4 + 0.0034^2 / 4)
    # = 7.72, t between the table's 7 and 8 degrees (2.365, 2.306): 2.3225
    va, vb = 0.025 / 5, 0.017 / 5
    df = (va + vb) ** 2 / (va ** 2 / 4 + vb ** 2 / 4)
    assert df == pytest.approx(7.7199, abs=1e-3)
    half = (2.365 + (df - 7) * (2.306 - 2.365)) * math.sqrt(va + vb)
    diff, low, high = welch_interval(A, B)
    assert diff == pytest.approx(0.18)
    assert (low, high) == pytest.approx((0.18 - half, 0.18 + half))


def test_the_pairing_is_what_tells_these_two_modes_apart():
    # the seeds move both modes together: Welch's interval straddles zero, the paired one does not
    assert welch_interval(A, B)[1] < 0 < paired_interval(A, B)[1]


def test_a_seed_missing_on_one_side_drops_its_pair_and_one_pair_has_no_interval():
    assert paired_interval([1.0, None, 3.0], [0.5, 2.0, 2.0]) == pytest.approx((0.75, 0.75 - 12.706 * math.sqrt(0.125)
                                                                                 / math.sqrt(2), 0.75 + 12.706
                                                                                 * math.sqrt(0.125) / math.sqrt(2)))
    assert paired_interval([1.0], [0.25]) == (0.75, None, None)
    assert paired_interval([None], [1.0]) == (None, None, None)


def test_a_difference_table_shows_the_paired_interval_bold_and_welch_beside_it():
    info = dict(labels={'tied': 'tied'})
    lines = versus_table(info, [('final_val_loss', 'val loss at end')], {'tied': {'final_val_loss': paired_interval(A, B)}},
                         {'tied': {'final_val_loss': welch_interval(A, B)}})
    assert lines[-1] == '| tied | **+0.180 [+0.076, +0.284]** (Welch [-0.033, +0.393]) |'
    assert 'n - 1 degrees of freedom' in PAIRED
