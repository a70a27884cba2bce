"""A seeded generator of small biased attributed graphs, for demos and tests."""

from __future__ import annotations

import numpy as np

from bind_core.data.datasets.scaling import minmax_scale
from bind_core.data.datasets.split import PAPER_TRAIN_PER_CLASS, paper_split
from bind_core.data.graph import Graph
from bind_core.errors import ConfigError

MIN_PER_CELL = 4
"""Each (group, class) pair gets at least this many nodes, so the split can reach every pair in test."""


def synthetic(
    num_nodes: int = 1000,
    *,
    num_features: int = 8,
    num_groups: int = 2,
    num_classes: int = 2,
    sens_label_corr: float = 0.5,
    homophily: float = 0.8,
    avg_degree: float = 6.0,
    feature_signal: float = 1.0,
    sens_in_features: bool = True,
    seed: int = 0,
    train_per_class: int | None = None,
    name: str = "synthetic",
) -> Graph:
    """Generate a biased attributed graph (validated); the same arguments always give the same graph.

    * Groups: group ``g`` has probability proportional to ``1 / (1 + g)`` (two groups: about 2/3 and 1/3).
    * Labels: group ``g`` favours class ``(C - 1 - g) mod C`` (with two classes, group 0 favours the
      positive class 1): ``P(y = c | g) = (1 - r) / C + r * [c is favoured]`` with ``r = sens_label_corr``.
      With the defaults the positive rate is 0.75 in group 0 and 0.25 in group 1.
    * Edges: about ``num_nodes * avg_degree / 2`` undirected edges. Sources are drawn with a log-normal activity;
      with probability ``homophily`` the target is uniform within the source's (group, class) block, else over all.
    * Features: Gaussian noise plus a class centroid of norm ``feature_signal`` on every column and a
      group centroid of norm ``feature_signal / 2`` on the first half of the columns; when
      ``sens_in_features`` the last column is the group code (as in the paper's datasets, which keep the
      sensitive attribute as a feature). All columns are min-max scaled to ``[-1, 1]``.
    * Split: :func:`paper_split` with ``seed`` and ``train_per_class`` (default the paper's 500, i.e. half of
      each class up to 500, then a quarter each for validation and test). Every (group, class) pair then gets
      at least four nodes and one of them in test, by relabelling a few nodes of the largest pair and swapping
      split membership within a class.

    Args:
        num_nodes: number of nodes, at least ``8 * num_groups * num_classes``.
        num_features: feature columns, the group column included when ``sens_in_features``.
        num_groups: sensitive groups (2 for binary).
        num_classes: label classes.
        sens_label_corr: ``r`` in ``[0, 1]``, how strongly the label depends on the group.
        homophily: in ``[0, 1]``, the share of edges drawn inside a (group, class) block.
        avg_degree: mean degree (before duplicates are merged), ``> 0``.
        feature_signal: norm of the class centroids, ``>= 0``.
        sens_in_features: append the group code as the last feature column.
        seed: the seed of everything, the split included.
        train_per_class: cap on training nodes per class (``None``: 500).
        name: the graph's name.

    Returns:
        A validated graph.

    Raises:
        ConfigError: an argument is out of range.
    """
    _check_sizes(num_nodes, num_features, num_groups, num_classes, sens_in_features)
    _check_ranges(sens_label_corr, homophily, avg_degree, feature_signal)
    rng = np.random.default_rng(seed)
    sens, y = _groups_and_labels(num_nodes, num_groups, num_classes, sens_label_corr, rng)
    parts = _split(sens, y, seed, train_per_class, num_groups, num_classes, rng)
    edges = _edges(sens * num_classes + y, num_nodes, homophily, avg_degree, rng)
    x, names = _features(sens, y, num_features, num_groups, num_classes, feature_signal, sens_in_features, rng)
    return Graph.build(x, edges, y, sens, *parts, feature_names=names, name=name)


def _split(
    sens: np.ndarray, y: np.ndarray, seed: int, cap: int | None, num_g: int, num_c: int, rng: np.random.Generator
) -> list[np.ndarray]:
    """:func:`paper_split` with ``seed`` and ``cap`` training nodes per class (``None``: the paper's), then
    :func:`_cover_test`."""
    per_class = PAPER_TRAIN_PER_CLASS if cap is None else cap
    parts = [t.numpy() for t in paper_split(y, seed=seed, train_per_class=per_class)]
    return _cover_test(parts, sens, y, num_g, num_c, rng)


def _groups_and_labels(
    n: int, num_g: int, num_c: int, corr: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Each node's group (``P(g)`` proportional to ``1 / (1 + g)``) and label (its group's favoured class with
    probability ``corr`` more), then :func:`_fill_cells`."""
    weights = 1.0 / (1.0 + np.arange(num_g))
    sens = rng.choice(num_g, size=n, p=weights / weights.sum())
    probs = np.full((num_g, num_c), (1.0 - corr) / num_c)
    probs[np.arange(num_g), (num_c - 1 - np.arange(num_g)) % num_c] += corr
    cum = np.cumsum(probs, axis=1)[sens]
    y = np.minimum((rng.random(n)[:, None] > cum).sum(axis=1), num_c - 1)
    return _fill_cells(sens, y, num_g, num_c, rng)


def _check_sizes(n: int, d: int, g: int, c: int, sens_in: bool) -> None:
    if g < 2 or c < 2:
        raise ConfigError(f"num_groups and num_classes must be >= 2, got {g} and {c}")
    if n < 8 * g * c:
        raise ConfigError(f"num_nodes must be >= 8 * num_groups * num_classes = {8 * g * c}, got {n}")
    if d < (2 if sens_in else 1):
        raise ConfigError(f"num_features must be >= {2 if sens_in else 1}, got {d}")


def _check_ranges(corr: float, hom: float, deg: float, signal: float) -> None:
    for label, value in (("sens_label_corr", corr), ("homophily", hom)):
        if not 0.0 <= value <= 1.0:
            raise ConfigError(f"{label} must be in [0, 1], got {value}")
    if not deg > 0 or not np.isfinite(deg):
        raise ConfigError(f"avg_degree must be > 0, got {deg}")
    if not signal >= 0 or not np.isfinite(signal):
        raise ConfigError(f"feature_signal must be >= 0, got {signal}")


def _fill_cells(
    sens: np.ndarray, y: np.ndarray, num_g: int, num_c: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Relabel a few nodes of the largest (group, class) cell so that every cell has MIN_PER_CELL nodes."""
    sens, y = sens.copy(), y.copy()
    for cell in range(num_g * num_c):
        counts = np.bincount(sens * num_c + y, minlength=num_g * num_c)
        short = MIN_PER_CELL - counts[cell]
        if short <= 0:
            continue
        donors = np.flatnonzero(sens * num_c + y == counts.argmax())
        moved = rng.choice(donors, size=short, replace=False)
        sens[moved], y[moved] = cell // num_c, cell % num_c
    return sens, y


def _cover_test(
    parts: list[np.ndarray], sens: np.ndarray, y: np.ndarray, num_g: int, num_c: int, rng: np.random.Generator
) -> list[np.ndarray]:
    """Swap split membership within a class until every (group, class) cell has a test node."""
    train, val, test = (p.copy() for p in parts)
    for cell in range(num_g * num_c):
        g, c = divmod(cell, num_c)
        in_test = (sens[test] == g) & (y[test] == c)
        if in_test.any():
            continue
        test_cells = sens[test] * num_c + y[test]
        counts = np.bincount(test_cells, minlength=num_g * num_c)
        swappable = np.flatnonzero((y[test] == c) & (counts[test_cells] >= 2))
        outside = [(k, np.flatnonzero((sens[p] == g) & (y[p] == c))) for k, p in enumerate((train, val))]
        options = [(k, pos) for k, positions in outside for pos in positions.tolist()]
        if not swappable.size or not options:
            continue  # cannot happen with MIN_PER_CELL nodes per cell; Graph validation would report it
        k, pos = options[int(rng.integers(len(options)))]
        t = int(rng.choice(swappable))
        donor = (train, val)[k]
        donor[pos], test[t] = test[t], donor[pos]
    return [train, val, test]


def _edges(block: np.ndarray, n: int, homophily: float, avg_degree: float, rng: np.random.Generator) -> np.ndarray:
    """Undirected edges, ``[E, 2]``, about ``n * avg_degree / 2`` of them, homophilous by block."""
    target = max(1, round(n * avg_degree / 2))
    draws = int(target * 1.25) + 16
    activity = rng.lognormal(0.0, 0.6, size=n)
    src = rng.choice(n, size=draws, p=activity / activity.sum())
    order = np.argsort(block, kind="stable")
    sizes = np.bincount(block, minlength=int(block.max()) + 1)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    b = block[src]
    inside = order[starts[b] + (rng.random(draws) * sizes[b]).astype(np.int64)]
    anywhere = rng.integers(n, size=draws)
    dst = np.where(rng.random(draws) < homophily, inside, anywhere)
    lo, hi = np.minimum(src, dst), np.maximum(src, dst)
    keys = (lo * n + hi)[lo != hi]
    _, first = np.unique(keys, return_index=True)
    keys = keys[np.sort(first)][:target]
    return np.stack([keys // n, keys % n], axis=1)


def _features(
    sens: np.ndarray,
    y: np.ndarray,
    num_features: int,
    num_g: int,
    num_c: int,
    signal: float,
    sens_in_features: bool,
    rng: np.random.Generator,
) -> tuple[np.ndarray, list[str]]:
    free = num_features - int(sens_in_features)
    n = sens.shape[0]

    def centroids(k: int, norm: float) -> np.ndarray:
        raw = rng.normal(size=(k, free))
        out: np.ndarray = norm * raw / np.maximum(np.linalg.norm(raw, axis=1, keepdims=True), 1e-12)
        return out

    class_mu = centroids(num_c, signal)
    group_mu = centroids(num_g, signal / 2)
    group_mu[:, (free + 1) // 2 :] = 0.0
    x = rng.normal(size=(n, free)) + class_mu[y] + group_mu[sens]
    names = [f"x{i}" for i in range(free)]
    if sens_in_features:
        x = np.concatenate([x, sens[:, None].astype(np.float64)], axis=1)
        names.append("sens")
    return minmax_scale(x).astype(np.float32), names
