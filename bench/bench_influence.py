"""Issue 3 benchmark: RQ1 (speed) and RQ2 (faithfulness) of BIND's influence estimate.

RQ2 (run first): estimated vs actual ΔΓ (Γ, Γ_SP, Γ_EO), Pearson and Spearman, on (a) single training nodes
drawn at random and (b) the paper's node-set protocol (sets of growing size from the top of the harmful and
the helpful ranking; estimate = sum over the set), each against re-optimisation to convergence
(``mode="reoptimize"``, the ground truth of an influence function) and against retraining from scratch
(``mode="scratch"``). Ablations (no non-i.i.d. term, no direct term, neither), the LiSSA and CG solvers, and
the naive implementation are scored against the *same* deletions (for the node sets: the sets chosen by the
default estimate). GIN: per node against re-optimisation.

RQ1 (run last, the timing-critical part): the default estimate's cold first call and its warm time (best of
``--repeats``), the naive implementation of the paper's algorithm in the same run (``naive_bind.py``), and
the mean time of one retraining from scratch and of one warm-started re-optimisation.

    python bench/bench_influence.py [--datasets income,recidivism] [--seeds 10] [--quick]
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import _common as C
import numpy as np
import torch
from naive_bind import naive_estimate
from scipy.stats import pearsonr, spearmanr

from bind_core.graph import Graph
from bind_core.hessian import dense_hessian
from bind_core.influence import InfluenceResult, estimate
from bind_core.influence.refinement import Refinement, refine_deletions
from bind_core.models import ModelConfig
from bind_core.training import TrainConfig, TrainedModel, _flat_objective, polish, train
from bind_core.validation import ValidationResult, gammas, retrain_without, validate

NAMES = ("gamma", "gamma_sp", "gamma_eo")
_COLD: dict[str, float] = {}


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
    r = estimate(model, graph, **kw)
    return r, time.perf_counter() - t0


def validation_record(val: ValidationResult, extra: dict[str, Any]) -> dict[str, Any]:
    d = val.to_dict()
    d["seconds_per_deletion"] = val.seconds / max(1, len(val.sets))
    d["set_sizes"] = [len(s) for s in val.sets]
    d["scores"] = extra
    return d


def rq2(name: str, graph: Graph, model: TrainedModel, args: argparse.Namespace, naive: dict | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    full, cold = timed_estimate(model, graph)
    _COLD.setdefault(name, cold)
    variants: dict[str, InfluenceResult | dict] = {
        "default": full,
        "no_non_iid": estimate(model, graph, non_iid=False),
        "no_direct": estimate(model, graph, direct=False),
        "no_non_iid_no_direct": estimate(model, graph, non_iid=False, direct=False),
        "direct_exact": estimate(model, graph, direct_exact=True),
        "cg": estimate(model, graph, solver="cg"),
    }
    if args.lissa_depth > 0:  # --lissa-depth 0 skips the (slow) LiSSA variant
        lissa, lissa_s = timed_estimate(model, graph, solver="lissa", lissa_depth=args.lissa_depth)
        variants["lissa"] = lissa
        out["lissa_seconds"] = lissa_s
        out["lissa_details"] = lissa.solve.details
    if naive is not None:
        variants["naive"] = naive
    out["agreement_with_default"] = {
        k: corr(full.delta.numpy(), (v.delta if isinstance(v, InfluenceResult) else v["delta"]).numpy())
        for k, v in variants.items()
        if k != "default"
    }
    out["stationarity"] = model.stationarity
    out["solve"] = full.solve.details
    plan = [
        ("sample", "reoptimize", {"sample": args.sample}),
        ("sets", "reoptimize", {"num_sets": args.num_sets}),
        ("sample", "scratch", {"sample": args.scratch_sample}),
        ("sets", "scratch", {"num_sets": args.scratch_num_sets}),
    ]
    for protocol, mode, kw in plan:
        if next(iter(kw.values())) <= 0:
            continue
        val = validate(model, graph, full, protocol=protocol, mode=mode, **kw)
        rec = validation_record(val, scores(val, graph, variants))
        out[f"{protocol}/{mode}"] = rec
        d = rec["scores"]["default"]
        print(
            f"  {name} {protocol}/{mode} ({len(val.sets)} deletions, {val.seconds:.0f}s): Pearson Γ "
            f"{d['gamma']['pearson']:.4f} SP {d['gamma_sp']['pearson']:.4f} EO {d['gamma_eo']['pearson']:.4f}; "
            f"no non-iid {rec['scores']['no_non_iid']['gamma']['pearson']:.4f}  [load {C.load_average():.1f}]",
            flush=True,
        )
    return out


def gin_ground_truth(
    model: TrainedModel,
    graph: Graph,
    influence: InfluenceResult,
    positions: list[list[int]],
    protocol: str,
    args: argparse.Namespace,
    newton_seconds: float = 0.0,
) -> ValidationResult:
    """Actual ΔΓ of deleting each set of training positions: warm start from θ̂ on G − S, then the polish (L-BFGS
    capped at ``--gin-reopt-lbfgs-iter``, then the Newton finish) to convergence, as ``validate(mode="reoptimize")``
    but with the GIN's iteration caps. Each deletion's stationarity is kept in ``extra``."""
    start = time.perf_counter()
    train_idx = graph.train_idx
    est_all = torch.stack([influence.delta, influence.delta_sp, influence.delta_eo], dim=1).double().cpu()
    before = gammas(model, graph)
    est, act, stat = [], [], []
    for pos in positions:
        nodes = train_idx[torch.tensor(pos, dtype=torch.long)]
        reduced, _ = graph.without_nodes(nodes)
        clone = TrainedModel(copy.deepcopy(model.module), model.model_config, model.train_config, {}, {})
        polish(
            clone,
            reduced,
            max_iter=args.gin_reopt_lbfgs_iter,
            newton_max_iter=args.gin_reopt_newton_iter,
            newton_max_seconds=newton_seconds or None,
        )
        after = gammas(clone, reduced)
        d_sp, d_eo = after[0] - before[0], after[1] - before[1]
        act.append([influence.lam * d_sp + (1 - influence.lam) * d_eo, d_sp, d_eo])
        est.append(est_all[torch.tensor(pos, dtype=torch.long)].sum(0).tolist())
        stat.append({k: v for k, v in clone.stationarity.items() if k != "polished"})
    return ValidationResult(
        protocol=protocol,
        mode="reoptimize",
        sets=[train_idx[torch.tensor(p, dtype=torch.long)].tolist() for p in positions],
        estimated=np.asarray(est),
        actual=np.asarray(act),
        lam=influence.lam,
        seconds=time.perf_counter() - start,
        extra={"deletion_stationarity": stat},
    )


def rq2_gin(
    name: str, graph: Graph, seed: int, args: argparse.Namespace, save: Callable[[dict], None] | None = None
) -> dict[str, Any]:
    """One-layer GIN: Adam, then the polish (L-BFGS + trust-region Newton finish) with the ``--gin-*`` caps;
    per-node and node-set correlation against re-optimisation, and the drift of re-optimising with nothing
    deleted (a control: if the model is not at a stationary point, the polish moves Γ by itself)."""
    t0 = time.perf_counter()
    if args.gin_load:  # a model saved by an earlier run's --gin-save (already polished)
        model = TrainedModel.load(f"{args.gin_load}_{name}")
        model.module.to(args.device)
        adam_s = math.nan
    else:
        model = train(graph, TrainConfig(seed=seed, polish=False), ModelConfig(arch="gin"), device=args.device)
        adam_s = time.perf_counter() - t0
        polish(
            model,
            graph,
            max_iter=args.gin_lbfgs_iter,
            newton_max_iter=args.gin_newton_iter,
            newton_max_seconds=args.gin_newton_seconds or None,
        )
    train_s = time.perf_counter() - t0
    print(f"  {name} GIN ready in {train_s:.0f}s (Adam {adam_s:.0f}s): {model.stationarity}", flush=True)
    on = model
    try:
        full, est_s = timed_estimate(on, graph)
    except Exception as exc:  # an estimate that fails on an accelerator: estimate a CPU copy instead
        print(f"  estimate on {model.device} failed ({exc!r}); estimating a CPU copy", flush=True)
        cpu = copy.deepcopy(model.module).cpu()
        on = TrainedModel(cpu, model.model_config, model.train_config, model.history, model.stationarity)
        full, est_s = timed_estimate(on, graph)
    variants: dict[str, InfluenceResult | dict] = {
        "default": full,
        "no_non_iid": estimate(on, graph, non_iid=False),
        "no_direct": estimate(on, graph, direct=False),
        # the exact solver drops eigenvalues below rtol·max|λ|; GIN's max|λ| (~10⁵ on Income) makes the default
        # 1e-6 discard real curvature directions, so score a tighter threshold too
        "rtol_1e-12": estimate(on, graph, rtol=1e-12),
    }
    variant_solves = {k: v.solve.details for k, v in variants.items() if isinstance(v, InfluenceResult)}
    if args.gin_save:
        model.save(f"{args.gin_save}_{name}")
    m = int(graph.train_idx.numel())
    out: dict[str, Any] = {
        "train_seconds": train_s,
        "adam_seconds": adam_s,
        "estimate_seconds": est_s,
        "timings": full.timings,
        "parameters": model.num_parameters,
        "stationarity": model.stationarity,
        "solve": full.solve.details,
        "variant_solves": variant_solves,
        "device": str(model.device),
        "estimate_device": str(on.device),
        "loaded_from": args.gin_load or None,
    }
    te = graph.test_idx
    pred = model.predict_proba(graph, te).argmax(1)
    out["test_accuracy"] = float((pred == graph.y[te]).double().mean())
    control = gin_ground_truth(model, graph, full, [[]], "control", args, args.gin_reopt_newton_seconds)
    out["drift_no_deletion"] = control.actual[0].tolist()
    out["drift_stationarity"] = control.extra["deletion_stationarity"][0]
    caps = {
        "sample": args.gin_reopt_newton_seconds,
        "sets": args.gin_sets_newton_seconds or args.gin_reopt_newton_seconds,
    }
    plan: list[tuple[str, list[list[int]]]] = []
    if args.gin_sample > 0:
        picks = torch.randperm(m, generator=torch.Generator().manual_seed(0))[: min(args.gin_sample, m)]
        plan.append(("sample", [[int(p)] for p in picks]))
    if args.gin_num_sets > 0:
        order = torch.argsort(full.delta.cpu())
        top = max(1, int(0.1 * m))
        sizes = sorted({max(1, round(top * (i + 1) / args.gin_num_sets)) for i in range(args.gin_num_sets)})
        plan.append(("sets", [order[:k].tolist() for k in sizes] + [order.flip(0)[:k].tolist() for k in sizes]))
    for protocol, positions in plan:
        val = gin_ground_truth(model, graph, full, positions, protocol, args, caps[protocol])
        rec = validation_record(val, scores(val, graph, variants))
        rec["actual_std"] = val.actual.std(axis=0).tolist()
        stat = val.extra["deletion_stationarity"]
        rec["deletions_converged"] = sum(bool(s.get("converged")) for s in stat)
        rec["max_deletion_grad_norm"] = max(float(s["grad_norm"]) for s in stat)
        if args.gin_refine_iter > 0:
            converged = np.asarray([bool(st.get("converged")) for st in stat])
            rec["refined"] = refined_scores(on, graph, val.actual, positions, args, converged)
        out[f"{protocol}/reoptimize"] = rec
        if save is not None:
            save(out)
        d = rec["scores"]["default"]
        print(
            f"  {name} GIN {protocol}/reoptimize ({len(val.sets)} deletions, {val.seconds:.0f}s, "
            f"{rec['deletions_converged']} converged): Pearson Γ {_p(d['gamma'])} "
            f"(Spearman {_p(d['gamma'], 'spearman')}) SP {_p(d['gamma_sp'])} "
            f"EO {_p(d['gamma_eo'])}; no non-iid {_p(rec['scores']['no_non_iid']['gamma'])}",
            flush=True,
        )
        for key, r in rec.get("refined", {}).items():
            _print_refined(name, protocol, key, r)
    return out


def _print_refined(name: str, protocol: str, key: str, r: dict[str, Any]) -> None:
    c = r["on_converged_ground_truth"]
    print(
        f"  {name} GIN {protocol} refined ({key}, {r['converged']}/{r['deletions']} converged, "
        f"{r['hessians']} Hessians, {r['seconds']:.0f}s): Pearson Γ {_p(r['gamma'])} "
        f"(Spearman {_p(r['gamma'], 'spearman')}) SP {_p(r['gamma_sp'])} EO {_p(r['gamma_eo'])}; on the "
        f"{c['count']} converged ground truths: Γ {_p(c['gamma'])} SP {_p(c['gamma_sp'])} EO {_p(c['gamma_eo'])}",
        flush=True,
    )


def _refinement_scores(
    ref: Refinement, actual: np.ndarray, converged: np.ndarray, est: np.ndarray | None = None
) -> dict[str, Any]:
    """Correlations of refined ΔΓ (``est``, default the refinement's own per deletion) with ``actual``, over all
    deletions and (``on_converged_ground_truth``) over those whose ground truth reached a stationary point."""
    if est is None:
        est = torch.cat([ref.delta.unsqueeze(1), ref.refined], dim=1).numpy()
    out: dict[str, Any] = ref.record()
    out.update({nm: corr(est[:, i], actual[:, i]) for i, nm in enumerate(NAMES)})
    out["on_converged_ground_truth"] = {
        "count": int(converged.sum()),
        **{nm: corr(est[converged, i], actual[converged, i]) for i, nm in enumerate(NAMES)},
    }
    out["estimated"] = est.tolist()
    return out


def refined_scores(
    model: TrainedModel,
    graph: Graph,
    actual: np.ndarray,
    positions: list[list[int]],
    args: argparse.Namespace,
    converged: np.ndarray,
) -> dict[str, Any]:
    """``refine`` (bind_core.influence.refinement) scored against the same deletions (``actual``: ``[k, 3]``):
    each deletion re-optimised from θ̂ with the Hessian there frozen (``deletion``), and for node sets also the
    sum of the members' refined per-node values (``per_node_sum``, the additive estimate of Theorem 3)."""
    kw = {"max_iter": args.gin_refine_iter, "refresh_after": args.gin_refine_refresh}
    ref = refine_deletions(model, graph, positions, **kw)
    out = {"deletion": _refinement_scores(ref, actual, converged)}
    if args.gin_refine_sum and any(len(p) > 1 for p in positions):
        members = sorted({q for p in positions for q in p})
        single = refine_deletions(model, graph, [[q] for q in members], **kw)
        by_pos = dict(zip(members, torch.cat([single.delta.unsqueeze(1), single.refined], dim=1).tolist(), strict=True))
        summed = np.asarray([np.sum([by_pos[q] for q in p], axis=0) if p else np.zeros(3) for p in positions])
        out["per_node_sum"] = _refinement_scores(single, actual, converged, summed)
    return out


def gin_refine(name: str, graph: Graph, seed: int, args: argparse.Namespace) -> dict[str, Any]:
    """Score ``refine`` (``--gin-refine-iter``, ``--gin-refine-refresh``) against the ground truth of a saved GIN
    run (``--gin-load`` for the model, ``--gin-json`` for its deletions and actual ΔΓ), without recomputing it."""
    model = TrainedModel.load(f"{args.gin_load}_{name}")
    saved = json.loads(Path(args.gin_json.format(name=name)).read_text())["datasets"][name][str(seed)]["gin"]
    where = {int(v): i for i, v in enumerate(graph.train_idx.tolist())}
    out: dict[str, Any] = {"settings": {"max_iter": args.gin_refine_iter, "refresh_after": args.gin_refine_refresh}}
    for protocol in args.gin_refine_protocols.split(","):
        rec = saved.get(f"{protocol}/reoptimize")
        if rec is None:
            continue
        positions = [[where[int(v)] for v in p["nodes"]] for p in rec["points"]]
        actual = np.asarray([p["actual"] for p in rec["points"]])
        converged = np.asarray([bool(st.get("converged")) for st in rec["deletion_stationarity"]])
        out[protocol] = refined_scores(model, graph, actual, positions, args, converged)
        out[protocol]["ground_truth_converged"] = rec.get("deletions_converged")
        for key, r in out[protocol].items():
            if isinstance(r, dict) and "gamma" in r:
                _print_refined(name, protocol, key, r)
    return out


def gin_one_step(name: str, graph: Graph, seed: int, args: argparse.Namespace) -> dict[str, Any]:
    """Diagnostic for a saved GIN run (``--gin-save`` and its JSON): for the first ``--gin-one-step`` sampled nodes,
    Γ after one exact Newton step from θ̂ on G − v (the pseudo-inverse of the reduced graph's Hessian, with
    eigenvalues below 10⁻⁶·max|λ| dropped and negative ones flipped, as the exact solver does), next to the
    estimate and the re-optimised ground truth. Where the estimate matches the one-step value but not the
    ground truth, the gap is the objective's nonlinearity, not the estimator's approximations."""
    model = TrainedModel.load(f"{args.gin_save}_{name}")
    model.module.double()
    saved = json.loads(Path(args.gin_json.format(name=name)).read_text())
    points = saved["datasets"][name][str(seed)]["gin"]["sample/reoptimize"]["points"][: args.gin_one_step]
    before = gammas(model, graph)
    rows = []
    for point in points:
        (v,) = point["nodes"]
        reduced, _ = graph.without_nodes(torch.tensor([v]))
        module = copy.deepcopy(model.module)
        objective, theta, write_back = _flat_objective(
            module, module.prepare(reduced, torch.float64), reduced, model.train_config.weight_decay
        )
        g = torch.func.grad(objective)(theta)
        lam, vec = torch.linalg.eigh(dense_hessian(objective, theta))
        keep = lam.abs() > 1e-6 * lam.abs().max()
        step = -(vec[:, keep] @ ((vec[:, keep].T @ g) / lam[keep].abs()))
        write_back(theta + step)
        after = gammas(TrainedModel(module, model.model_config, model.train_config), reduced)
        one = 0.5 * (after[0] - before[0]) + 0.5 * (after[1] - before[1])
        rows.append(
            {
                "node": v,
                "estimated": point["estimated"][0],
                "one_step": one,
                "actual": point["actual"][0],
                "step_norm": float(step.norm()),
            }
        )
        print(
            f"  {name} node {v}: estimate {rows[-1]['estimated']:+.5f}  one Newton step {one:+.5f}  "
            f"re-optimised {rows[-1]['actual']:+.5f}  |step| {rows[-1]['step_norm']:.3f}",
            flush=True,
        )
    est, one, act = (np.asarray([r[k] for r in rows]) for k in ("estimated", "one_step", "actual"))
    out = {
        "points": rows,
        "estimate_vs_one_step": corr(est, one),
        "one_step_vs_actual": corr(one, act),
        "estimate_vs_actual": corr(est, act),
    }
    print(
        f"  {name} Pearson: estimate~one step {_p(out['estimate_vs_one_step'])}, one step~re-optimised "
        f"{_p(out['one_step_vs_actual'])}, estimate~re-optimised {_p(out['estimate_vs_actual'])}",
        flush=True,
    )
    return out


def rq1(name: str, graph: Graph, model: TrainedModel, args: argparse.Namespace) -> dict[str, Any]:
    m = int(graph.train_idx.numel())
    out: dict[str, Any] = {"train_nodes": m, "load_before": C.load_average()}
    if name not in _COLD:
        _COLD[name] = timed_estimate(model, graph)[1]
    out["cold_first_call_seconds"] = _COLD[name]
    estimate(model, graph)  # warm-up
    warm = []
    for _ in range(args.repeats):
        r, s = timed_estimate(model, graph)
        warm.append({"seconds": s, "timings": r.timings, "load": C.load_average()})
    best = min(warm, key=lambda w: w["seconds"])
    out["warm_runs"] = warm
    out["warm_seconds"] = best["seconds"]
    out["warm_breakdown"] = best["timings"]
    no_extra = min(timed_estimate(model, graph, non_iid=False, direct=False)[1] for _ in range(args.repeats))
    out["warm_seconds_iid_only"] = no_extra

    gen = torch.Generator().manual_seed(1)
    picks = graph.train_idx[torch.randperm(m, generator=gen)[: args.retrain_runs]].tolist()
    scratch, reopt = [], []
    for v in picks:
        t0 = time.perf_counter()
        retrain_without(model, graph, [v], "scratch")
        scratch.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        retrain_without(model, graph, [v], "reoptimize")
        reopt.append(time.perf_counter() - t0)
    out["scratch_seconds"] = scratch
    out["reoptimize_seconds"] = reopt
    out["scratch_mean"] = float(np.mean(scratch))
    out["reoptimize_mean"] = float(np.mean(reopt))

    if args.naive_nodes != 0:
        limit = None if args.naive_nodes < 0 else args.naive_nodes
        t0 = time.perf_counter()
        nv = naive_estimate(model, graph, depth=args.naive_depth, limit=limit)
        wall = time.perf_counter() - t0
        done = m if limit is None else min(limit, m)
        per_node = nv.timings["per_node_gradients"] + nv.timings["non_iid"]
        projected = nv.timings["lissa"] * (5000 / args.naive_depth) + per_node * m / done
        out["naive"] = {
            "nodes_timed": done,
            "depth": args.naive_depth,
            "seconds": wall,
            "timings": nv.timings,
            "projected_full_seconds": projected,
            "extrapolated": done < m or args.naive_depth != 5000,
            "load": C.load_average(),
        }
        out["speedup_vs_naive"] = projected / out["warm_seconds"]
        ours = estimate(model, graph)
        ours_paper_terms = estimate(model, graph, direct=False)
        out["naive"]["pearson_vs_ours"] = corr((nv.delta + nv.direct)[:done].numpy(), ours.delta[:done].numpy())
        out["naive"]["pearson_paper_terms_vs_ours_no_direct"] = corr(
            nv.delta[:done].numpy(), ours_paper_terms.delta[:done].numpy()
        )
        out["naive"]["lissa_scale"] = nv.lissa["scale"]
    out["speedup_vs_retraining_per_node"] = out["scratch_mean"] * m / out["warm_seconds"]
    out["speedup_vs_one_retraining"] = out["scratch_mean"] / out["warm_seconds"]
    out["speedup_vs_reoptimize_per_node"] = out["reoptimize_mean"] * m / out["warm_seconds"]
    out["load_after"] = C.load_average()
    print(
        f"  {name} RQ1: ours cold {out['cold_first_call_seconds']:.2f}s, warm {out['warm_seconds']:.3f}s "
        f"(best of {args.repeats}: {[round(w['seconds'], 3) for w in warm]}); scratch retraining "
        f"{out['scratch_mean']:.2f}s, re-optimisation {out['reoptimize_mean']:.2f}s"
        + (
            f"; naive {out['naive']['seconds']:.1f}s (projected full {out['naive']['projected_full_seconds']:.0f}s)"
            if "naive" in out
            else ""
        )
        + f"  [load {out['load_before']:.1f} → {out['load_after']:.1f}]",
        flush=True,
    )
    return out


def naive_for_rq2(model: TrainedModel, graph: Graph, args: argparse.Namespace) -> dict | None:
    """The naive estimate over all training nodes for the correlation (only when RQ1 runs it in full)."""
    if args.naive_nodes >= 0:
        return None
    nv = naive_estimate(model, graph, depth=args.naive_depth)
    return {"delta": nv.delta + nv.direct, "delta_paper_terms": nv.delta, "timings": nv.timings}


def main() -> None:
    p = C.parser("RQ1 speed and RQ2 faithfulness of BIND's influence estimate", seeds="10")
    p.add_argument(
        "--parts", default="rq2,gin,rq1", help="which parts to run (rq2, gin, rq1, gin_one_step, gin_refine)"
    )
    p.add_argument("--sample", type=int, default=50, help="random training nodes, per-node vs reoptimize")
    p.add_argument("--num-sets", type=int, default=10, help="node sets per direction, vs reoptimize")
    p.add_argument("--scratch-sample", type=int, default=20, help="random nodes vs retraining from scratch")
    p.add_argument("--scratch-num-sets", type=int, default=5, help="node sets per direction vs scratch")
    p.add_argument("--gin-sample", type=int, default=50, help="random nodes for GIN vs reoptimize")
    p.add_argument("--gin-num-sets", type=int, default=10, help="GIN node sets per direction vs reoptimize")
    p.add_argument("--gin-lbfgs-iter", type=int, default=1000, help="GIN: L-BFGS iterations of the polish")
    p.add_argument("--gin-newton-iter", type=int, default=200, help="GIN: Newton iterations of the polish finish")
    p.add_argument(
        "--gin-reopt-lbfgs-iter", type=int, default=1000, help="GIN ground truth: L-BFGS iterations before Newton"
    )
    p.add_argument("--gin-newton-seconds", type=float, default=0, help="GIN: time cap of the Newton finish (0: none)")
    p.add_argument("--gin-reopt-newton-iter", type=int, default=200, help="GIN ground truth: Newton iterations")
    p.add_argument("--gin-reopt-newton-seconds", type=float, default=0, help="GIN ground truth: Newton time cap")
    p.add_argument("--gin-sets-newton-seconds", type=float, default=0, help="the same for node sets (0: as nodes)")
    p.add_argument("--gin-load", default="", help="load the polished GIN from <this>_<dataset>/ instead of training")
    p.add_argument("--gin-refine-iter", type=int, default=300, help="GIN: refine's steps per deletion (0: skip)")
    p.add_argument("--gin-refine-refresh", type=int, default=20, help="GIN: refine's refresh_after (0: never)")
    p.add_argument("--gin-refine-protocols", default="sample,sets", help="gin_refine: the protocols to score")
    p.add_argument(
        "--no-gin-refine-sum", dest="gin_refine_sum", action="store_false", help="sets: skip the per-node-sum score"
    )
    p.add_argument("--gin-save", default="", help="save the polished GIN to <this>_<dataset>/ (empty: do not)")
    p.add_argument("--gin-one-step", type=int, default=15, help="gin_one_step: sampled nodes to check")
    p.add_argument("--gin-json", default="bench/out/gin_{name}.json", help="gin_one_step: the GIN run's JSON")
    p.add_argument("--device", default="cpu", help="torch device for the GIN part (cpu, cuda)")
    p.add_argument("--lissa-depth", type=int, default=5000, help="depth of our LiSSA solver variant (0: skip it)")
    p.add_argument("--naive-nodes", type=int, default=-1, help="training nodes the naive run covers (-1: all)")
    p.add_argument("--naive-depth", type=int, default=5000, help="LiSSA depth of the naive run")
    p.add_argument("--retrain-runs", type=int, default=3, help="retrainings from scratch to time")
    p.add_argument("--repeats", type=int, default=3, help="timed warm estimates (best is reported)")
    p.add_argument("--quick", action="store_true", help="a small, fast subset")
    args = p.parse_args()
    if args.quick:
        args.sample, args.num_sets, args.scratch_sample, args.scratch_num_sets = 10, 3, 0, 0
        args.gin_sample, args.lissa_depth, args.naive_nodes, args.naive_depth = 5, 200, 10, 50
        args.gin_num_sets = 2
        args.retrain_runs, args.repeats = 1, 1
    C.setup(args)
    parts = set(args.parts.split(","))
    result: dict[str, Any] = {"machine": C.machine(), "args": vars(args), "datasets": {}}
    graphs = C.datasets(args)
    models: dict[tuple[str, int], TrainedModel] = {}
    for name, graph in graphs:
        for seed in C.seeds(args):
            if parts & {"rq1", "rq2"}:
                models[name, seed] = train(graph, TrainConfig(seed=seed), ModelConfig())
            result["datasets"].setdefault(name, {})[str(seed)] = {}
    if "rq2" in parts:
        for name, graph in graphs:
            for seed in C.seeds(args):
                print(f"RQ2 {name} seed {seed}", flush=True)
                naive = naive_for_rq2(models[name, seed], graph, args) if "rq1" in parts else None
                rec = rq2(name, graph, models[name, seed], args, naive)
                if naive is not None:
                    rec["naive_full_timings"] = naive["timings"]
                result["datasets"][name][str(seed)]["rq2"] = rec
                C.write_json("bench_influence", result, args.out)
    if "gin" in parts:
        for name, graph in graphs:
            for seed in C.seeds(args):
                print(f"RQ2 GIN {name} seed {seed}", flush=True)
                slot = result["datasets"][name][str(seed)]

                def save(partial: dict, slot: dict = slot) -> None:
                    slot["gin"] = partial
                    C.write_json("bench_influence", result, args.out)

                slot["gin"] = rq2_gin(name, graph, seed, args, save)
                C.write_json("bench_influence", result, args.out)
    if "gin_refine" in parts:
        for name, graph in graphs:
            print(f"GIN refine vs a saved ground truth {name}", flush=True)
            for seed in C.seeds(args):
                result["datasets"][name][str(seed)]["gin_refine"] = gin_refine(name, graph, seed, args)
            C.write_json("bench_influence", result, args.out)
    if "gin_one_step" in parts:
        for name, graph in graphs:
            print(f"GIN one-step diagnostic {name}", flush=True)
            for seed in C.seeds(args):
                result["datasets"][name][str(seed)]["gin_one_step"] = gin_one_step(name, graph, seed, args)
            C.write_json("bench_influence", result, args.out)
    if "rq1" in parts:
        for name, graph in graphs:
            for seed in C.seeds(args):
                print(f"RQ1 {name} seed {seed}", flush=True)
                result["datasets"][name][str(seed)]["rq1"] = rq1(name, graph, models[name, seed], args)
                C.write_json("bench_influence", result, args.out)
    print_tables(result)
    result["machine_end"] = C.machine()
    C.write_json("bench_influence", result, args.out)


def _p(d: dict | None, key: str = "pearson") -> str:
    v = None if d is None else d.get(key)
    return "–" if v is None else f"{v:.4f}"


def _rq2_row(model: str, key: str, v: dict[str, Any], *, with_baselines: bool) -> list[str]:
    """One RQ2 table row: the default estimate's correlations, then the ablations and baselines."""
    s = v["scores"]
    row = [model, f"{key} ({v['count']})", _p(s["default"]["gamma"]), _p(s["default"]["gamma"], "spearman")]
    row += [_p(s["default"]["gamma_sp"]), _p(s["default"]["gamma_eo"])]
    row += [_p(s["no_non_iid"]["gamma"]), _p(s["no_direct"]["gamma"])]
    if not with_baselines:
        return [*row, "–", "–", "–"]
    return [*row, _p(s["no_non_iid_no_direct"]["gamma"]), _p(s.get("lissa", {}).get("gamma")),
            _p(s.get("naive", {}).get("gamma"))]  # fmt: skip


def print_tables(result: dict[str, Any]) -> None:
    rows1, rows2 = [], []
    for name, by_seed in result["datasets"].items():
        for seed, rec in by_seed.items():
            if "rq1" in rec:
                r = rec["rq1"]
                naive = r.get("naive", {})
                rows1.append(
                    [
                        f"{name} s{seed}",
                        f"{r['cold_first_call_seconds']:.2f}",
                        f"{r['warm_seconds']:.3f}",
                        f"{naive.get('projected_full_seconds', float('nan')):.0f}"
                        + (" (extrap.)" if naive.get("extrapolated") else ""),
                        f"{r.get('speedup_vs_naive', float('nan')):.0f}×",
                        f"{r['scratch_mean']:.2f}",
                        f"{r['speedup_vs_retraining_per_node']:.0f}×",
                        f"{r['reoptimize_mean']:.2f}",
                    ]
                )
            if "rq2" in rec:
                for key in ("sample/reoptimize", "sets/reoptimize", "sample/scratch", "sets/scratch"):
                    if key in rec["rq2"]:
                        rows2.append(_rq2_row(f"{name} s{seed} GCN", key, rec["rq2"][key], with_baselines=True))
            for key in ("sample/reoptimize", "sets/reoptimize"):
                if key in rec.get("gin", {}):
                    rows2.append(_rq2_row(f"{name} s{seed} GIN", key, rec["gin"][key], with_baselines=False))
    if rows1:
        print("\n## RQ1: seconds for all training nodes (ours: warm, best of repeats)\n")
        heads = ["run", "ours cold", "ours warm", "naive", "vs naive", "scratch 1×", "vs retrain/node", "reopt 1×"]
        print(C.table(heads, rows1))
    if rows2:
        print("\n## RQ2: Pearson (Spearman) of estimated vs actual ΔΓ\n")
        heads = [
            "model",
            "protocol/ground truth (n)",
            "Γ",
            "Γ Spearman",
            "Γ_SP",
            "Γ_EO",
            "Γ no non-iid",
            "Γ no direct",
            "Γ neither",
            "Γ LiSSA",
            "Γ naive",
        ]
        print(C.table(heads, rows2))


if __name__ == "__main__":
    main()
