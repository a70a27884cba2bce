"""Issue 14: the polish's objective on the training nodes' computation graph against the whole graph.

For a two-layer model on ``synthetic(--nodes)`` with ``--train`` training nodes: the size of the computation graph
(:mod:`bind_core.training.compgraph`), the seconds of one float64 objective-and-gradient evaluation (what an L-BFGS
iteration of the polish costs) on it and on the whole graph, and the largest difference of the two (objective and
gradient). Best of ``--repeat`` evaluations each.

    python bench/bench_compgraph.py --nodes 100000 --train 1000 --threads 1
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import _common as C
import torch

from bind_core.data.datasets import synthetic
from bind_core.models.gnn import GNN, ModelConfig
from bind_core.models.propagation import GraphInputs
from bind_core.training.compgraph import computation_graph
from bind_core.training.objective import LabelledRows, training_objective


def _evaluate(module: GNN, inputs: GraphInputs, rows: LabelledRows, repeat: int) -> tuple[float, Any, list[Any]]:
    best = float("inf")
    value, grads = None, []
    for _ in range(repeat):
        start = time.perf_counter()
        module.zero_grad(set_to_none=True)
        objective = training_objective(module, inputs, rows, 1e-4)
        objective.backward()  # type: ignore[no-untyped-call]
        best = min(best, time.perf_counter() - start)
        value, grads = float(objective.detach()), [p.grad.clone() for p in module.parameters() if p.grad is not None]
    return best, value, grads


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nodes", type=int, default=100_000)
    p.add_argument("--avg-degree", type=float, default=20.0)
    p.add_argument("--train", type=int, default=1000)
    p.add_argument("--arch", default="gcn")
    p.add_argument("--hidden", type=int, default=16)
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", default=None)
    args = p.parse_args()
    C.setup(args)
    graph = synthetic(args.nodes, num_features=16, avg_degree=args.avg_degree, train_per_class=args.train // 2, seed=0)
    torch.manual_seed(0)
    module = GNN(ModelConfig(arch=args.arch, layers=2, hidden=args.hidden), graph.num_features, graph.num_classes)
    module = module.double().eval()
    inputs = module.prepare(graph)
    start = time.perf_counter()
    sub = computation_graph(module, inputs, graph)
    build = time.perf_counter() - start
    assert sub is not None
    whole_s, whole_value, whole_grads = _evaluate(module, inputs, graph, args.repeat)
    sub_s, sub_value, sub_grads = _evaluate(module, sub.inputs, sub, args.repeat)
    row = {
        "nodes": graph.num_nodes,
        "edges": graph.num_edges,
        "train": int(graph.train_idx.numel()),
        "computation_graph_nodes": int(sub.nodes.numel()),
        "build_seconds": build,
        "whole_graph_seconds": whole_s,
        "computation_graph_seconds": sub_s,
        "objective_difference": abs(whole_value - sub_value),
        "gradient_difference": max(float((a - b).abs().max()) for a, b in zip(whole_grads, sub_grads, strict=True)),
    }
    print(C.table(["quantity", "value"], [[k, f"{v:.4g}" if isinstance(v, float) else str(v)] for k, v in row.items()]))
    C.write_json(f"compgraph_{args.nodes}_{args.arch}2", {"machine": C.machine(), "args": vars(args), "result": row},
                 args.out)  # fmt: skip


if __name__ == "__main__":
    main()
