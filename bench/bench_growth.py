"""Issue 7 benchmark: how an audit's cost grows with nodes, edges and training nodes (time and memory per stage).

Three sweeps over ``bind_core.data.datasets.synthetic`` graphs, each over at least two orders of magnitude, with the
paper's GCN (one layer, 16 hidden) and the audit of ``bench_scale.py`` (training with polish, metrics,
influence for every training node; no bootstrap, which depends only on the test-set size):

* ``nodes``: 10⁴ … 10⁶ nodes at average degree 20 and 1000 training nodes;
* ``edges``: 10⁵ nodes, average degree 2 … 200 (10⁵ … 10⁷ edges), 1000 training nodes;
* ``train``: 2·10⁵ nodes at average degree 20, 100 … 10⁴ training nodes.

It fits ``log(seconds) = a + b·log(m · d̄)`` over every point, ``m`` the training nodes and ``d̄`` their mean
degree (the paper's complexity analysis promises ``b ≤ 1`` for a fixed model), for the per-training-node part of
the estimate (the i.i.d. loss derivatives and the non-i.i.d./direct terms: what that analysis counts) and for
the whole influence stage (which adds the Hessian solve, ``O(m·p²)``, and the test set's Γ and its gradient,
``O(n_test log n_test)``); reports the ratio of influence to training time per point, and draws
``docs/growth.png``.

    python bench/bench_growth.py [--quick] [--threads 2] [--png docs/growth.png]
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path
from typing import Any

import _common as C
import numpy as np
from bench_scale import audit_once

SWEEPS: dict[str, list[tuple[int, float, int]]] = {
    "nodes": [(n, 20.0, 1000) for n in (10_000, 30_000, 100_000, 300_000, 1_000_000)],
    "edges": [(100_000, d, 1000) for d in (2.0, 6.0, 20.0, 60.0, 200.0)],
    "train": [(200_000, 20.0, m) for m in (100, 300, 1000, 3000, 10_000)],
}
QUICK: dict[str, list[tuple[int, float, int]]] = {
    "nodes": [(n, 10.0, 200) for n in (2_000, 20_000, 200_000)],
    "edges": [(20_000, d, 200) for d in (2.0, 20.0, 200.0)],
    "train": [(50_000, 10.0, m) for m in (100, 1000, 10_000)],
}
STAGE_NAMES = ("generate", "training", "metrics", "influence")


def fit_exponent(x: list[float], y: list[float]) -> dict[str, float]:
    """Least squares ``log y = a + b·log x``; ``b`` with its R²."""
    lx, ly = np.log(np.asarray(x)), np.log(np.asarray(y))
    b, a = np.polyfit(lx, ly, 1)
    pred = a + b * lx
    ss_res = float(((ly - pred) ** 2).sum())
    ss_tot = float(((ly - ly.mean()) ** 2).sum()) or 1.0
    return {"exponent": float(b), "intercept": float(a), "r2": 1.0 - ss_res / ss_tot}


def per_node(rows: list[dict[str, Any]]) -> list[float]:
    """Seconds of the per-training-node part of each estimate."""
    return [r["influence_timings"]["per_node_terms"] + r["influence_timings"]["loss_derivatives"] for r in rows]


def influence_stage(rows: list[dict[str, Any]]) -> list[float]:
    return [r["stages"]["influence"]["seconds"] for r in rows]


def plot(points: dict[str, list[dict[str, Any]]], fit: dict[str, dict[str, float]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = {"nodes": ("nodes", "nodes"), "edges": ("edges", "edges"), "train": ("train", "training nodes")}
    fig, axes = plt.subplots(2, 4, figsize=(18, 8))
    for col, (sweep, rows) in enumerate(points.items()):
        key, label = keys[sweep]
        xs = [r[key] for r in rows]
        for stage in STAGE_NAMES:
            axes[0, col].loglog(xs, [r["stages"][stage]["seconds"] for r in rows], "o-", label=stage)
            axes[1, col].semilogx(xs, [r["stages"][stage]["peak_rss_gb"] for r in rows], "o-", label=stage)
        axes[0, col].set_title(f"time vs {label}")
        axes[1, col].set_title(f"peak RSS vs {label}")
        axes[0, col].set_ylabel("seconds")
        axes[1, col].set_ylabel("GiB")
        axes[1, col].set_xlabel(label)
        axes[0, col].legend(fontsize=8)
    every = [r for rows in points.values() for r in rows]
    work = [r["train"] * r["avg_train_neighbours"] for r in every]
    ax = axes[0, 3]
    grid = np.geomspace(min(work), max(work), 50)
    for key, values, marker in (
        ("per-node terms", per_node(every), "o"),
        ("influence stage", influence_stage(every), "s"),
    ):
        f = fit[key]
        line = ax.loglog(work, values, marker, label=key)[0]
        curve = np.exp(f["intercept"]) * grid ** f["exponent"]
        ax.loglog(grid, curve, "-", color=line.get_color(), label=f"fit: exponent {f['exponent']:.2f}")
    ax.set_xlabel("m · mean training-node degree")
    ax.set_ylabel("seconds")
    ax.set_title("influence vs m·d̄ (all sweeps)")
    ax.legend(fontsize=8)
    ax = axes[1, 3]
    ax.semilogx(work, [r["stages"]["influence"]["seconds"] / r["stages"]["training"]["seconds"] for r in every], "o")
    ax.axhline(1.0, color="grey", ls="--")
    ax.set_xlabel("m · mean training-node degree")
    ax.set_title("influence time / training time")
    fig.suptitle("bind-audit: cost growth of one audit (one-layer GCN, 1000 Adam epochs + polish)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    print(f"wrote {path}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="small sweeps (a minute), for a smoke run")
    p.add_argument("--sweeps", default="nodes,edges,train")
    p.add_argument("--epochs", type=int, default=1000)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--device", default="cpu")
    p.add_argument("--png", default="docs/growth.png")
    p.add_argument("--out", default=None)
    args = p.parse_args()
    C.setup(args)
    sweeps = QUICK if args.quick else SWEEPS
    points: dict[str, list[dict[str, Any]]] = {}
    for sweep in args.sweeps.split(","):
        points[sweep] = []
        for nodes, degree, train in sweeps[sweep]:
            t0 = time.perf_counter()
            row = audit_once(nodes, degree, train, epochs=args.epochs, bootstrap=0, device=args.device)
            row["wall_seconds"] = time.perf_counter() - t0
            points[sweep].append(row)
            s = row["stages"]
            print(
                f"[{sweep}] n={row['nodes']:>9,} E={row['edges']:>11,} m={row['train']:>6,} "
                + " ".join(f"{k}={s[k]['seconds']:.2f}s/{s[k]['peak_rss_gb']:.2f}G" for k in STAGE_NAMES),
                flush=True,
            )
    every = [r for rows in points.values() for r in rows]
    work = [r["train"] * r["avg_train_neighbours"] for r in every]
    fit = {
        "per-node terms": fit_exponent(work, per_node(every)),
        "influence stage": fit_exponent(work, influence_stage(every)),
    }
    ratios = [r["stages"]["influence"]["seconds"] / r["stages"]["training"]["seconds"] for r in every]
    for key, f in fit.items():
        print(f"\n{key}: seconds ~ (m·d̄)^{f['exponent']:.3f} (R² {f['r2']:.3f})", end="")
    print(f"\ninfluence/training time: max {max(ratios):.2f}, median {sorted(ratios)[len(ratios) // 2]:.2f}")
    rows = [
        [sweep, f"{r['nodes']:,}", f"{r['edges']:,}", f"{r['train']:,}", f"{r['avg_train_neighbours']:.1f}"]
        + [f"{r['stages'][k]['seconds']:.2f}" for k in STAGE_NAMES]
        + [f"{max(v['peak_rss_gb'] for v in r['stages'].values()):.2f}"]
        for sweep, rs in points.items()
        for r in rs
    ]
    print(C.table(["sweep", "nodes", "edges", "train", "d̄", *[f"{k} s" for k in STAGE_NAMES], "peak GiB"], rows))
    plot(points, fit, Path(args.png))
    summary = {
        "fit": fit,
        "influence_over_training": ratios,
        "goal_linear": fit["per-node terms"]["exponent"] <= 1.1,
        "goal_cheaper_than_training": max(ratios) < 1.0,
    }
    C.write_json("growth", {"machine": C.machine(), "args": vars(args), "points": points, "summary": summary}, args.out)
    if not all(math.isfinite(f["exponent"]) for f in fit.values()):
        raise SystemExit("fit failed")


if __name__ == "__main__":
    main()
