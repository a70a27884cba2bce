"""Correlations of estimated against actual ΔΓ, shared by the influence benchmarks (bench_influence, _gin)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch
from scipy.stats import pearsonr, spearmanr

from bind_core.codec import encode
from bind_core.data.graph import Graph
from bind_core.debiasing.validation import ValidationResult
from bind_core.influence import InfluenceResult, estimate
from bind_core.influence.arguments import InfluenceArguments
from bind_core.training.fit import TrainedModel

NAMES = ("gamma", "gamma_sp", "gamma_eo")


def corr(est: np.ndarray, act: np.ndarray) -> dict[str, float | None]:
    if est.size < 3 or np.std(est) == 0 or np.std(act) == 0:
        return {"pearson": None, "spearman": None}
    return {"pearson": float(pearsonr(est, act)[0]), "spearman": float(spearmanr(est, act)[0])}


def rescore(val: ValidationResult, graph: Graph, delta: torch.Tensor, sp: torch.Tensor, eo: torch.Tensor) -> dict:
    """Correlations of another estimate (aligned with ``train_idx``) against the deletions of ``val``."""
    where = {int(v): i for i, v in enumerate(graph.train_idx.tolist())}
    est_all = torch.stack([delta, sp, eo], dim=1).double()
    est = np.asarray([est_all[[where[n] for n in s]].sum(0).tolist() for s in val.sets])
    return {nm: corr(est[:, i], val.actual[:, i]) for i, nm in enumerate(NAMES)}


def scores(val: ValidationResult, graph: Graph, variants: dict[str, InfluenceResult | dict]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, r in variants.items():
        if isinstance(r, InfluenceResult):
            out[key] = rescore(val, graph, r.delta, r.delta_sp, r.delta_eo)
        else:  # naive: only Γ
            d = r["delta"]
            out[key] = {"gamma": rescore(val, graph, d, d, d)["gamma"]}
    return out


def timed_estimate(model: TrainedModel, graph: Graph, **kw: Any) -> tuple[InfluenceResult, float]:
    t0 = time.perf_counter()
    r = estimate(model, graph, InfluenceArguments(**kw))
    return r, time.perf_counter() - t0


def validation_record(val: ValidationResult, extra: dict[str, Any]) -> dict[str, Any]:
    d = encode(val.record())
    d["seconds_per_deletion"] = val.seconds / max(1, len(val.sets))
    d["set_sizes"] = [len(s) for s in val.sets]
    d["scores"] = extra
    return d


def fmt_corr(d: dict | None, key: str = "pearson") -> str:
    v = None if d is None else d.get(key)
    return "–" if v is None else f"{v:.4f}"
