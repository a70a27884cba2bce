"""The train/validation/test split rule of the BIND paper's reference code."""

from __future__ import annotations

import random

import numpy as np
import torch
from torch import Tensor

from bind_core.errors import GraphValidationError

PAPER_SPLIT_SEED = 20
"""The seed of BIND's loaders (``random.seed(20)``)."""

PAPER_TRAIN_PER_CLASS = 500
"""BIND's ``label_number // 2`` with ``label_number = 1000``."""


def paper_split(
    y: Tensor | np.ndarray,
    *,
    seed: int = PAPER_SPLIT_SEED,
    train_per_class: int | None = PAPER_TRAIN_PER_CLASS,
) -> tuple[Tensor, Tensor, Tensor]:
    """Split nodes per label exactly as BIND's loaders do, generalised to any number of classes.

    For each label value in increasing order, the node indices holding it (in index order) are shuffled
    with one ``random.Random(seed)`` shared across labels (identical to BIND's ``random.seed(20)`` followed
    by ``random.shuffle`` of each label's indices). With ``k`` nodes of a label, the first
    ``min(int(0.5 * k), train_per_class)`` go to train, positions ``int(0.5 * k)`` to ``int(0.75 * k)``
    to validation and the rest to test. Nodes between the training cap and ``int(0.5 * k)`` are in no
    split: that is the paper's rule. Each split lists label 0's nodes first, then label 1's, and so on.

    Args:
        y: integer labels, shape ``[n]``.
        seed: seed of the shuffle (BIND uses 20).
        train_per_class: cap on training nodes per label (BIND: 500); ``None`` for no cap.

    Returns:
        ``(train_idx, val_idx, test_idx)``, int64 tensors.

    Raises:
        GraphValidationError: ``y`` is not a 1-D integer array or ``train_per_class`` is negative.
    """
    labels = y.detach().cpu().numpy() if isinstance(y, Tensor) else np.asarray(y)
    if labels.ndim != 1:
        raise GraphValidationError("y", f"expected a 1-D label array, got shape {list(labels.shape)}")
    integral = np.issubdtype(labels.dtype, np.integer) or (
        np.issubdtype(labels.dtype, np.floating) and bool(np.all(labels == np.round(labels)))
    )
    if labels.size and not integral:
        raise GraphValidationError("y", "labels must be integers")
    if train_per_class is not None and train_per_class < 0:
        raise GraphValidationError("train_per_class", f"must be >= 0, got {train_per_class}")
    rng = random.Random(seed)
    train: list[int] = []
    val: list[int] = []
    test: list[int] = []
    for value in np.unique(labels[labels >= 0]):
        members = np.flatnonzero(labels == value).tolist()
        rng.shuffle(members)
        k = len(members)
        half, three_quarters = int(0.5 * k), int(0.75 * k)
        cap = half if train_per_class is None else min(half, train_per_class)
        train.extend(members[:cap])
        val.extend(members[half:three_quarters])
        test.extend(members[three_quarters:])
    return tuple(torch.tensor(part, dtype=torch.long) for part in (train, val, test))  # type: ignore[return-value]
