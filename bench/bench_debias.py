"""RQ3 benchmark: the paper's Table 2 rows (vanilla GCN, BIND 1%, BIND 10%), mean ± std over seeds.

Per dataset and seed: train the paper's GCN (1000 Adam epochs, then the float64 polish), estimate ΔΓ for all
training nodes, delete the most harmful non-overlapping node set at each budget and retrain from scratch with
the same settings and seed (``bind_core.debiasing.debias.debias``).

    python bench/bench_debias.py [--datasets income,recidivism] [--seeds 1,10,100] [--keep best_val]
"""

from __future__ import annotations

import time
from typing import Any

import _common as C

from bind_core.codec import encode
from bind_core.debiasing.debias import debias, report
from bind_core.influence import estimate, utility_influence
from bind_core.models.gnn import ModelConfig
from bind_core.training.fit import TrainConfig, train

KEYS = (("acc", "accuracy"), ("dsp", "delta_sp"), ("deo", "delta_eo"))


def _key(budget: float) -> str:
    """``bind_1`` for a 1% budget (the keys of ``_common.PAPER``); counts stay as they are."""
    return f"bind_{100 * budget:g}" if budget < 1 else f"bind_n{budget:g}"


def main() -> None:
    p = C.parser("RQ3: debiasing by deleting harmful training nodes (the paper's Table 2)")
    p.add_argument("--keep", default="best_val", help="TrainConfig.keep (best_val: the paper's rule)")
    p.add_argument("--budgets", default="0.01,0.1", help="comma-separated budgets")
    p.add_argument(
        "--utility", action="store_true", help="also the utility-aware variant (debias(utility=...), rows BIND+U)"
    )
    args = p.parse_args()
    C.setup(args)
    budgets = tuple(float(b) for b in args.budgets.split(","))
    result: dict[str, Any] = {"machine": C.machine(), "args": vars(args), "datasets": {}}
    for name, graph in C.datasets(args):
        runs = []
        for seed in C.seeds(args):
            t0 = time.perf_counter()
            model = train(graph, TrainConfig(seed=seed, keep=args.keep), ModelConfig())
            infl = estimate(model, graph)
            rows = [encode(r) for r in debias(model, graph, infl.delta, budgets=budgets)]
            utility_rows = []
            if args.utility:
                t1 = time.perf_counter()
                util = utility_influence(model, graph)
                utility_seconds = time.perf_counter() - t1
                utility_rows = [encode(r) for r in debias(model, graph, infl.delta, budgets=budgets, utility=util)]
            run = {
                "seed": seed,
                "vanilla": encode(report(model, graph)),
                "grad_norm": model.stationarity.grad_norm,
                "influence_summary": encode(infl.summary()),
                "budgets": [{k: v for k, v in r.items() if k != "before"} for r in rows],
                "seconds": time.perf_counter() - t0,
            }
            for b, r in zip(budgets, rows, strict=True):
                run[_key(b)] = r["after"]
                run[f"{_key(b)}_deleted"] = r["deleted"]
            if utility_rows:
                run["utility_seconds"] = utility_seconds
                run["useful_nodes"] = int((util > 0).sum())
                run["utility_budgets"] = [{k: v for k, v in r.items() if k != "before"} for r in utility_rows]
                for b, r in zip(budgets, utility_rows, strict=True):
                    run[f"{_key(b)}_u"] = r["after"]
                    run[f"{_key(b)}_u_deleted"] = r["deleted"]
            runs.append(run)
            print(
                f"{name} seed={seed}: vanilla acc {100 * run['vanilla']['accuracy']:.1f} "
                f"ΔSP {100 * run['vanilla']['delta_sp']:.1f} ΔEO {100 * run['vanilla']['delta_eo']:.1f}; "
                + "; ".join(
                    f"{b:g}: deleted {r['deleted']}/{r['requested']} acc {100 * r['after']['accuracy']:.1f} "
                    f"ΔSP {100 * r['after']['delta_sp']:.1f} ΔEO {100 * r['after']['delta_eo']:.1f}"
                    for b, r in zip(budgets, rows, strict=True)
                )
                + "".join(
                    f"; utility-aware {b:g}: deleted {r['deleted']} acc {100 * r['after']['accuracy']:.1f} "
                    f"ΔSP {100 * r['after']['delta_sp']:.1f} ΔEO {100 * r['after']['delta_eo']:.1f}"
                    for b, r in zip(budgets, utility_rows, strict=True)
                )
                + f"  ({run['seconds']:.0f}s, load {C.load_average():.1f})"
            )
        summary: dict[str, Any] = {}
        table_rows = []
        paper = C.PAPER.get(name, {})
        labels = [("vanilla", "vanilla GCN")] + [(_key(b), f"BIND {100 * b:g}%") for b in budgets]
        if args.utility:
            labels += [(f"{_key(b)}_u", f"BIND+U {100 * b:g}% (utility-aware)") for b in budgets]
        for key, label in labels:
            stats = {short: C.mean_std(100 * r[key][long] for r in runs) for short, long in KEYS}
            stats["gamma_sp"] = C.mean_std(100 * r[key]["gamma_sp"] for r in runs)
            stats["gamma_eo"] = C.mean_std(100 * r[key]["gamma_eo"] for r in runs)
            summary[key] = stats
            ref = paper.get(key, {})
            digits = 2 if name == "recidivism" else 1
            table_rows.append(
                [
                    label,
                    *(C.fmt(*stats[s], digits) for s, _ in KEYS),
                    C.fmt(*stats["gamma_sp"], 2),
                    C.fmt(*stats["gamma_eo"], 2),
                    *(C.fmt(*ref[s], digits) if s in ref else "–" for s, _ in KEYS),
                ]
            )
        print(f"\n## {name}: Table 2 rows, seeds {args.seeds} (percent, mean ± std)\n")
        print(
            C.table(
                ["method", "acc", "ΔSP", "ΔEO", "Γ_SP", "Γ_EO", "paper acc", "paper ΔSP", "paper ΔEO"],
                table_rows,
            )
        )
        result["datasets"][name] = {"runs": runs, "summary": summary}
    C.write_json("bench_debias", result, args.out)


if __name__ == "__main__":
    main()
