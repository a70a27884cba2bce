"""Issue 3 benchmark: RQ1 (speed) and RQ2 (faithfulness) of BIND's influence estimate.

RQ2 (run first): estimated vs actual ΔΓ (Γ, Γ_SP, Γ_EO), Pearson and Spearman, on (a) single training nodes
drawn at random and (b) the paper's node-set protocol (sets of growing size from the top of the harmful and
the helpful ranking; estimate = sum over the set), each against re-optimisation to convergence
(``mode="reoptimize"``, the ground truth of an influence function) and against retraining from scratch
(``mode="scratch"``). Ablations (no non-i.i.d. term, no direct term, neither), the LiSSA and CG solvers, and
the naive implementation are scored against the *same* deletions (for the node sets: the sets chosen by the
default estimate). GIN (``_gin.py``): per node and per set against Newton re-optimisation, and ``refine``.

RQ1 (run last, the timing-critical part): the default estimate's cold first call and its warm time (best of
``--repeats``), the naive implementation of the paper's algorithm in the same run (``naive_bind.py``), and
the mean time of one retraining from scratch and of one warm-started re-optimisation.

    python bench/bench_influence.py [--datasets income,recidivism] [--seeds 10] [--quick]
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import _common as C
import numpy as np
import torch
from _gin import gin_one_step, gin_refine, rq2_gin
from _scores import corr, fmt_corr, scores, timed_estimate, validation_record
from naive_bind import naive_estimate

from bind_core.codec import encode
from bind_core.data.graph import Graph
from bind_core.debiasing.validation import retrain_without, validate
from bind_core.influence import InfluenceResult, estimate
from bind_core.influence.arguments import InfluenceArguments
from bind_core.models.gnn import ModelConfig
from bind_core.training.fit import TrainConfig, TrainedModel, train

_COLD: dict[str, float] = {}


def rq2(name: str, graph: Graph, model: TrainedModel, args: argparse.Namespace, naive: dict | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    full, cold = timed_estimate(model, graph)
    _COLD.setdefault(name, cold)
    variants: dict[str, InfluenceResult | dict] = {
        "default": full,
        "no_non_iid": estimate(model, graph, InfluenceArguments(non_iid=False)),
        "no_direct": estimate(model, graph, InfluenceArguments(direct=False)),
        "no_non_iid_no_direct": estimate(model, graph, InfluenceArguments(non_iid=False, direct=False)),
        "direct_exact": estimate(model, graph, InfluenceArguments(direct_exact=True)),
        "cg": estimate(model, graph, InfluenceArguments(solver="cg")),
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
    out["stationarity"] = encode(model.stationarity)
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
        ours_paper_terms = estimate(model, graph, InfluenceArguments(direct=False))
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


def _rq2_row(model: str, key: str, v: dict[str, Any], *, with_baselines: bool) -> list[str]:
    """One RQ2 table row: the default estimate's correlations, then the ablations and baselines."""
    s = v["scores"]
    row = [model, f"{key} ({v['count']})", fmt_corr(s["default"]["gamma"]), fmt_corr(s["default"]["gamma"], "spearman")]
    row += [fmt_corr(s["default"]["gamma_sp"]), fmt_corr(s["default"]["gamma_eo"])]
    row += [fmt_corr(s["no_non_iid"]["gamma"]), fmt_corr(s["no_direct"]["gamma"])]
    if not with_baselines:
        return [*row, "–", "–", "–"]
    return [*row, fmt_corr(s["no_non_iid_no_direct"]["gamma"]), fmt_corr(s.get("lissa", {}).get("gamma")),
            fmt_corr(s.get("naive", {}).get("gamma"))]  # fmt: skip


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
