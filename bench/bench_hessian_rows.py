"""Issue 36, item 2: a message-passing model's Hessian by rows (the Newton finish's and the influence solver's), one
row per backward pass against blocks of rows per batched backward pass, CPU seconds on one thread.

    python bench/bench_hessian_rows.py --nodes 5000 --batches 1,8,32,128 --out docs/bench/hessian_rows_5000_cpu.json

A two-layer GCN (hidden 16, 30 Adam epochs, float64, activations expanded to second order as the Newton finish
forms them) on ``synthetic(nodes, seed=3)``; each batch size forms the whole Hessian once, in the order given, and
the largest difference from the first batch size's Hessian (relative to its largest entry) is printed beside it.
"""

from __future__ import annotations

import argparse
import json
import platform
import time

import torch

from bind_core.data.datasets import synthetic
from bind_core.models.gnn import ModelConfig
from bind_core.training.fit import TrainConfig, train
from bind_core.training.hessian import dense_hessian_by_rows
from bind_core.training.objective import flat_objective


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=5000)
    p.add_argument("--batches", default="1,8,32,128")
    p.add_argument("--device", default="cpu")
    p.add_argument("--out", default=None)
    args = p.parse_args()
    torch.set_num_threads(1)
    graph = synthetic(args.nodes, seed=3)
    model = train(graph, TrainConfig(epochs=30, polish=False), ModelConfig(arch="gcn", layers=2, hidden=16))
    model.module.double().to(args.device)
    model.module.expand_activations = True
    objective, theta, _ = flat_objective(model.module, model.prepare(graph), graph, model.train_config.weight_decay)
    first: torch.Tensor | None = None
    runs = []
    for batch in (int(b) for b in args.batches.split(",")):
        start, wall = time.process_time(), time.perf_counter()
        h = dense_hessian_by_rows(objective, theta, batch=batch)
        if args.device != "cpu":
            torch.cuda.synchronize()
        cpu, seconds = time.process_time() - start, time.perf_counter() - wall
        first = h if first is None else first
        diff = float((h - first).abs().max() / first.abs().max())
        runs.append({"batch": batch, "cpu_s": cpu, "wall_s": seconds, "max_rel_difference": diff})
        print(f"batch {batch:4d}: {cpu:.2f} CPU s, {seconds:.2f} s wall, difference {diff:.1e}", flush=True)
    machine = platform.processor() or platform.machine()
    doc = {"nodes": args.nodes, "parameters": theta.numel(), "device": args.device, "machine": machine, "runs": runs}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(doc, f, indent=2)


if __name__ == "__main__":
    main()
