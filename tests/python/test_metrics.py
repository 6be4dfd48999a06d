# SPDX-License-Identifier: Apache-2.0
"""tessera.metrics: ROC-AUC and Hits@K of scores that are not all finite, accuracy's shapes."""
import math

import numpy as np
import pytest

from tessera.metrics import hits_at_k, roc_auc


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_scores_that_are_not_finite_give_nan(bad):
    # A diverged model's NaN scores used to rank above every other score: AUC 1.0.
    pos, neg = np.array([0.9, 0.8]), np.array([0.1, 0.2])
    assert roc_auc(pos, neg) == 1.0 and hits_at_k(pos, neg, 1) == 1.0
    for p, n in ((pos, np.array([0.1, bad])), (np.array([bad, 0.8]), neg),
                 (np.array([bad, bad]), np.array([bad, bad]))):
        assert math.isnan(roc_auc(p, n)), (p, n)
        assert math.isnan(hits_at_k(p, n, 1)), (p, n)
    # float32 scores too
    assert math.isnan(roc_auc(pos.astype(np.float32), np.array([bad], np.float32)))


def test_a_nan_metric_is_never_the_best_epoch():
    # How the examples keep the best validation metric (in %): `val > best`, best from -inf.
    best, at = -math.inf, None
    for epoch, val in enumerate([60.0, 100 * roc_auc([np.nan], [0.1]), 70.0,
                                 100 * roc_auc([0.5], [np.nan])]):
        if val > best:
            best, at = val, epoch
    assert (best, at) == (70.0, 2)


def test_accuracy_compares_pairs_whatever_the_shapes():
    from tessera.metrics import accuracy

    # [N] against [N, 1] used to broadcast to N x N: 1/3 instead of 1.0.
    assert accuracy(np.array([0, 1, 2]), np.array([[0], [1], [2]])) == 1.0
    assert accuracy(np.array([[0, 1], [2, 3]]), np.array([0, 1, 2, 0])) == 0.75
    assert math.isnan(accuracy([], []))
    assert math.isnan(accuracy(np.zeros((0, 1)), np.zeros(0)))
    with pytest.raises(ValueError, match=r"shape \(3,\).*shape \(2, 1\)"):
        accuracy(np.array([0, 1, 2]), np.array([[0], [1]]))
    with pytest.raises(ValueError, match=r"shape \(2,\).*shape \(3,\)"):
        accuracy(np.array([0, 1]), np.array([0, 1, 2]))


@pytest.mark.parametrize("k", [0, -1, 1.5, None, float("nan"), float("inf"), "3", True])
def test_hits_at_k_refuses_k_below_one(k):
    # None, NaN and infinity failed inside int() ("int() argument must be ...", "cannot
    # convert float NaN to integer"), naming no argument.
    # k = 0 used to fail inside np.partition ("kth(=2) out of bounds"), k = -1 likewise.
    with pytest.raises(ValueError, match=f"k must be an integer >= 1, got {k!r}"):
        hits_at_k([0.5], [0.1, 0.2], k)
    assert hits_at_k([0.5], [0.1, 0.2], 1) == 1.0
    assert hits_at_k([0.5], [0.1, 0.2], np.int64(2)) == 1.0


def test_scores_of_a_decoder_column_count_and_other_shapes_are_refused():
    pos, neg = np.array([0.9, 0.8, 0.3]), np.array([0.1, 0.2, 0.5])
    assert roc_auc(pos[:, None], neg[:, None]) == roc_auc(pos, neg)
    assert hits_at_k(pos[:, None], neg[:, None], 2) == hits_at_k(pos, neg, 2)
    # A [1, N] row used to count as one score against the flattened ranks: AUC 14.
    for fn in (lambda p, n: roc_auc(p, n), lambda p, n: hits_at_k(p, n, 2)):
        with pytest.raises(ValueError, match=r"positive scores must be \[N\] or \[N, 1\], "
                                             r"got shape \(1, 3\)"):
            fn(pos[None, :], neg)
        with pytest.raises(ValueError, match=r"negative scores .* got shape \(3, 2\)"):
            fn(pos, np.stack([neg, neg], 1))
