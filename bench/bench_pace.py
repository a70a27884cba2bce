"""Can a running audit's time left be told from its progress (``app.audits.pace``)?

For each synthetic graph and architecture, run one audit with a progress callback that records every report, then
print, per stage: its seconds, how far its reported fraction strays from the time spent (the largest
``|fraction - elapsed / stage seconds|``: 0 is perfectly linear), and the cost estimate's seconds per flop
(:func:`bind_core.pipeline.audit_cost` against ``results.timings``). The first says whether a stage's pace so far
carries to its end; the last whether the cost estimate could time the stages not yet run (it cannot where the
seconds per flop differ widely between stages).

    python bench/bench_pace.py                       # 2000 and 5000 nodes, GCN with 1 and 2 layers, SAGE with 2
    python bench/bench_pace.py --nodes 3000 --models gcn2
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import bind_core as bc
from bind_core.pipeline import GraphSize, audit_cost

MODELS = {"gcn1": ("gcn", 1), "gcn2": ("gcn", 2), "sage2": ("sage", 2)}


def one(nodes: int, model: str) -> None:
    arch, layers = MODELS[model]
    graph = bc.synthetic(nodes, seed=1)
    config = bc.AuditConfig()
    config = dataclasses.replace(config, model=dataclasses.replace(config.model, arch=arch, layers=layers))
    cost = audit_cost(config, GraphSize.of_summary(graph.summary()), trained=False)
    reports: list[tuple[float, str, float]] = []
    start = time.monotonic()
    output = bc.run_audit(graph, config, progress=lambda stage, f: reports.append((time.monotonic(), stage, f)))
    total = time.monotonic() - start
    timings = output.to_dict()["timings"]
    print(f"\n{nodes} nodes, {model}: {total:.1f} s")
    print(f"  {'stage':<11} {'seconds':>8} {'reports':>8} {'off linear':>11} {'s per flop':>11}")
    for stage in ("training", "influence", "debiasing", "validation"):
        seen = [(t, f) for t, s, f in reports if s == stage]
        if len(seen) < 2:
            continue
        t0, t1 = seen[0][0], seen[-1][0]
        span = max(t1 - t0, 1e-9)
        off = max(abs(f - (t - t0) / span) for t, f in seen)
        work = cost.work.get(stage) or 0.0
        per_flop = f"{timings.get(stage, 0.0) / work:.1e}" if work else "—"
        print(f"  {stage:<11} {timings.get(stage, 0.0):>8.2f} {len(seen):>8} {off:>11.3f} {per_flop:>11}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", default="2000,5000", help="comma-separated graph sizes")
    parser.add_argument("--models", default="gcn1,gcn2,sage2", help=f"comma-separated, of {', '.join(MODELS)}")
    args = parser.parse_args()
    for nodes in (int(n) for n in args.nodes.split(",")):
        for model in args.models.split(","):
            one(nodes, model)


if __name__ == "__main__":
    main()
