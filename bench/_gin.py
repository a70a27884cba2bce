"""The GIN parts of bench_influence: a one-layer GIN's estimates against Newton re-optimisation (``gin``), the
refined estimates scored against a saved run's ground truth (``gin_refine``), and the one-Newton-step diagnostic
(``gin_one_step``). See docs/RESULTS.md, "RQ2", GIN."""

from __future__ import annotations

import argparse
import copy
import json
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from _scores import NAMES, corr, fmt_corr, scores, timed_estimate, validation_record

from bind_core.codec import encode
from bind_core.data.graph import Graph
from bind_core.debiasing.validation import ValidationResult, gammas
from bind_core.influence import InfluenceResult, estimate
from bind_core.influence.arguments import InfluenceArguments
from bind_core.influence.refinement import Refinement, refine_deletions
from bind_core.models.gnn import ModelConfig
from bind_core.training.fit import TrainConfig, TrainedModel, train
from bind_core.training.hessian import dense_hessian
from bind_core.training.objective import flat_objective
from bind_core.training.polish import polish


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
        clone = TrainedModel(copy.deepcopy(model.module), model.model_config, model.train_config)
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
        stat.append({k: v for k, v in encode(clone.stationarity).items() if k != "polished"})
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
    print(f"  {name} GIN ready in {train_s:.0f}s (Adam {adam_s:.0f}s): {encode(model.stationarity)}", flush=True)
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
        "no_non_iid": estimate(on, graph, InfluenceArguments(non_iid=False)),
        "no_direct": estimate(on, graph, InfluenceArguments(direct=False)),
        # the exact solver drops eigenvalues below rtol·max|λ|; GIN's max|λ| (~10⁵ on Income) makes the default
        # 1e-6 discard real curvature directions, so score a tighter threshold too
        "rtol_1e-12": estimate(on, graph, InfluenceArguments(rtol=1e-12)),
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
        "stationarity": encode(model.stationarity),
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
            f"{rec['deletions_converged']} converged): Pearson Γ {fmt_corr(d['gamma'])} "
            f"(Spearman {fmt_corr(d['gamma'], 'spearman')}) SP {fmt_corr(d['gamma_sp'])} "
            f"EO {fmt_corr(d['gamma_eo'])}; no non-iid {fmt_corr(rec['scores']['no_non_iid']['gamma'])}",
            flush=True,
        )
        for key, r in rec.get("refined", {}).items():
            _print_refined(name, protocol, key, r)
    return out


def _print_refined(name: str, protocol: str, key: str, r: dict[str, Any]) -> None:
    def parts(d: dict[str, Any]) -> str:
        return f"Γ {fmt_corr(d['gamma'])} SP {fmt_corr(d['gamma_sp'])} EO {fmt_corr(d['gamma_eo'])}"

    c = r["on_converged_ground_truth"]
    print(
        f"  {name} GIN {protocol} refined ({key}, {r['converged']}/{r['deletions']} converged, "
        f"{r['hessians']} Hessians, {r['seconds']:.0f}s): Pearson {parts(r)} (Γ Spearman "
        f"{fmt_corr(r['gamma'], 'spearman')}); on the {c['count']} converged ground truths: {parts(c)}",
        flush=True,
    )


def _refinement_scores(
    ref: Refinement, actual: np.ndarray, converged: np.ndarray, est: np.ndarray | None = None
) -> dict[str, Any]:
    """Correlations of refined ΔΓ (``est``, default the refinement's own per deletion) with ``actual``, over all
    deletions and (``on_converged_ground_truth``) over those whose ground truth reached a stationary point."""
    if est is None:
        est = torch.cat([ref.delta.unsqueeze(1), ref.refined], dim=1).numpy()
    out: dict[str, Any] = encode(ref.record())
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
        objective, theta, write_back = flat_objective(
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
        f"  {name} Pearson: estimate~one step {fmt_corr(out['estimate_vs_one_step'])}, one step~re-optimised "
        f"{fmt_corr(out['one_step_vs_actual'])}, estimate~re-optimised {fmt_corr(out['estimate_vs_actual'])}",
        flush=True,
    )
    return out
