"""Issue 36: the exact peak resident memory of each part of a deep model's influence stage inside the audit.

    python bench/probe_stage_memory.py --nodes 200000

Runs the audit as ``bench_scale.py --arch sage --layers 2 --hidden 128 --train 2000 --epochs 20 --batch-size 512
--fan-out 10,-1 --bootstrap 0`` does, and prints Linux's high-water mark (``VmHWM``, reset through
``/proc/self/clear_refs`` as each part starts) for the stationarity check, ``∇Γ``, the solve, the loss derivatives and
the deletion terms, with the RSS before and after each and its seconds. Unlike the other benchmarks it keeps glibc's
default allocator settings (no re-exec with ``GLIBC_TUNABLES``: the service's settings keep freed memory in the heap,
so its RSS is not the live peak); ``--tuned`` applies them, as ``bench_scale.py`` does.
"""

from __future__ import annotations

import argparse
import importlib
import time
from collections.abc import Callable
from typing import Any

import torch

from app.core.allocator import reexec_tuned
from bind_core.data.datasets import synthetic
from bind_core.models.gnn import ModelConfig
from bind_core.pipeline.audit import AuditConfig, run_audit
from bind_core.training.fit import TrainConfig


def status(field: str) -> float:
    """``field`` (``VmRSS``, ``VmHWM``) of this process, GiB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 2**20
    return float("nan")


def metered(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn``, printing the peak RSS while it runs (parts it calls reset the mark: see the output's order)."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        before = status("VmRSS")
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        start = time.perf_counter()
        out = fn(*args, **kwargs)
        seconds = time.perf_counter() - start
        print(
            f"  {name}: RSS before {before:.2f} GiB, peak {status('VmHWM'):.2f}, after {status('VmRSS'):.2f}; "
            f"{seconds:.2f} s"
        )
        return out

    return wrapper


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=200000)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--tuned", action="store_true", help="the service's allocator settings, as bench_scale.py runs")
    args = p.parse_args()
    if args.tuned:
        reexec_tuned()
    torch.set_num_threads(args.threads)
    estimate = importlib.import_module("bind_core.influence.estimate")
    stages = importlib.import_module("bind_core.pipeline.stages")
    parts = [(stages, "describe_stationarity")]
    names = ("gamma_gradients", "_solve_plan", "train_loss_derivatives", "estimate_chunk")
    parts += [(estimate, name) for name in names]
    for module, name in parts:
        setattr(module, name, metered(name, getattr(module, name)))
    graph = synthetic(args.nodes, num_features=16, avg_degree=20, seed=0, train_per_class=1000)
    config = AuditConfig(
        model=ModelConfig(arch="sage", layers=2, hidden=128),
        training=TrainConfig(epochs=20, batch_size=512, fan_out=(10, -1)),
        stages=("training", "metrics", "influence"),
        bootstrap=0,
        validation_sample=0,
    )
    seen: list[str] = []

    def progress(stage: str, _fraction: float) -> None:
        if not seen or seen[-1] != stage:
            seen.append(stage)
            print(f"{stage} starts: RSS {status('VmRSS'):.2f} GiB")

    run_audit(graph, config, progress=progress)
    print(f"end: RSS {status('VmRSS'):.2f} GiB")


if __name__ == "__main__":
    main()
