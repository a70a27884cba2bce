"""Issue 19 benchmark: edge attribution (``bind_core.influence.edges``) next to the node attribution.

For each dataset and seed, the paper's one-layer GCN (default training, polished): the time of the node estimate
(its shared plan, i.e. the Hessian solve, plus its per-node terms), the time of the all-edge attribution reusing
that plan (and its own total with a fresh plan), and the per-edge Pearson/Spearman against deletion and
re-optimisation (the float64 polish from the trained weights on ``G − e``) on ``--sample`` random edges among
those whose deletion changes a training loss or a test prediction.

    python bench/bench_edges.py [--datasets income] [--seeds 10] [--sample 30] [--threads 1]
"""

from __future__ import annotations

import time
from typing import Any

import _common as C

from bind_core.debiasing.edge_validation import validate_edges
from bind_core.influence import combine, estimate_chunk, plan
from bind_core.influence.edges import estimate_edges
from bind_core.models.gnn import ModelConfig
from bind_core.training.fit import TrainConfig, train


def run_one(name: str, seed: int, sample: int, graph: Any) -> dict[str, Any]:
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

    check = validate_edges(model, graph, edges, sample=sample, seed=seed)
    corr = check.correlations()
    node_s = plan_s + node_terms_s
    return {
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
        "edge_validation": check.to_dict(),
        "pearson": corr["gamma"]["pearson"],
        "spearman": corr["gamma"]["spearman"],
        "node_summary": {"harmful": int((nodes.delta < 0).sum()), "count": int(nodes.delta.numel())},
        "edge_summary": edges.summary(),
    }


def main() -> None:
    p = C.parser("Edge attribution: time next to the node attribution, per-edge Pearson", seeds="10")
    p.add_argument("--sample", type=int, default=30, help="edges checked against re-optimisation")
    args = p.parse_args()
    if args.datasets == "income,recidivism":
        args.datasets = "income"
    C.setup(args)
    rows, records = [], []
    for name, graph in C.datasets(args):
        for seed in C.seeds(args):
            r = run_one(name, seed, args.sample, graph)
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
