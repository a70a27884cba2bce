"""The step estimate's chord steps with and without Anderson mixing and the L-BFGS finish, against the proximal
truth, on smooth two-layer models as Adam leaves them.

    python bench/bench_mixing.py --nodes 600 --epochs 300 --models gcn,sage,gin --sample 60

Trains each two-layer GELU model on ``synthetic(--nodes, seed=3)`` (``--epochs`` of Adam, no polish: the weights an
audit of a model trained here attributes), forms its damped curvature once, and settles the deletion of each of the
first ``--sample`` training nodes three ways: the plain chord steps, the steps Anderson-mixed
(:mod:`bind_core.influence.anderson`), and mixed then finished by L-BFGS where they stop short (the audit's way,
:meth:`~bind_core.influence.step.Stepper.delete`). Each deletion's proximal optimum is then re-optimised by L-BFGS
(the self-check's ground truth, :func:`~bind_core.debiasing.proximal_truth.proximal_reoptimize`); where the weights
go beyond reach there is no minimum near ``θ̂`` and no truth. Prints per model and way: the seconds, the steps, how
many deletions settled, how many of the rest have no minimum (and how many deletions the estimate tells so, against
the truth), the largest distance from the truth (settled and not, in units of the largest |ΔΓ|) and Pearson with
the truth over the deletions that have one; ``--out`` writes them as JSON.
"""

from __future__ import annotations

import argparse
import json
import time

import _common as C
import numpy as np
import torch

from bind_core.data.datasets import synthetic
from bind_core.debiasing.proximal_truth import proximal_reoptimize
from bind_core.debiasing.validation import gammas
from bind_core.errors import NonFiniteError
from bind_core.influence import step
from bind_core.influence.functional import FunctionalModel
from bind_core.influence.step import Deletion, Stepper
from bind_core.models.gnn import ModelConfig
from bind_core.training.fit import TrainConfig, TrainedModel, train

WAYS = {"plain": (False, False), "mixed": (True, False), "finished": (True, True)}
"""Each way's chord steps mixed or not, and finished by L-BFGS or not."""


def _settle(stepper: Stepper, count: int, way: str) -> tuple[list[Deletion], float]:
    """The first ``count`` deletions settled ``way`` (:data:`WAYS`), and the seconds they took."""
    mixed, finished = WAYS[way]
    kept, budget = Stepper.mixes, step.FINISH_EVALUATIONS
    Stepper.mixes = property(lambda _: mixed)
    step.FINISH_EVALUATIONS = budget if finished else 0
    try:
        start = time.perf_counter()
        out = [stepper.delete([p]) for p in range(count)]
        return out, time.perf_counter() - start
    finally:
        Stepper.mixes, step.FINISH_EVALUATIONS = kept, budget


def _truth(model: TrainedModel, fm: FunctionalModel, stepper: Stepper, position: int) -> torch.Tensor | None:
    """``[ΔΓ_SP, ΔΓ_EO]`` at the proximal optimum of deleting the training node at ``position``; ``None`` where there
    is no minimum near ``θ̂``."""
    graph = fm.graph
    reduced, _ = graph.without_nodes(graph.train_idx[position : position + 1])
    coordinates = stepper.curvature.coordinates()
    try:
        again = proximal_reoptimize(
            model, reduced, num_train=stepper.m, damping=stepper.mu, anchor=graph, coordinates=coordinates, on_anchor=fm
        )
    except NonFiniteError:
        return None
    before, after = gammas(model, graph), gammas(again, reduced)
    return torch.tensor([after[0] - before[0], after[1] - before[1]], dtype=torch.float64)


def _row(deletions: list[Deletion], truths: list[torch.Tensor | None], tol: float, seconds: float) -> dict[str, object]:
    """One way's figures against the truths."""
    scale = max(float(t.abs().max()) for t in truths if t is not None)
    settled = [d.residual <= tol for d in deletions]

    def error(want: bool) -> float:
        gaps = [
            float((d.delta - t).abs().max())
            for d, t, s in zip(deletions, truths, settled, strict=True)
            if t is not None and s == want and d.far is None
        ]
        return max(gaps, default=0.0) / scale

    pairs = [  # the deletions with a value and a truth (on a model with kinks the two may disagree on "no minimum")
        (float(d.delta.mean()), float(t.mean()))
        for d, t in zip(deletions, truths, strict=True)
        if t is not None and d.far is None
    ]
    est, tru = np.array(pairs).T
    return {
        "seconds": seconds,
        "steps": sum(d.taken for d in deletions),
        "settled": sum(settled),
        "unsettled": len(deletions) - sum(settled),
        "unsettled_without_minimum": sum(t is None for t, s in zip(truths, settled, strict=True) if not s),
        "told_without_minimum": sum(d.far is not None for d in deletions),
        "told_and_truth_agree": sum((d.far is not None) == (t is None) for d, t in zip(deletions, truths, strict=True)),
        "error_settled": error(True),
        "error_unsettled": error(False),
        "pearson": float(np.corrcoef(est, tru)[0, 1]),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=600)
    p.add_argument("--epochs", type=int, default=300)
    p.add_argument("--models", default="gcn,sage,gin")
    p.add_argument("--sample", type=int, default=60)
    p.add_argument("--out", default="")
    args = p.parse_args()
    torch.set_num_threads(1)
    graph = synthetic(args.nodes, seed=3)
    results = {}
    for arch in args.models.split(","):
        model = train(graph, TrainConfig(epochs=args.epochs, polish=False), ModelConfig(arch=arch, layers=2))
        fm = FunctionalModel.from_trained(model, graph)
        stepper = Stepper.build(fm)
        count = min(args.sample, stepper.m)
        settled = {way: _settle(stepper, count, way) for way in WAYS}
        truths = [_truth(model, fm, stepper, p) for p in range(count)]
        results[arch] = {way: _row(out, truths, stepper.tol, seconds) for way, (out, seconds) in settled.items()}
        results[arch] |= {"without_minimum": sum(t is None for t in truths), "deletions": count}
        for way in WAYS:
            r = results[arch][way]
            print(
                f"two-layer {arch}, {count} deletions, {way:8s}: {r['seconds']:5.1f} s, {r['steps']:4d} steps, "
                f"settled {r['settled']:3d}, unsettled {r['unsettled']:3d} ({r['unsettled_without_minimum']} without "
                f"a minimum near θ̂; {r['told_without_minimum']} told so, the truth agreeing on "
                f"{r['told_and_truth_agree']} of {count}); from the truth: settled ≤ {r['error_settled']:.1e}, "
                "unsettled ≤ "
                f"{r['error_unsettled']:.1e} of the largest |ΔΓ|; Pearson {r['pearson']:.8f}",
                flush=True,
            )
    if args.out:
        with open(args.out, "w") as fh:
            json.dump({"machine": C.machine(), "args": vars(args), "results": results}, fh, indent=1)
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
