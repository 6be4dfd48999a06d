# SPDX-License-Identifier: Apache-2.0
"""Evaluation metrics of the examples (NumPy only)."""
from __future__ import annotations

import numpy as np

__all__ = ["roc_auc", "hits_at_k", "accuracy"]


def _all_finite(*scores: np.ndarray) -> bool:
    return all(bool(np.isfinite(s).all()) for s in scores)


def _scores(x, fn: str, what: str) -> np.ndarray:
    """``x`` as float64 scores: ``[N]``, or a decoder's ``[N, 1]`` flattened; ValueError for any
    other shape (a matrix of scores has no order to rank)."""
    a = np.asarray(x, dtype=np.float64)
    if a.ndim == 2 and a.shape[1] == 1:
        a = a.reshape(-1)
    if a.ndim != 1:
        raise ValueError(f"{fn}: {what} scores must be [N] or [N, 1], got shape {a.shape}")
    return a


def roc_auc(pos: np.ndarray, neg: np.ndarray) -> float:
    """ROC-AUC of positive against negative scores (Mann-Whitney U, average ranks for ties);
    NaN when either side is empty or any score is NaN or infinite (a diverged model has no
    ranking; a caller that keeps the best ``>`` value never picks it). For binary labels:
    ``roc_auc(s[y == 1], s[y == 0])``. Scores are ``[N]`` or ``[N, 1]`` (ValueError else)."""
    pos, neg = _scores(pos, "roc_auc", "positive"), _scores(neg, "roc_auc", "negative")
    npos, nneg = len(pos), len(neg)
    if npos == 0 or nneg == 0 or not _all_finite(pos, neg):
        return float("nan")
    s = np.concatenate([pos, neg]).astype(np.float64)
    _, inv, counts = np.unique(s, return_inverse=True, return_counts=True)
    avg_rank = np.cumsum(counts) - (counts - 1) / 2.0  # 1-based average rank of each value
    ranks = avg_rank[inv]
    return float((ranks[:npos].sum() - npos * (npos + 1) / 2.0) / (npos * nneg))


def hits_at_k(pos: np.ndarray, neg: np.ndarray, k: int) -> float:
    """OGB's Hits@K: the fraction of positives scored strictly above the K-th highest negative
    (1.0 when there are fewer than K negatives, as in ogb.linkproppred.Evaluator); NaN when
    there are no positives or any score is NaN or infinite. ValueError for ``k`` < 1 and for
    scores not shaped ``[N]`` or ``[N, 1]``."""
    try:  # None, NaN or infinity: int() fails with its own words, naming no argument
        whole = not isinstance(k, bool) and int(k) == k
    except (TypeError, ValueError, OverflowError):
        whole = False
    if not whole or k < 1:
        raise ValueError(f"hits_at_k: k must be an integer >= 1, got {k!r}")
    k = int(k)
    pos, neg = _scores(pos, "hits_at_k", "positive"), _scores(neg, "hits_at_k", "negative")
    if len(pos) == 0 or not _all_finite(pos, neg):
        return float("nan")
    if len(neg) < k:
        return 1.0
    kth = np.partition(neg, len(neg) - k)[len(neg) - k]
    return float((pos > kth).mean())


def accuracy(pred: np.ndarray, labels: np.ndarray) -> float:
    """Fraction of equal entries of ``pred`` and ``labels`` (NaN when empty). Both are
    flattened (``[N]`` against ``[N, 1]`` compares N pairs); ValueError when their sizes
    differ."""
    pred, labels = np.asarray(pred), np.asarray(labels)
    if pred.size != labels.size:
        raise ValueError(f"accuracy: pred has shape {pred.shape} but labels have shape "
                         f"{labels.shape} (sizes {pred.size} and {labels.size} differ)")
    if labels.size == 0:
        return float("nan")
    return float((pred.reshape(-1) == labels.reshape(-1)).mean())
