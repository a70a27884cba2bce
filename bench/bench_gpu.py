"""Issue 7 benchmark: the audit on a GPU (CUDA), checked against the CPU, and timed. Skipped without CUDA.

1. Agreement: a model trained on the CPU is estimated on the CPU and on the GPU (same weights); the two
   influence vectors must agree to float64 round-off (max |difference| relative to max |estimate|).
2. The paper's RQ1 on the GPU: Income (when ``--data-root`` holds it) with the paper's GCN, seed 10: training
   and all training nodes' influence, warm (best of ``--repeats``).
3. The large audit of ``bench_scale.py`` (``--nodes`` nodes, average degree 20, 10,000 training nodes) on the
   GPU: time and peak host/GPU memory per stage.

    python bench/bench_gpu.py [--data-root ../shared/datasets] [--nodes 1000000] [--device cuda]

``--device cpu`` runs the same steps on the CPU (a dry run of the script; the agreement check is then trivial).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import _common as C
import torch
from bench_scale import audit_once

from bind_core.data.datasets import load, synthetic
from bind_core.influence import estimate
from bind_core.training.fit import TrainConfig, TrainedModel, train


def _copy_to(model: TrainedModel, device: str) -> TrainedModel:
    clone = TrainedModel.from_bytes(model.to_bytes(), model.config_dict())
    clone.module.to(device)
    return clone


def agreement(device: str) -> dict[str, Any]:
    graph = synthetic(20_000, num_features=16, avg_degree=10, train_per_class=1000, seed=1)
    model = train(graph, TrainConfig(epochs=300))
    cpu = estimate(model, graph)
    t0 = time.perf_counter()
    gpu = estimate(_copy_to(model, device), graph)
    seconds = time.perf_counter() - t0
    diff = float((cpu.delta - gpu.delta).abs().max())
    scale = float(cpu.delta.abs().max())
    corr = float(torch.corrcoef(torch.stack([cpu.delta, gpu.delta]))[0, 1])
    return {"train": int(graph.train_idx.numel()), "max_abs_diff": diff, "relative": diff / scale, "pearson": corr,
            "gpu_seconds": seconds}  # fmt: skip


def income(root: Path, device: str, repeats: int) -> dict[str, Any] | None:
    try:
        graph = load("income", root)
    except Exception as exc:  # absent dataset: the step is skipped, with the reason
        print(f"[skip] income: {exc}")
        return None
    t0 = time.perf_counter()
    model = train(graph, TrainConfig(seed=10), device=device)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    train_s = time.perf_counter() - t0
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = estimate(model, graph)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return {"train_seconds": train_s, "influence_seconds": times, "influence_best": min(times),
            "grad_norm": result.grad_norm, "gamma": result.gamma}  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda")
    p.add_argument("--data-root", default="../shared/datasets")
    p.add_argument("--nodes", type=int, default=1_000_000)
    p.add_argument("--train", type=int, default=10_000)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--scale-layers", default="1,2", help="GCN depths of the large audit (2: on nodes/10)")
    p.add_argument("--threads", type=int, default=4)
    p.add_argument("--out", default=None)
    args = p.parse_args()
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("[skip] no CUDA device: nothing to measure")
        return
    C.setup(args)
    out: dict[str, Any] = {"machine": C.machine(), "args": vars(args)}
    if args.device.startswith("cuda"):
        out["gpu"] = torch.cuda.get_device_name(0)
    out["agreement"] = agreement(args.device)
    print("agreement:", out["agreement"], flush=True)
    out["income"] = income(Path(args.data_root), args.device, args.repeats)
    print("income:", out["income"], flush=True)
    for layers in [int(v) for v in args.scale_layers.split(",") if v.strip()]:
        t0 = time.perf_counter()
        row = audit_once(args.nodes if layers == 1 else args.nodes // 10, 20.0, args.train, layers=layers,
                         device=args.device)  # fmt: skip
        row["wall_seconds"] = time.perf_counter() - t0
        out[f"scale_gcn{layers}"] = row
        print(f"scale gcn-{layers}: {row['nodes']:,} nodes, {row['edges']:,} edges", flush=True)
        print(
            C.table(
                ["stage", "seconds", "peak RSS (GiB)", "peak CUDA (GiB)"],
                [
                    [k, f"{v['seconds']:.2f}", f"{v['peak_rss_gb']:.2f}", f"{v.get('peak_cuda_gb', float('nan')):.2f}"]
                    for k, v in row["stages"].items()
                ],
            ),
            flush=True,
        )
    C.write_json(f"gpu_{args.device.split(':')[0]}", out, args.out)


if __name__ == "__main__":
    main()
