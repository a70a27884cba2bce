"""Issue 19 benchmark: edge attribution (``bind_core.influence.edges``) next to the node attribution.

For each dataset and seed, the paper's one-layer GCN (default training, polished): the time of the node estimate
(its shared plan, i.e. the Hessian solve, plus its per-node terms), the time of the all-edge attribution reusing
that plan (and its own total with a fresh plan), and the per-edge Pearson/Spearman against deletion and
re-optimisation (the float64 polish from the trained weights on ``G − e``) on ``--sample`` random edges among
those whose deletion changes a training loss or a test prediction.

With ``--debias``: edge debiasing against chance (:mod:`bind_core.debiasing.edge_debias`): for each ``--budgets``
fraction of the edges that affect a loss or a test prediction, the most harmful edges deleted and the model
retrained from scratch with every ``--debias-seeds`` seed, against ``--random-sets`` random sets of as many edges
from the same pool; the noise floor, the advantage and the verdict.

    python bench/bench_edges.py [--datasets income] [--seeds 10] [--sample 30] [--threads 1]
    python bench/bench_edges.py --datasets income,recidivism --sample 0 --debias --budgets 0.01,0.05,0.1
"""

from __future__ import annotations

import time
from typing import Any

import _common as C

from bind_core.codec import encode
from bind_core.debiasing.edge_debias import debias_edges
from bind_core.debiasing.edge_validation import validate_edges
from bind_core.influence import plan
from bind_core.influence.distributed import combine, estimate_chunk
from bind_core.influence.edges import estimate_edges
from bind_core.models.gnn import ModelConfig
from bind_core.training.fit import TrainConfig, train


def run_one(name: str, seed: int, sample: int, graph: Any, args: Any) -> dict[str, Any]:
    t0 = time.perf_counter()
    model = train(graph, TrainConfig(seed=seed), ModelConfig())
    train_s = time.perf_counter() - t0

    t0 = time.perf_counter()
    shared = plan(model, graph)
    plan_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    nodes = combine(shared, graph, [estimate_chunk(shared, model, graph, 0, int(graph.train_idx.numel()))])
    node_terms_s = time.perf_counter() - t0

    t0 = time.perf_counter()
    edges = estimate_edges(model, graph, influence_plan=shared)
    edge_terms_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    estimate_edges(model, graph)
    edges_alone_s = time.perf_counter() - t0

    check = validate_edges(model, graph, edges, sample=sample, seed=seed) if sample else None
    corr = check.correlations() if check is not None else {"gamma": {"pearson": None, "spearman": None}}
    node_s = plan_s + node_terms_s
    debias = None
    if args.debias:
        t0 = time.perf_counter()
        budgets = [float(b) for b in args.budgets.split(",")]
        debias = encode(
            debias_edges(
                model,
                graph,
                edges,
                budgets,
                [int(s) for s in args.debias_seeds.split(",")],
                random_sets=args.random_sets,
            )
        )
        debias["seconds"] = time.perf_counter() - t0
        for r in debias["budgets"]:
            print(f"{name} seed {seed} edge budget {r['budget']} ({r['deleted']} edges): {r['verdict']}", flush=True)
    return {
        "edge_debias": debias,
        "dataset": name,
        "seed": seed,
        "nodes": graph.num_nodes,
        "undirected_edges": graph.num_edges,
        "affecting_edges": int(edges.affects.sum()),
        "train_nodes": int(graph.train_idx.numel()),
        "train_seconds": train_s,
        "node_plan_seconds": plan_s,
        "node_terms_seconds": node_terms_s,
        "node_total_seconds": node_s,
        "edge_terms_seconds_with_shared_plan": edge_terms_s,
        "edge_alone_seconds": edges_alone_s,
        "edges_over_nodes": edges_alone_s / node_s,
        "nodes_plus_edges_over_nodes": (node_s + edge_terms_s) / node_s,
        "edge_validation": encode(check.record()) if check is not None else None,
        "pearson": corr["gamma"]["pearson"],
        "spearman": corr["gamma"]["spearman"],
        "node_summary": {"harmful": int((nodes.delta < 0).sum()), "count": int(nodes.delta.numel())},
        "edge_summary": encode(edges.summary()),
    }


def main() -> None:
    p = C.parser("Edge attribution: time next to the node attribution, per-edge Pearson", seeds="10")
    p.add_argument("--sample", type=int, default=30, help="edges checked against re-optimisation")
    p.add_argument("--debias", action="store_true", help="edge debiasing against random edge deletion (retrains)")
    p.add_argument("--budgets", default="0.01,0.05,0.1", help="fractions of the affecting edges deleted")
    p.add_argument("--debias-seeds", default="1,10,100", help="retraining seeds of the check against chance")
    p.add_argument("--random-sets", type=int, default=3)
    args = p.parse_args()
    if args.datasets == "income,recidivism":
        args.datasets = "income"
    C.setup(args)
    rows, records = [], []
    for name, graph in C.datasets(args):
        for seed in C.seeds(args):
            r = run_one(name, seed, args.sample, graph, args)
            records.append(r)
            rows.append(
                [
                    name,
                    seed,
                    f"{r['undirected_edges']} ({r['affecting_edges']})",
                    f"{r['node_total_seconds']:.2f}",
                    f"{r['edge_terms_seconds_with_shared_plan']:.2f}",
                    f"{r['edge_alone_seconds']:.2f}",
                    f"{r['edges_over_nodes']:.2f}",
                    f"{r['pearson']:.4f}" if r["pearson"] is not None else "–",
                    f"{r['spearman']:.4f}" if r["spearman"] is not None else "–",
                    args.sample,
                ]
            )
    headers = [
        "dataset",
        "seed",
        "edges (affecting)",
        "node estimate s",
        "edge terms s (shared solve)",
        "edges alone s",
        "edges/nodes",
        "Pearson",
        "Spearman",
        "edges checked",
    ]
    print(C.table(headers, rows))
    C.write_json("bench_edges", {"machine": C.machine(), "args": vars(args), "runs": records}, args.out)


if __name__ == "__main__":
    main()
