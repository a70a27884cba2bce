"""Issue 19 benchmark: edge attribution of multi-layer and attention models (``bind_core.influence.deep_edges``).

For each dataset (or ``--synthetic N``), model and seed: the model trained as the audit trains it (Adam, then the
polish to a stationary point); the node estimate (damped steps, :func:`bind_core.influence.estimate` with
``method="step"``) and its time; the all-edge attribution reusing its damped inverse, split into the first-order
pass over every edge and the settled steps for the top ``--settle`` at each end; then, against the proximal
re-optimisation on ``G − e`` (the question the estimate answers): ``--sample`` settled edges (what the audit lists
and deletes) and ``--sample-first`` random affecting edges with their first-order values (the bulk of the ranking).

    python bench/bench_deep_edges.py --synthetic 1500 --models gcn2,sage2,gat1 --seeds 10
    python bench/bench_deep_edges.py --datasets income --models gcn2 --seeds 10 --sample 10 --sample-first 10
"""

from __future__ import annotations

import time
from typing import Any

import _common as C
import numpy as np
import torch
from scipy.stats import pearsonr, spearmanr

from bind_core.codec import encode
from bind_core.data.datasets import synthetic
from bind_core.data.graph import Graph
from bind_core.debiasing.edge_validation import actual_edge_delta, validate_edges
from bind_core.influence import estimate
from bind_core.influence.arguments import InfluenceArguments
from bind_core.influence.deep_edges import estimate_edges_deep
from bind_core.influence.step import Stepper
from bind_core.models.gnn import ModelConfig
from bind_core.training.fit import TrainConfig, train

MODELS = {
    "gcn2": ModelConfig(arch="gcn", layers=2),
    "sage2": ModelConfig(arch="sage", layers=2),
    "gat1": ModelConfig(arch="gat", layers=1),
    "gin2": ModelConfig(arch="gin", layers=2),
}


def _scores(est: list[float], act: list[float]) -> dict[str, float | None]:
    if len(est) < 3 or np.std(est) == 0 or np.std(act) == 0:
        return {"pearson": None, "spearman": None}
    return {"pearson": float(pearsonr(est, act)[0]), "spearman": float(spearmanr(est, act)[0])}


def run_one(graph: Graph, name: str, seed: int, args: Any) -> dict[str, Any]:
    t0 = time.perf_counter()
    model = train(graph, TrainConfig(seed=seed), MODELS[name])
    train_s = time.perf_counter() - t0
    steppers: list[Stepper] = []
    t0 = time.perf_counter()
    estimate(model, graph, InfluenceArguments(method="step"), on_stepper=steppers.append)
    node_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    edges = estimate_edges_deep(model, graph, settle=args.settle, stepper=steppers[0])
    edges_s = time.perf_counter() - t0
    assert edges.settled is not None
    settled_check = validate_edges(model, graph, edges, sample=args.sample, seed=seed) if args.sample else None
    first = 0.5 * edges.parts["first_order"][:, 0] + 0.5 * edges.parts["first_order"][:, 1]
    pool = torch.nonzero(edges.affects & ~edges.settled).flatten()
    picks = pool[torch.randperm(pool.numel(), generator=torch.Generator().manual_seed(seed))[: args.sample_first]]
    mu = float(edges.solve.details["damping"])
    est, act = [], []
    t0 = time.perf_counter()
    for k in picks.tolist():
        d_sp, d_eo = actual_edge_delta(model, graph, edges.edges[k : k + 1], mode="proximal", damping=mu)
        est.append(float(first[k]))
        act.append(0.5 * d_sp + 0.5 * d_eo)
    first_check_s = time.perf_counter() - t0
    return {
        "model": name,
        "seed": seed,
        "parameters": int(sum(p.numel() for p in model.module.parameters())),
        "converged": bool(model.stationarity.converged),
        "train_s": train_s,
        "node_estimate_s": node_s,
        "edges_s": edges_s,
        "edges_over_nodes": edges_s / node_s,
        "edges": int(edges.edges.shape[0]),
        "affecting": int(edges.affects.sum()),
        "settled": int(edges.settled.sum()),
        "timings": edges.timings,
        "damping": mu,
        "unsettled": edges.solve.details.get("unsettled"),
        "settled_vs_proximal": None if settled_check is None else encode(settled_check.record()),
        "first_order_vs_proximal": {"count": len(est), "seconds": first_check_s, **_scores(est, act)},
        "first_order_slope": float(np.polyfit(act, est, 1)[0]) if len(est) >= 3 else None,
    }


def main() -> None:
    p = C.parser(__doc__.splitlines()[0], seeds="10")
    p.add_argument("--models", default="gcn2", help="comma-separated: " + ", ".join(MODELS))
    p.add_argument("--settle", type=int, default=10, help="edges settled at each end of the ranking")
    p.add_argument("--sample", type=int, default=10, help="settled edges checked against the proximal truth")
    p.add_argument("--sample-first", type=int, default=10, help="random unsettled edges checked (first-order)")
    args = p.parse_args()
    C.setup(args)
    graphs = [(f"synthetic{args.synthetic}", synthetic(args.synthetic, seed=3))] if args.synthetic else C.datasets(args)
    rows = []
    for gname, graph in graphs:
        for name in args.models.split(","):
            for seed in C.seeds(args):
                row = {"graph": gname} | run_one(graph, name, seed, args)
                rows.append(row)
                settled = row["settled_vs_proximal"] or {}
                print(
                    f"{gname} {name} seed {seed}: train {row['train_s']:.1f} s, node estimate "
                    f"{row['node_estimate_s']:.1f} s, edges {row['edges_s']:.1f} s ({row['edges']} edges, "
                    f"{row['settled']} settled; {row['timings']}), settled vs proximal Pearson "
                    f"{settled.get('pearson')} Spearman {settled.get('spearman')}; first-order vs proximal "
                    f"{row['first_order_vs_proximal']} slope {row['first_order_slope']}",
                    flush=True,
                )
    C.write_json("deep_edges", {"machine": C.machine(), "args": vars(args), "rows": rows}, args.out)


if __name__ == "__main__":
    main()
