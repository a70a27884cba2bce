"""Issue 36, item 3: the memory per node of a deep model's linear estimate, whole passes against blocks of rows.

    python bench/bench_memory.py --nodes 100000,200000 [--arch sage --hidden 128] [--device cuda]

For each graph size, trains a two-layer model briefly (mini-batches, no polish: the weights do not change what the
passes hold) and measures the peak memory above the process's resident set (on CUDA: the peak allocation) of each
part of the estimate that reads every node: the test probabilities at ``θ̂``, ``∇Γ``, the training losses'
derivatives along the solve's two columns (``s``: random here, the solve's values do not change the memory) and the
first ``--deletions`` training nodes' incremental terms. ``whole`` is the passes as they ran before
(:mod:`bind_core.influence.rowblocks` with one block; the loss derivatives over the whole graph), ``blocks`` with
``--budget`` elements a block. Each part's growth per node is the difference between the two sizes, and its
extrapolation to ``--extrapolate`` nodes is printed beside it (a straight line, not a measurement).

Run without ``GLIBC_TUNABLES``: glibc then returns a freed large array to the system, so the resident set follows
what is alive.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import _common as C
import torch
from _stages import peak_rss_bytes, reset_peak, rss_bytes

from bind_core.data.datasets import synthetic
from bind_core.influence import rowblocks
from bind_core.influence.functional import FunctionalModel
from bind_core.influence.terms import deletion_terms, directional_loss_derivatives, train_loss_derivatives
from bind_core.models.gnn import ModelConfig
from bind_core.training.fit import TrainConfig, train

GIB = 1024**3


def _peak(device: str, fn: Callable[[], Any]) -> tuple[float, float]:
    """``fn()``'s peak memory above where it started (GiB) and its seconds."""
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    else:
        base = rss_bytes()
        reset_peak()
    t0 = time.perf_counter()
    fn()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated()
    else:
        peak = peak_rss_bytes()
    return (peak - base) / GIB, time.perf_counter() - t0


def measure(nodes: int, args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    graph = synthetic(nodes, num_features=16, avg_degree=20, train_per_class=args.train // 2, seed=0)
    config = ModelConfig(arch=args.arch, layers=2, hidden=args.hidden)
    model = train(graph, TrainConfig(epochs=2, polish=False, batch_size=512, fan_out=(10, -1)), config,
                  device=args.device)  # fmt: skip
    fm = FunctionalModel.from_trained(model, graph)
    theta = fm.theta
    s = 1e-3 * torch.randn(fm.num_parameters, 2, generator=torch.Generator().manual_seed(0), dtype=theta.dtype)
    s = s.to(theta.device)
    m = int(graph.train_idx.numel())
    train_idx, y = graph.train_idx.to(fm.device), graph.y.to(fm.device)
    out: dict[str, dict[str, Any]] = {}
    for mode, budget in (("whole", 2**62), ("blocks", args.budget)):
        rowblocks.ROW_BLOCK_ELEMENTS = budget

        def terms() -> None:
            zeros = torch.zeros(m, 2, dtype=theta.dtype, device=fm.device)
            gamma = torch.zeros(2, dtype=theta.dtype, device=fm.device)
            deletion_terms(fm, theta, s, zeros, gamma, zeros.clone(), zeros.clone(), non_iid=True, direct=True,
                           exact=True, start=0, stop=args.deletions)  # fmt: skip

        parts: dict[str, Callable[[], Any]] = {
            "test probabilities": lambda: rowblocks.test_probabilities(fm, theta),
            "gradient of Γ": lambda: rowblocks.gamma_gradients(fm, theta),
            "loss derivatives": (
                (lambda: directional_loss_derivatives(lambda f: fm.logits(f, train_idx), theta, s, y[train_idx]))
                if mode == "whole"
                else (lambda: train_loss_derivatives(fm, theta, s))
            ),
            "deletion terms": terms,
        }
        row = {}
        for name, fn in parts.items():
            gib, seconds = _peak(args.device, fn)
            row[name] = {"peak_gib": gib, "seconds": seconds}
            print(f"{nodes:>10,} {mode:6s} {name:20s} +{gib:6.2f} GiB {seconds:7.1f} s", flush=True)
        out[mode] = row
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nodes", default="100000,200000", help="two graph sizes, comma-separated")
    p.add_argument("--arch", default="sage")
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--train", type=int, default=2000)
    p.add_argument("--deletions", type=int, default=200, help="training nodes whose incremental terms are formed")
    p.add_argument("--budget", type=int, default=2**20, help="elements of a block's array (blocks mode)")
    p.add_argument("--extrapolate", type=float, default=1e7, help="nodes the growth per node is extrapolated to")
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", default=None)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    sizes = [int(n) for n in args.nodes.split(",")]
    if len(sizes) != 2:
        p.error("--nodes takes two sizes")
    runs = {n: measure(n, args) for n in sizes}
    small, large = sizes
    rows, growth = [], {}
    for mode in ("whole", "blocks"):
        for name in runs[small][mode]:
            a, b = runs[small][mode][name]["peak_gib"], runs[large][mode][name]["peak_gib"]
            per_node = (b - a) * GIB / (large - small)
            at = a * GIB + per_node * (args.extrapolate - small)
            growth[f"{mode}: {name}"] = {"bytes_per_node": per_node, "extrapolated_gib": at / GIB}
            rows.append([mode, name, f"{a:.2f}", f"{b:.2f}", f"{per_node / 1024:.1f}", f"{at / GIB:.0f}"])
    print(C.table(["passes", "part", f"{small:,} (GiB)", f"{large:,} (GiB)", "KiB a node",
                   f"at {args.extrapolate:.0e} (GiB)"], rows))  # fmt: skip
    C.write_json(f"memory_{args.arch}{args.hidden}_{args.device}",
                 {"machine": C.machine(), "args": vars(args), "runs": runs, "growth": growth}, args.out)  # fmt: skip


if __name__ == "__main__":
    main()
