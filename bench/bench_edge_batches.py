"""Issue 36: the settled edges' cost per edge deletion, one at a time against batches of ``B`` (interleaved rounds).

    python bench/bench_edge_batches.py --threads 1 --sizes 1,2,4,8,20,40 --out docs/bench/edge_batches_3000_cpu.json

The graph is the batched tests' sparse 3,000-node synthetic graph (average degree 3, 20 training nodes a class) with
a two-layer GCN of hidden size 8. The edges are those an audit settles: the ``--ends`` most harmful and most helpful
by the first-order value (:func:`~bind_core.influence.deep_edges.estimate_edges_deep` with ``settle=0``). ``B = 1``
is :meth:`Stepper.delete_edges` (the whole reduced graph rebuilt, as before batching); ``B = 1*`` is the lockstep
settle with batches of one (the reducer's ``G − e`` on the training nodes' computation graph), so the batching's
own gain is ``1*`` against ``B``; every ``B > 1`` includes the members settled again alone (close calls and those
the chord steps leave above ``tol``), counted in ``alone``. CPU seconds of the process per deletion (steadier than
wall time on a shared machine) and wall seconds.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import torch

from bind_core.data.datasets import synthetic
from bind_core.data.graph import Graph
from bind_core.influence.batch_inputs import Structures
from bind_core.influence.batched import settle_edge_batch
from bind_core.influence.deep_edges import estimate_edges_deep
from bind_core.influence.functional import FunctionalModel
from bind_core.influence.step import Deletion, Stepper
from bind_core.models.gnn import ModelConfig
from bind_core.training.fit import TrainConfig, TrainedModel, train


def _settle(stepper: Stepper, edges: list[torch.Tensor], size: int, lockstep: bool) -> list[Deletion]:
    """Settle ``edges`` one at a time (``size`` 1 and not ``lockstep``) or in lockstep batches of ``size``."""
    if size == 1 and not lockstep:
        return [stepper.delete_edges(pairs) for pairs in edges]
    return [out for k in range(0, len(edges), size) for out in settle_edge_batch(stepper, edges[k : k + size])]


def _picks(stepper: Stepper, model: TrainedModel, graph: Graph, ends: int) -> list[torch.Tensor]:
    """The ``ends`` most harmful and most helpful affecting edges by the first-order value, one ``[1, 2]`` each."""
    first = estimate_edges_deep(model, graph, settle=0, stepper=stepper)
    order = torch.nonzero(first.affects).flatten()
    order = order[torch.argsort(first.delta[order])]
    picks = list(dict.fromkeys(order[:ends].tolist() + order.flip(0)[:ends].tolist()))
    return [first.edges[p : p + 1] for p in picks]


def _timed(
    stepper: Stepper, edges: list[torch.Tensor], size: int, lockstep: bool
) -> tuple[list[Deletion], dict[str, object]]:
    """One timed settle of ``edges``: the results, and CPU and wall ms per edge with the members settled alone."""
    original, alone = Stepper.delete_edges, [0]

    def counted(self: Stepper, pairs: torch.Tensor) -> Deletion:
        alone[0] += 1
        return original(self, pairs)

    Stepper.delete_edges = counted  # type: ignore[method-assign]
    try:
        cpu, wall = time.process_time(), time.perf_counter()
        got = _settle(stepper, edges, size, lockstep)
        cpu_ms = (time.process_time() - cpu) * 1e3 / len(edges)
        wall_ms = (time.perf_counter() - wall) * 1e3 / len(edges)
    finally:
        Stepper.delete_edges = original  # type: ignore[method-assign]
    return got, {"cpu_ms": cpu_ms, "wall_ms": wall_ms, "alone": alone[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--sizes", default="1,2,4,8,20,40", help="lockstep batch sizes; 1 is B = 1*")
    parser.add_argument("--ends", type=int, default=20, help="edges at each end of the first-order ranking")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", default="/tmp/edge_batches.json")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    graph = synthetic(3000, avg_degree=3, seed=2, train_per_class=20)
    model = train(graph, TrainConfig(epochs=100), ModelConfig(arch="gcn", layers=2, hidden=8))
    stepper = Stepper.build(FunctionalModel.from_trained(model, graph))
    edges = _picks(stepper, model, graph, args.ends)
    reference = _settle(stepper, edges, 1, False)
    scale = max(float(out.delta.abs().max()) for out in reference)
    runs = [(1, False)] + [(int(b), True) for b in args.sizes.split(",")]
    rows = []
    for rep in range(args.rounds):
        for size, lockstep in runs:
            got, row = _timed(stepper, edges, size, lockstep)
            diff = max(float((a.delta - b.delta).abs().max()) for a, b in zip(got, reference, strict=True)) / scale
            row |= {"rep": rep, "B": f"{size}*" if lockstep and size == 1 else str(size), "rel_diff": diff}
            rows.append(row)
            print(json.dumps(row), flush=True)
    meta = {
        "graph": "synthetic(3000, avg_degree=3, seed=2, train_per_class=20)",
        "model": "gcn, 2 layers, hidden 8, 100 epochs",
        "edges": len(edges),
        "taken": [out.taken for out in reference],
        "residual_above_tol": sum(out.residual > stepper.tol for out in reference),
        "bytes_per_deletion": Structures.of(stepper).bytes_per_deletion(),
        "threads": args.threads,
        "machine": f"{platform.processor() or platform.machine()}, the shared 2-core machine (noisy)",
        "torch": torch.__version__,
    }
    Path(args.out).write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
