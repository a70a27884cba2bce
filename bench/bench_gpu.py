"""Issue 7 benchmark: the audit on a GPU (CUDA), checked against the CPU, and timed. Skipped without CUDA.

1. Agreement: a model trained on the CPU is estimated on the CPU and on the GPU (same weights); the two
   influence vectors must agree to float64 round-off (max |difference| relative to max |estimate|).
2. The paper's RQ1 on the GPU: Income (when ``--data-root`` holds it) with the paper's GCN, seed 10: training
   and all training nodes' influence, warm (best of ``--repeats``).
3. The large audit of ``bench_scale.py`` (``--nodes`` nodes, average degree 20, 10,000 training nodes) on the
   GPU: time and peak host/GPU memory per stage.
4. Deep models (issue 14): a two-layer GCN's step estimate (the multi-layer default) on CPU and GPU from the same
   polished weights (``deep-agreement``), and the audits of ``bench_scale.py`` for two-layer GCN h16 (step) and
   SAGE h64 on ``--deep-nodes`` (``deep-scale``, 1000 training nodes, no bootstrap).

    python bench/bench_gpu.py [--data-root ../shared/datasets] [--nodes 1000000] [--device cuda] \
        [--parts agreement,income,scale,deep-agreement,deep-scale] [--deep-nodes 20000,100000]

``--device cpu`` runs the same steps on the CPU (a dry run of the script; the agreement check is then trivial).
"""

from __future__ import annotations

import argparse
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import _common as C
import torch
from bench_scale import audit_once

from bind_core.codec import encode
from bind_core.data.datasets import load, synthetic
from bind_core.influence import estimate
from bind_core.influence.arguments import InfluenceArguments
from bind_core.models.gnn import ModelConfig
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


def deep_agreement(device: str, nodes: int = 3000) -> dict[str, Any]:
    """The step estimate of one polished two-layer GCN on the CPU and on ``device`` (same weights)."""
    graph = synthetic(nodes, seed=10)
    model = train(graph, TrainConfig(), ModelConfig(layers=2))
    t0 = time.perf_counter()
    cpu = estimate(model, graph, InfluenceArguments(method="step"))
    cpu_seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    gpu = estimate(_copy_to(model, device), graph, InfluenceArguments(method="step"))
    seconds = time.perf_counter() - t0
    diff = float((cpu.delta - gpu.delta.cpu()).abs().max())
    scale = float(cpu.delta.abs().max())
    corr = float(torch.corrcoef(torch.stack([cpu.delta, gpu.delta.cpu()]))[0, 1])
    return {"train": int(graph.train_idx.numel()), "stationarity": encode(model.stationarity), "max_abs_diff": diff,
            "relative": diff / scale, "pearson": corr, "cpu_seconds": cpu_seconds,
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


def _stage_table(row: dict[str, Any]) -> str:
    return C.table(
        ["stage", "seconds", "peak RSS (GiB)", "peak CUDA (GiB)"],
        [
            [k, f"{v['seconds']:.2f}", f"{v['peak_rss_gb']:.2f}", f"{v.get('peak_cuda_gb', float('nan')):.2f}"]
            for k, v in row["stages"].items()
        ],
    )


def _scale(args: argparse.Namespace, layers: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    row = audit_once(args.nodes if layers == 1 else args.nodes // 10, 20.0, args.train, layers=layers,
                     device=args.device)  # fmt: skip
    row["wall_seconds"] = time.perf_counter() - t0
    print(f"scale gcn-{layers}: {row['nodes']:,} nodes, {row['edges']:,} edges", flush=True)
    print(_stage_table(row), flush=True)
    return row


def _deep(args: argparse.Namespace, nodes: int, arch: str) -> dict[str, Any]:
    t0 = time.perf_counter()
    row = audit_once(nodes, 20.0, 1000, arch=arch, layers=2, hidden=16 if arch == "gcn" else 64,
                     estimator="step" if arch == "gcn" else "auto", bootstrap=0, device=args.device)  # fmt: skip
    row["wall_seconds"] = time.perf_counter() - t0
    print(f"deep {arch}-2, {nodes:,} nodes: {row['wall_seconds']:.1f} s", flush=True)
    print(_stage_table(row), flush=True)
    return row


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda")
    p.add_argument("--data-root", default="../shared/datasets")
    p.add_argument("--nodes", type=int, default=1_000_000)
    p.add_argument("--train", type=int, default=10_000)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--scale-layers", default="1,2", help="GCN depths of the large audit (2: on nodes/10)")
    p.add_argument("--threads", type=int, default=4)
    p.add_argument("--parts", default="agreement,income,scale,deep-agreement,deep-scale")
    p.add_argument("--deep-nodes", default="20000,100000", help="graph sizes of the deep audits (deep-scale)")
    p.add_argument("--deep-archs", default="gcn,sage", help="architectures of the deep audits (two layers)")
    p.add_argument("--out", default=None)
    args = p.parse_args()
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("[skip] no CUDA device: nothing to measure")
        return
    C.setup(args)
    out: dict[str, Any] = {"machine": C.machine(), "args": vars(args)}
    if args.device.startswith("cuda"):
        out["gpu"] = torch.cuda.get_device_name(0)
    parts = {v.strip() for v in args.parts.split(",")}
    steps: list[tuple[str, Callable[[], dict[str, Any] | None]]] = []
    if "agreement" in parts:
        steps.append(("agreement", lambda: agreement(args.device)))
    if "deep-agreement" in parts:
        steps.append(("deep_agreement", lambda: deep_agreement(args.device)))
    if "income" in parts:
        steps.append(("income", lambda: income(Path(args.data_root), args.device, args.repeats)))
    for layers in [int(v) for v in args.scale_layers.split(",") if v.strip()] if "scale" in parts else []:
        steps.append((f"scale_gcn{layers}", lambda layers=layers: _scale(args, layers)))
    for nodes in [int(v) for v in args.deep_nodes.split(",") if v.strip()] if "deep-scale" in parts else []:
        for arch in [v.strip() for v in args.deep_archs.split(",") if v.strip()]:
            steps.append((f"deep_{arch}2_{nodes}", lambda nodes=nodes, arch=arch: _deep(args, nodes, arch)))
    name = f"gpu_{args.device.split(':')[0]}"
    for key, step in steps:  # a failing part is recorded and the rest still run (a device is lent for minutes)
        try:
            out[key] = step()
        except Exception as exc:
            out[key] = {"error": repr(exc), "traceback": traceback.format_exc()}
            print(out[key]["traceback"], flush=True)
        if key in ("agreement", "deep_agreement", "income"):
            print(f"{key}:", out[key], flush=True)
        C.write_json(name, out, args.out)  # each part as it lands


if __name__ == "__main__":
    main()
