"""The step estimate's L-BFGS finish on models with kinks: what its patience buys.

A deletion whose chord steps stall (a ReLU model's kinks) is finished by L-BFGS, whose best point is the lowest
objective it evaluates; the search ends once ``patience`` evaluations in a row have not lowered it by
:data:`~bind_core.influence.lbfgs.CHANGE` (:data:`bind_core.influence.step.FINISH_PATIENCE`). A smaller patience stops
the same search earlier (the evaluations before the stop are the same), so one long search per deletion (patience
300) gives every smaller patience's stop and best point. For each model (PyG, trained as PyG users train it, audited
as given: ``bench_as_given``'s) and ``--deletions`` random training nodes, it prints per patience the finish's mean
evaluations and how far each deletion's ΔΓ (λ = 0.5) lies from the longest search's.

    python bench/bench_finish.py --datasets income --models GCN2,SAGE2,GCN3,GCN3BN --seeds 10 --deletions 40
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from _common import machine, parser, setup, write_json
from bench_as_given import add_training_options, each_run, supplied

import bind_core.influence.step as step
from bind_core.data.graph import Graph
from bind_core.influence.functional import FunctionalModel
from bind_core.influence.lbfgs import CHANGE

PATIENCES = (5, 10, 15, 20, 300)
LONGEST = PATIENCES[-1]


def _stop(trace: list[tuple[float, float, torch.Tensor]], patience: int, tol: float) -> tuple[int, torch.Tensor]:
    """Where a search with ``patience`` stops on the evaluations ``trace`` (value, largest gradient entry, weights) of
    the longest one, and its best point (:func:`bind_core.influence.lbfgs.minimise`'s rule)."""
    best_value, best, mark, since = math.inf, trace[0][2], math.inf, 0
    for k, (value, largest, weights) in enumerate(trace):
        if value < best_value:
            best_value, best = value, weights
        if largest <= tol:
            return k + 1, best
        lower = mark == math.inf or best_value < mark - CHANGE * max(1.0, abs(mark))
        mark, since = (best_value, 0) if lower else (mark, since + 1)
        if since >= patience:
            return k + 1, best
    return len(trace), best


def run_one(graph: Graph, name: str, seed: int, cli: Any) -> dict[str, Any]:
    model = supplied(graph, name, seed, cli).model
    stepper = step.Stepper.build(FunctionalModel.from_trained(model, graph))
    trace: list[tuple[float, float, torch.Tensor]] = []
    real = step.minimise

    def recording(evaluate: Any, *a: Any, **k: Any) -> Any:
        def recorded(weights: torch.Tensor) -> Any:
            value, grad = evaluate(weights)
            trace.append((float(value), float(grad.abs().max()), weights.detach().clone()))
            return value, grad

        return real(recorded, *a, **k)

    step.minimise, kept = recording, step.FINISH_PATIENCE
    step.FINISH_PATIENCE = LONGEST
    picks = torch.randperm(stepper.m, generator=torch.Generator().manual_seed(0))[: cli.deletions].tolist()
    deltas: dict[int, list[float]] = {p: [] for p in PATIENCES}
    evaluations: dict[int, list[int]] = {p: [] for p in PATIENCES}
    try:
        for pos in picks:
            trace.clear()
            out = stepper.delete([pos])
            if out.far is not None:
                continue
            reduced = stepper.reducer.reduce(graph.train_idx[[pos]]).inputs
            for patience in PATIENCES:
                if not trace:  # settled by the chord steps: no finish
                    deltas[patience].append(0.5 * float(out.delta.sum()))
                    evaluations[patience].append(0)
                    continue
                stop, best = _stop(trace, patience, stepper.tol)
                with torch.no_grad():
                    delta = stepper.gammas(stepper._test_proba(best, reduced)) - stepper.base_gamma
                deltas[patience].append(0.5 * float(delta.sum()))
                evaluations[patience].append(stop)
    finally:
        step.minimise, step.FINISH_PATIENCE = real, kept
    longest = np.asarray(deltas[LONGEST])
    rows = {
        str(p): {
            "finish_evaluations_mean": float(np.mean(evaluations[p])),
            "max_difference_from_longest": float(np.abs(np.asarray(deltas[p]) - longest).max()),
            "pearson_with_longest": float(np.corrcoef(deltas[p], longest)[0, 1]),
        }
        for p in PATIENCES
    }
    return {"model": name, "seed": seed, "deletions": len(longest), "spread": float(longest.std()), "patience": rows}


def main() -> None:
    p = parser(__doc__.splitlines()[0], seeds="10")
    add_training_options(p, models="GCN2,SAGE2,GCN3,GCN3BN", hidden=32)
    p.add_argument("--deletions", type=int, default=40)
    args = p.parse_args()
    setup(args)
    out = []
    for gname, graph, name, seed in each_run(args):
        row = {"graph": gname} | run_one(graph, name, seed, args)
        out.append(row)
        print(f"{gname} {name} seed {seed}: {row['deletions']} deletions, spread of ΔΓ {row['spread']:.2e}")
        for patience, figures in row["patience"].items():
            print(
                f"  patience {patience:>3}: finish {figures['finish_evaluations_mean']:6.1f} evaluations, "
                f"max |ΔΓ − longest's| {figures['max_difference_from_longest']:.2e}, "
                f"Pearson {figures['pearson_with_longest']:.6f}",
                flush=True,
            )
        write_json("finish", {"machine": machine(), "args": vars(args), "rows": out}, args.out)


if __name__ == "__main__":
    main()
