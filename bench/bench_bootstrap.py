"""Issue 8 benchmark: the cost of 1000 bootstrap resamples (all metrics' intervals) next to the audit itself.

Income, the paper's GCN at seed 10 (polished). The bootstrap is timed alone (best and mean of ``--repeats``
calls of ``bind_core.fairness.bootstrap.bootstrap_metrics`` on the audited model's test probabilities); the audit is
``run_audit`` with the defaults (its stage timings; the bootstrap is part of its metrics stage, and the ratio
is taken against the audit without it). Goal: under 5%.

    python bench/bench_bootstrap.py [--datasets income] [--resamples 1000] [--repeats 5] [--threads 1]
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import _common as C

from bind_core.fairness.bootstrap import bootstrap_metrics
from bind_core.pipeline.audit import AuditConfig, run_audit


def run_one(graph: Any, resamples: int, repeats: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    result = run_audit(graph, AuditConfig(bootstrap=resamples))
    audit_wall = time.perf_counter() - t0
    test = graph.test_idx
    proba = result.model.predict_proba(graph, test).double()
    y, sens = graph.y[test], graph.sens[test]
    times = []
    for r in range(repeats):
        t0 = time.perf_counter()
        bootstrap_metrics(proba, y, sens, resamples=resamples, seed=r)
        times.append(time.perf_counter() - t0)
    boot = statistics.mean(times)
    without = audit_wall - boot
    return {
        "test_nodes": int(test.numel()),
        "resamples": resamples,
        "bootstrap_seconds": times,
        "bootstrap_best": min(times),
        "bootstrap_mean": boot,
        "audit_wall_seconds": audit_wall,
        "audit_stage_seconds": result.timings,
        "ratio_to_audit_without_bootstrap": boot / without,
        "goal_met": boot / without < 0.05,
    }


def main() -> None:
    p = C.parser(__doc__ or "", seeds="10")
    p.set_defaults(datasets="income")
    p.add_argument("--resamples", type=int, default=1000)
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()
    C.setup(args)
    rows, out = [], {}
    for name, graph in C.datasets(args):
        r = run_one(graph, args.resamples, args.repeats)
        out[name] = r
        rows.append(
            [
                name,
                r["test_nodes"],
                f"{r['bootstrap_best']:.3f} / {r['bootstrap_mean']:.3f}",
                f"{r['audit_wall_seconds']:.1f}",
                ", ".join(f"{k} {v:.2f}" for k, v in r["audit_stage_seconds"].items()),
                f"{100 * r['ratio_to_audit_without_bootstrap']:.2f}%",
            ]
        )
    print(C.table(["dataset", "test nodes", "bootstrap s (best / mean)", "audit s", "stages s", "ratio"], rows))
    C.write_json("bench_bootstrap", {"machine": C.machine(), "load_average": C.load_average(), "results": out},
                 args.out)  # fmt: skip


if __name__ == "__main__":
    main()
