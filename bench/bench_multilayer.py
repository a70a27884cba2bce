"""Multi-layer and attention models: convergence, per-node faithfulness, and debiasing against chance.

For each graph (the paper's datasets, or a synthetic one), each model (two-layer GCN and SAGE, one-layer GAT and
GIN; ``--models``) and each training seed:

* convergence of the polish (L-BFGS, then the Newton finish): converged, largest gradient entry, seconds;
* the audit's estimate (``estimator="auto"``: the damped-step estimate for these models, the influence function for
  a one-layer GIN) against the proximal re-optimisation (the question it answers) and against unconstrained
  re-optimisation, per node on ``--sample`` random training nodes: Pearson, Spearman, slope;
* with ``--node-sets``, for the first seed's model: harmful and helpful sets (1/5/10% of each end), each set's own
  estimate against the mean effect of retraining from scratch without it over ``--debias-seeds``, with the noise
  floor; the sign should be right wherever the effect exceeds twice the floor;
* with ``--debias``, for the first seed's model: each budget's harmful set retrained from scratch with every
  ``--debias-seeds`` seed, against random sets of the same size (:mod:`bind_core.debiasing.chance`): selected and random
  effects, noise floor, advantage, verdict.

    python bench/bench_multilayer.py --synthetic 1500 --seeds 1 --sample 40
    python bench/bench_multilayer.py --datasets income,recidivism --seeds 1,10,100 --debias
"""

from __future__ import annotations

import dataclasses
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from scipy.stats import pearsonr, spearmanr

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import datasets, machine, parser, seeds, setup, table, write_json

from bind_core.codec import encode
from bind_core.data.datasets import synthetic
from bind_core.data.graph import Graph
from bind_core.debiasing.chance import against_random, seed_baselines
from bind_core.debiasing.nodesets import select
from bind_core.debiasing.validation import gammas, retrain_without, sample_positions, validate
from bind_core.influence import estimate
from bind_core.influence.arguments import InfluenceArguments
from bind_core.influence.functional import FunctionalModel
from bind_core.influence.step import Stepper
from bind_core.models.gnn import ModelConfig
from bind_core.training.fit import TrainConfig, TrainedModel, train

MODELS = {
    "gcn2": ModelConfig(arch="gcn", layers=2),
    "sage2": ModelConfig(arch="sage", layers=2),
    "gat1": ModelConfig(arch="gat", layers=1),
    "gin1": ModelConfig(arch="gin", layers=1),
}


def _scores(est: np.ndarray, act: np.ndarray) -> dict[str, float | None]:
    if est.size < 3 or np.std(est) == 0 or np.std(act) == 0:
        return {"pearson": None, "spearman": None, "slope": None}
    return {
        "pearson": float(pearsonr(est, act)[0]),
        "spearman": float(spearmanr(est, act)[0]),
        "slope": float(np.polyfit(est, act, 1)[0]),
    }


def run_one(graph: Graph, name: str, seed: int, args: Any) -> dict[str, Any]:
    start = time.perf_counter()
    model = train(graph, TrainConfig(seed=seed), MODELS[name])
    row: dict[str, Any] = {
        "model": name,
        "seed": seed,
        "parameters": model.num_parameters,
        "train_s": time.perf_counter() - start,
        "converged": bool(model.stationarity.converged),
        "grad_norm": model.stationarity.grad_norm,
        "newton": None if model.stationarity.newton is None else encode(model.stationarity.newton),
    }
    if args.sampled_only:
        return row | sampled_only(model, graph, seed, args)
    start = time.perf_counter()
    influence = estimate(model, graph, InfluenceArguments(method=args.estimator))
    row["estimator"] = influence.solve.details.get("method", "linear")
    row["estimate_s"] = time.perf_counter() - start
    row["solve"] = influence.solve.details
    for mode, sample in checks(args):
        if sample == 0:
            row[mode] = {"pearson": None, "spearman": None, "slope": None, "seconds": 0.0}
            continue
        start = time.perf_counter()
        check = validate(model, graph, influence, sample=sample, mode=mode, seed=seed)
        row[mode] = _scores(check.estimated[:, 0], check.actual[:, 0]) | {"seconds": time.perf_counter() - start}
    if args.node_sets and seed == seeds(args)[0]:
        row["node_sets"] = node_sets(model, graph, influence, args) | {"retrain": args.retrain}
    if args.debias and seed == seeds(args)[0]:
        # --retrain adam: the retrainings stop at Adam's best-validation epoch (as a user trains), no polish
        retrain = dataclasses.replace(model.train_config, polish=False) if args.retrain == "adam" else None
        started = time.perf_counter()
        baselines = seed_baselines(model, graph, [int(s) for s in args.debias_seeds.split(",")], retrain=retrain)
        row["debias_retrain"] = {"mode": args.retrain, "baseline_seconds": time.perf_counter() - started}
        row["debias"] = []
        for budget in [float(b) for b in args.budgets.split(",")]:
            # as the audit selects: a step estimate's set is the top of the ranking (overlap allowed)
            hops = 0 if row["estimator"] == "step" else model.model_config.layers
            nodes = select(influence.delta, graph, budget, "harmful", hops=hops)
            started = time.perf_counter()
            chance = against_random(model, graph, nodes, baselines, random_sets=args.random_sets, retrain=retrain)
            row["debias"].append(
                {"budget": budget, "requested": round(budget * graph.train_idx.numel())}
                | encode(chance)
                | {"seconds": time.perf_counter() - started}
            )
            print(f"  budget {budget}: {chance.verdict}", flush=True)
    return row


def checks(args: Any) -> list[tuple[str, int]]:
    """The per-node checks asked for: (ground truth, nodes drawn)."""
    return [("proximal", args.sample), ("reoptimize", args.sample_reoptimize)]


def sampled_only(model: TrainedModel, graph: Graph, seed: int, args: Any) -> dict[str, Any]:
    """The step estimate of the nodes the checks draw (the same draws as :func:`validate`), each its own damped
    step, against the proximal re-optimisation (``--sample`` nodes) and the unconstrained one
    (``--sample-reoptimize``) without it: for models whose estimate of every training node costs hours (a GIN the
    polish leaves non-stationary: each deletion carries the drift; a GAT on Recidivism: 13–25 minutes)."""
    m = graph.train_idx.numel()
    draws = {mode: sample_positions(m, n, seed) if n else [] for mode, n in checks(args)}
    start = time.perf_counter()
    stepper = Stepper.build(FunctionalModel.from_trained(model, graph))
    lam = 0.5
    estimates: dict[int, float] = {}
    for pos in sorted({p for picks in draws.values() for p in picks}):
        out = stepper.delete([pos]).delta
        estimates[pos] = lam * float(out[0]) + (1 - lam) * float(out[1])
    row: dict[str, Any] = {
        "estimator": "step (sampled nodes only)",
        "estimate_s": time.perf_counter() - start,
        "sampled": len(estimates),
        "damping": stepper.mu,
        "solve": stepper.solve.details,  # the spectrum (λ_max, eigenvalues below the weight decay, flat ones)
    }
    before = gammas(model, graph)
    coordinates = stepper.curvature.coordinates()  # the proximal truth's, as the audit's self-check runs it
    for mode, picks in draws.items():
        if not picks:
            row[mode] = {"pearson": None, "spearman": None, "slope": None, "seconds": 0.0}
            continue
        start = time.perf_counter()
        act = []
        for pos in picks:
            node = graph.train_idx[pos : pos + 1]
            again = retrain_without(model, graph, node, mode, damping=stepper.mu, coordinates=coordinates)
            sp, eo = gammas(again, graph.without_nodes(node)[0])
            act.append(lam * (sp - before[0]) + (1 - lam) * (eo - before[1]))
        est = np.asarray([estimates[p] for p in picks])
        row[mode] = _scores(est, np.asarray(act)) | {"seconds": time.perf_counter() - start}
    return row


def node_sets(model: TrainedModel, graph: Graph, influence: Any, args: Any) -> dict[str, Any]:
    """Harmful and helpful sets (1%, 5%, 10% from each end of the ranking): each set's own estimate against the
    mean effect of retraining from scratch without it over the ``--debias-seeds``, paired by seed, with the seeds'
    noise floor on the unchanged graph; is the sign right wherever the effect exceeds twice the floor?"""
    train_seeds = [int(s) for s in args.debias_seeds.split(",")]
    # --retrain adam: every retraining (the baselines too) stops at Adam's best-validation epoch, no polish
    config = dataclasses.replace(model.train_config, polish=False) if args.retrain == "adam" else model.train_config
    baselines = seed_baselines(model, graph, train_seeds, retrain=config if args.retrain == "adam" else None)
    noise = statistics.stdev(baselines.values())
    fm = FunctionalModel.from_trained(model, graph)
    stepper = Stepper.build(fm) if influence.solve.details.get("method") == "step" else None
    order = torch.argsort(influence.delta)
    m = graph.train_idx.numel()
    rows = []
    for direction, ranked in (("harmful", order), ("helpful", order.flip(0))):
        for fraction in (0.01, 0.05, 0.1):
            positions = ranked[: max(1, round(fraction * m))].tolist()
            if stepper is not None:
                out = stepper.delete(positions).delta
                est = influence.lam * float(out[0]) + (1 - influence.lam) * float(out[1])
            else:
                est = float(influence.delta[positions].sum())
            reduced, _ = graph.without_nodes(graph.train_idx[torch.tensor(positions)])
            effects = []
            for s, base in baselines.items():
                again = train(reduced, dataclasses.replace(config, seed=s), model.model_config)
                sp, eo = gammas(again, reduced)
                effects.append(influence.lam * sp + (1 - influence.lam) * eo - base)
            actual = statistics.fmean(effects)
            rows.append({"direction": direction, "size": len(positions), "estimated": est, "effects": effects,
                         "actual": actual, "clear": abs(actual) > 2 * noise,
                         "sign_right": (est < 0) == (actual < 0)})  # fmt: skip
            print(f"  {direction} {len(positions)}: estimated {est:+.4f}, actual {actual:+.4f} (noise {noise:.4f})")
    clear = [r for r in rows if r["clear"]]
    return {
        "noise_floor": noise,
        "sets": rows,
        "clear": len(clear),
        "sign_right_on_clear": sum(r["sign_right"] for r in clear),
    }


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--models", default=",".join(MODELS), help="comma-separated: " + ", ".join(MODELS))
    p.add_argument("--sample", type=int, default=30, help="random training nodes checked against the proximal truth")
    p.add_argument(
        "--sample-reoptimize", type=int, default=10,
        help="random training nodes checked against unconstrained re-optimisation (slow for flat objectives)",
    )  # fmt: skip
    p.add_argument("--debias", action="store_true", help="BIND vs random deletion at 1%%, 5%%, 10%% (retrains)")
    p.add_argument("--random-sets", type=int, default=3)
    p.add_argument("--node-sets", action="store_true", help="set estimates vs multi-seed scratch retraining (retrains)")
    p.add_argument("--estimator", default="auto", help="auto, linear or step")
    p.add_argument(
        "--sampled-only", action="store_true",
        help="estimate only the nodes the --sample and --sample-reoptimize checks draw (step; no sets, no debiasing)",
    )  # fmt: skip
    p.add_argument("--debias-seeds", default="1,10,100", help="retraining seeds of the check against chance")
    p.add_argument("--budgets", default="0.01,0.05,0.1", help="debiasing budgets checked against chance")
    p.add_argument(
        "--retrain", choices=("polished", "adam"), default="polished",
        help="the check's retrainings: the audit's (Adam, then the polish) or Adam alone (as a user trains)",
    )  # fmt: skip
    args = p.parse_args()
    setup(args)
    graphs = [(f"synthetic{args.synthetic}", synthetic(args.synthetic, seed=3))] if args.synthetic else datasets(args)
    rows = []
    for gname, graph in graphs:
        for name in args.models.split(","):
            for seed in seeds(args):
                row = {"graph": gname} | run_one(graph, name, seed, args)
                rows.append(row)
                print(
                    f"{gname} {name} seed {seed}: converged {row['converged']} (grad {row['grad_norm']:.1e}, "
                    f"newton {(row['newton'] or {}).get('reason')}), "
                    f"train {row['train_s']:.1f} s, estimate {row['estimate_s']:.1f} s, proximal "
                    f"{row['proximal']['pearson']}, reoptimize {row['reoptimize']['pearson']}",
                    flush=True,
                )
    print(
        table(
            ["graph", "model", "seed", "conv.", "train s", "estimate s", "prox. P/S", "reopt. P/S"],
            [
                [
                    r["graph"],
                    r["model"],
                    r["seed"],
                    r["converged"],
                    f"{r['train_s']:.1f}",
                    f"{r['estimate_s']:.1f}",
                    _ps(r["proximal"]),
                    _ps(r["reoptimize"]),
                ]
                for r in rows
            ],
        )
    )
    for r in rows:
        for d in r.get("debias", []):
            print(f"{r['graph']} {r['model']} seed {r['seed']} budget {d['budget']}: {d['verdict']}")
    write_json("multilayer", {"machine": machine(), "args": vars(args), "rows": rows}, args.out)


def _ps(scores: dict[str, Any]) -> str:
    if scores["pearson"] is None:
        return "n/a"
    return f"{scores['pearson']:.3f} / {scores['spearman']:.3f}"


if __name__ == "__main__":
    main()
