"""Issue 36: the step estimate's dense curvature formed from the training rows' Jacobian against the Hessian's rows.

    python bench/bench_curvature.py --nodes 20000 --archs gcn,sage,gin --out docs/bench/curvature36.json

Trains each two-layer model (h16) on a synthetic graph, then forms ``B″(θ̂)`` three ways on one and on two threads:
the Bregman objective's Hessian row by row (:func:`~bind_core.training.hessian.dense_hessian_by_rows`, rows on
threads), ``(1/m)·J̃ᵀJ̃ + λI`` with ``J`` from forward-mode products (``jvp``, its blocks on intra-op threads) and
the same with ``J`` formed by hand where the model allows (a two-layer GCN or SAGE,
:mod:`bind_core.influence.jacobian_by_hand`; :func:`~bind_core.influence.gaussnewton.gauss_newton` as the audit runs
it). Prints the seconds of each and their largest relative difference.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path
from typing import Any

import torch

from bind_core.data.datasets import synthetic
from bind_core.influence.functional import FunctionalModel
from bind_core.influence.gaussnewton import gauss_newton
from bind_core.influence.jacobian_by_hand import training_jacobian
from bind_core.models.gnn import ModelConfig
from bind_core.training.fit import TrainConfig, train
from bind_core.training.hessian import dense_hessian_by_rows


def timed(fn: Any, *args: Any, **kwargs: Any) -> tuple[torch.Tensor, float]:
    start = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, round(time.perf_counter() - start, 3)


def measure(nodes: int, arch: str) -> dict[str, Any]:
    graph = synthetic(nodes, num_features=16, avg_degree=20, seed=0, train_per_class=500)
    model = train(graph, TrainConfig(epochs=200), ModelConfig(arch=arch, layers=2, hidden=16))
    fm = FunctionalModel.from_trained(model, graph)
    row: dict[str, Any] = {"arch": arch, "parameters": fm.num_parameters, "nodes": nodes}
    row["by_hand"] = training_jacobian(fm) is not None
    reference = None
    for threads in (1, 2):
        rows, row[f"rows_{threads}_s"] = timed(dense_hessian_by_rows, fm.bregman, fm.theta, threads=threads)
        forward, row[f"jvp_{threads}_s"] = timed(gauss_newton, fm, threads=threads, by_hand=False)
        jacobian, row[f"jacobian_{threads}_s"] = timed(gauss_newton, fm, threads=threads)
        assert jacobian is not None and forward is not None
        reference = rows if reference is None else reference
        row[f"relative_difference_{threads}"] = max(
            float((m - reference).abs().max() / reference.abs().max()) for m in (jacobian, forward)
        )
    return row


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=20000)
    p.add_argument("--archs", default="gcn,sage,gin")
    p.add_argument("--out", default=None)
    args = p.parse_args()
    torch.set_num_threads(1)
    rows = [measure(args.nodes, arch) for arch in args.archs.split(",")]
    for r in rows:
        print(
            f"{r['arch']} (p={r['parameters']}): rows {r['rows_1_s']} s / {r['rows_2_s']} s, Jacobian by jvp "
            f"{r['jvp_1_s']} s / {r['jvp_2_s']} s, as the audit forms it ({'by hand' if r['by_hand'] else 'jvp'}) "
            f"{r['jacobian_1_s']} s / {r['jacobian_2_s']} s (one / two threads); largest relative difference "
            f"{max(r['relative_difference_1'], r['relative_difference_2']):.1e}"
        )
    if args.out:
        load = Path("/proc/loadavg").read_text().strip()
        record = {
            "command": f"python bench/bench_curvature.py --nodes {args.nodes} --archs {args.archs}",
            "date": time.strftime("%Y-%m-%d %H:%M"),
            "machine": f"{platform.processor() or platform.machine()}, load average {load}",
            "rows": rows,
        }
        Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
