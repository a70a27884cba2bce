"""Issue 2 benchmark: 1000 Adam epochs of the paper's GCN, then the float64 L-BFGS polish, per dataset and seed.

For each keep rule (``best_val``, the paper's; ``last``, what the reference code ends up with) the model is
trained with ``TrainConfig(polish=False)`` (Adam only: timed and evaluated), then polished with
``bind_core.training.polish.polish`` (timed and evaluated) — exactly what ``train(..., TrainConfig(polish=True))`` does.

    python bench/bench_training.py [--datasets income,recidivism] [--seeds 1,10,100] [--keeps best_val,last]
"""

from __future__ import annotations

import time
from typing import Any

import _common as C

from bind_core.codec import encode
from bind_core.debiasing.debias import report
from bind_core.models.gnn import ModelConfig
from bind_core.training.fit import TrainConfig, train
from bind_core.training.polish import polish

METRICS = ("accuracy", "delta_sp", "delta_eo", "gamma_sp", "gamma_eo")


def run_one(graph: Any, seed: int, keep: str) -> dict[str, Any]:
    cfg = TrainConfig(seed=seed, polish=False, keep=keep)
    t0 = time.perf_counter()
    model = train(graph, cfg, ModelConfig())
    train_wall = time.perf_counter() - t0
    adam = encode(report(model, graph))
    adam_grad = model.stationarity.grad_norm
    t0 = time.perf_counter()
    polish(model, graph, max_iter=TrainConfig().polish_max_iter, tol=TrainConfig().polish_tol)
    polish_wall = time.perf_counter() - t0
    polished = encode(report(model, graph))
    return {
        "seed": seed,
        "keep": keep,
        "adam_seconds": model.history.seconds,
        "adam_wall_seconds": train_wall,
        "best_epoch": model.history.best_epoch,
        "adam_grad_norm": adam_grad,
        "polish_seconds": polish_wall,
        "polish_iterations": model.stationarity.iterations,
        "polished_grad_norm": model.stationarity.grad_norm,
        "adam": adam,
        "polished": polished,
    }


def summarise(runs: list[dict[str, Any]], which: str) -> dict[str, tuple[float, float]]:
    return {k: C.mean_std(100 * r[which][k] for r in runs) for k in METRICS}


def main() -> None:
    p = C.parser("1000-epoch GCN training: time, accuracy and fairness (issue 2)")
    p.add_argument("--keeps", default="best_val,last", help="comma-separated keep rules")
    args = p.parse_args()
    C.setup(args)
    keeps = [k for k in args.keeps.split(",") if k]
    result: dict[str, Any] = {"machine": C.machine(), "args": vars(args), "datasets": {}}
    for name, graph in C.datasets(args):
        runs = []
        for keep in keeps:
            for seed in C.seeds(args):
                r = run_one(graph, seed, keep)
                runs.append(r)
                print(
                    f"{name} keep={keep} seed={seed}: adam {r['adam_seconds']:.2f}s (best epoch {r['best_epoch']}), "
                    f"polish {r['polish_seconds']:.2f}s ({r['polish_iterations']} it, |g| "
                    f"{r['polished_grad_norm']:.1e}); acc adam {100 * r['adam']['accuracy']:.1f} "
                    f"polished {100 * r['polished']['accuracy']:.1f}  [load {C.load_average():.1f}]"
                )
        summary: dict[str, Any] = {}
        rows = []
        for keep in keeps:
            sel = [r for r in runs if r["keep"] == keep]
            adam_s = C.mean_std(r["adam_seconds"] for r in sel)
            pol_s = C.mean_std(r["polish_seconds"] for r in sel)
            for which in ("adam", "polished"):
                s = summarise(sel, which)
                summary[f"{keep}/{which}"] = {"metrics_percent": s, "adam_seconds": adam_s, "polish_seconds": pol_s}
                rows.append(
                    [
                        f"{keep} / {'Adam only' if which == 'adam' else 'Adam + polish'}",
                        C.fmt(*adam_s, 2) + (f" + {C.fmt(*pol_s, 2)}" if which == "polished" else ""),
                        *(C.fmt(*s[k], 1 if k in ("accuracy", "delta_sp", "delta_eo") else 2) for k in METRICS),
                    ]
                )
            summary[f"{keep}/best_epochs"] = [r["best_epoch"] for r in sel]
        paper = C.PAPER.get(name, {}).get("vanilla")
        if paper:
            rows.append(["paper (vanilla GCN)", "–", C.fmt(*paper["acc"]), C.fmt(*paper["dsp"]), C.fmt(*paper["deo"])])
            rows[-1] += ["–", "–"]
        ref = C.REFERENCE_CODE.get(name)
        if ref:
            rows.append(
                [
                    "reference code (seed 10)",
                    f"{ref['train_s_1thread']:.0f}",
                    C.fmt(ref["acc"]),
                    C.fmt(ref["dsp"]),
                    C.fmt(ref["deo"]),
                    "–",
                    "–",
                ]
            )
        print(f"\n## {name}: GCN, 1000 epochs, seeds {args.seeds} (mean ± std; metrics in percent)\n")
        print(C.table(["model", "seconds (Adam [+ polish])", "acc", "ΔSP", "ΔEO", "Γ_SP", "Γ_EO"], rows))
        result["datasets"][name] = {"runs": runs, "summary": summary}
    C.write_json("bench_training", result, args.out)


if __name__ == "__main__":
    main()
