"""Issue 36: the step estimate's CPU cost per deletion on one thread, one at a time and by the default path.

    python bench/bench_deletions.py --nodes 20000 --arch gcn --count 100 --rounds 3 --out docs/bench/x.json

Trains the two-layer model (hidden 16, 200 epochs, ``synthetic(nodes, avg_degree=20, train_per_class=500)``, as
``bench_batch_sizes.py``), builds its stepper, and settles the first ``--count`` training nodes' deletions
``--rounds`` times each way, interleaved: ``one`` (:meth:`Stepper.delete`, one at a time) and ``default``
(:func:`~bind_core.influence.batched.delete_many` in batches of :func:`~bind_core.influence.batched.batch_size`, what
``step_estimate`` takes on a CPU by default). CPU seconds of the process (steadier than wall time on a shared
machine). Only API that the commits before issue 36's per-deletion work have too, so that ``bench/run_speed36.sh``
can run it from both trees.
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from bind_core.data.datasets import synthetic
from bind_core.influence.batched import batch_size, delete_many
from bind_core.influence.functional import FunctionalModel
from bind_core.influence.step import Stepper
from bind_core.models.gnn import ModelConfig
from bind_core.training.fit import TrainConfig, train


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=20000)
    p.add_argument("--arch", default="gcn")
    p.add_argument("--count", type=int, default=100)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--label", default="")
    p.add_argument("--out", default=None)
    args = p.parse_args()
    torch.set_num_threads(1)
    graph = synthetic(args.nodes, num_features=16, avg_degree=20, seed=0, train_per_class=500)
    model = train(graph, TrainConfig(epochs=200), ModelConfig(arch=args.arch, layers=2, hidden=16))
    stepper = Stepper.build(FunctionalModel.from_trained(model, graph))
    size = batch_size(stepper)
    sets = [[p] for p in range(args.count)]
    stepper.delete([args.count])  # warm-up, not counted
    rows = []
    for rep in range(args.rounds):
        for way in ("one", "default"):
            cpu, wall = time.process_time(), time.perf_counter()
            if way == "one":
                [stepper.delete(s) for s in sets]
            else:
                [delete_many(stepper, sets[k : k + size]) for k in range(0, args.count, size)]
            cpu_ms = (time.process_time() - cpu) / args.count * 1e3
            wall_ms = (time.perf_counter() - wall) / args.count * 1e3
            rows.append({"round": rep, "way": way, "cpu_ms": cpu_ms, "wall_ms": wall_ms})
            print(f"{args.label} round {rep} {way}: CPU {cpu_ms:.2f} ms a deletion, wall {wall_ms:.2f}", flush=True)
    payload = {"args": vars(args), "default_batch_size": size, "threads": 1, "rows": rows}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(payload, f, indent=1)


if __name__ == "__main__":
    main()
