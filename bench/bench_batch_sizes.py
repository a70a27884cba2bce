"""Issue 36: the step estimate's per-deletion cost, one at a time against batches of ``B`` (interleaved, three rounds).

    python bench/bench_batch_sizes.py 20000 128 1,2,4,16,64     # the 20,000-node two-layer GCN, 128 deletions
    python bench/bench_batch_sizes.py income 192 1,2,4,16,64    # Income (needs ../shared/datasets)
    python bench/bench_batch_sizes.py small 40 1,4,40           # the tests' sparse 3,000-node graph (hidden 8)

One torch thread; the CPU seconds of the process per deletion (steadier than wall time on a shared machine) and the
wall seconds. Writes ``/tmp/ab2_<graph>.json``.
"""

from __future__ import annotations

import json
import sys
import time

import torch

from bind_core.data.datasets import synthetic
from bind_core.data.datasets.registry import load
from bind_core.influence.batch_inputs import Structures
from bind_core.influence.batched import settle_batch
from bind_core.influence.functional import FunctionalModel
from bind_core.influence.step import Stepper
from bind_core.models.gnn import ModelConfig
from bind_core.training.fit import TrainConfig, train


def main(name: str, count: int, sizes: list[int]) -> None:
    torch.set_num_threads(1)
    hidden = 16
    if name == "income":
        graph, epochs = load("income", "/work/shared/datasets"), 1000
    elif name == "small":
        graph, epochs, hidden = synthetic(3000, avg_degree=3, seed=2, train_per_class=20), 100, 8
    else:
        graph, epochs = synthetic(int(name), avg_degree=20, seed=0, train_per_class=500), 200
    model = train(graph, TrainConfig(epochs=epochs), ModelConfig(arch="gcn", layers=2, hidden=hidden))
    stepper = Stepper.build(FunctionalModel.from_trained(model, graph))
    print(name, "bytes/deletion", Structures.of(stepper).bytes_per_deletion(), flush=True)
    sets = [[p] for p in range(count)]
    rows = []
    for rep in range(3):
        for size in sizes:
            cpu, wall = time.process_time(), time.perf_counter()
            if size == 1:
                [stepper.delete(s) for s in sets]
            else:
                [settle_batch(stepper, sets[k : k + size]) for k in range(0, count, size)]
            cpu_ms = (time.process_time() - cpu) / count * 1e3
            wall_ms = (time.perf_counter() - wall) / count * 1e3
            rows.append({"rep": rep, "B": size, "cpu_ms": cpu_ms, "wall_ms": wall_ms})
            print(f"rep {rep} B {size}: CPU {cpu_ms:.1f} ms/deletion, wall {wall_ms:.1f}", flush=True)
    with open(f"/tmp/ab2_{name}.json", "w") as f:
        json.dump(rows, f)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), [int(b) for b in sys.argv[3].split(",")])
