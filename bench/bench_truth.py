"""Issue 36: the self-check's proximal ground truth in the weights' coordinates against the damped curvature's.

    python bench/bench_truth.py --dataset recidivism --data-root ../shared/datasets --sample 12

Trains the two-layer GCN as the audit does (as Adam leaves it), forms the step estimate's damped curvature, and
re-optimises the proximal Bregman objective without each of ``--sample`` training nodes (the self-check's sample)
both ways: L-BFGS in the weights (the identity coordinates) and in the curvature's. Prints per node the evaluations,
the seconds, the largest gradient entry reached and the difference of the two truths' ΔΓ, then the totals; ``--out``
writes them as JSON.
"""

from __future__ import annotations

import argparse
import json
import time

import _common as C
import torch

from bind_core import load_dataset
from bind_core.debiasing.proximal_truth import proximal_reoptimize
from bind_core.debiasing.validation import gammas, sample_positions
from bind_core.influence.curvature import Coordinates
from bind_core.influence.functional import FunctionalModel
from bind_core.influence.step import Stepper
from bind_core.models.gnn import ModelConfig
from bind_core.training.fit import TrainConfig, train


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dataset", default="recidivism")
    p.add_argument("--data-root", default="../shared/datasets")
    p.add_argument("--sample", type=int, default=12)
    p.add_argument("--arch", default="gcn")
    p.add_argument("--out", default="")
    args = p.parse_args()
    torch.set_num_threads(1)
    graph = load_dataset(args.dataset, root=args.data_root)
    model = train(graph, TrainConfig(), ModelConfig(arch=args.arch, layers=2))
    fm = FunctionalModel.from_trained(model, graph)
    stepper = Stepper.build(fm)
    curvature = stepper.curvature.coordinates()
    assert curvature is not None
    size = fm.num_parameters
    weights = Coordinates(basis=torch.eye(size, dtype=torch.float64), scale=torch.ones(size, dtype=torch.float64))
    m = int(graph.train_idx.numel())
    before = gammas(model, graph)
    rows = []
    for position in sample_positions(m, args.sample, 0):
        reduced, _ = graph.without_nodes(graph.train_idx[position : position + 1])
        row: dict[str, float | int] = {"position": position}
        values = {}
        for name, coordinates in (("weights", weights), ("curvature", curvature)):
            start = time.perf_counter()
            again = proximal_reoptimize(
                model, reduced, num_train=m, damping=stepper.mu, anchor=graph, coordinates=coordinates, on_anchor=fm
            )
            row[f"{name}_seconds"] = time.perf_counter() - start
            row[f"{name}_evaluations"] = int(again.stationarity.extra["evaluations"])
            row[f"{name}_max_grad"] = float(again.stationarity.max_abs_grad or 0.0)
            after = gammas(again, reduced)
            values[name] = 0.5 * (after[0] - before[0]) + 0.5 * (after[1] - before[1])
        row["delta_gamma"] = values["weights"]
        row["difference"] = abs(values["weights"] - values["curvature"])
        rows.append(row)
        print(
            f"node {position:5d}: weights {row['weights_evaluations']:5d} evaluations {row['weights_seconds']:6.2f} s "
            f"grad {row['weights_max_grad']:.1e} | curvature {row['curvature_evaluations']:3d} evaluations "
            f"{row['curvature_seconds']:5.2f} s grad {row['curvature_max_grad']:.1e} | ΔΓ {row['delta_gamma']:+.3e}, "
            f"apart {row['difference']:.1e}"
        )
    total = {k: sum(float(r[k]) for r in rows) for k in ("weights_seconds", "curvature_seconds")}
    largest = max(abs(float(r["delta_gamma"])) for r in rows)
    apart = max(float(r["difference"]) for r in rows) / largest
    print(
        f"{args.dataset}, two-layer {args.arch}, {len(rows)} nodes: weights {total['weights_seconds']:.1f} s, "
        f"curvature {total['curvature_seconds']:.1f} s; the truths apart by at most {apart:.1e} of the largest |ΔΓ|"
    )
    if args.out:
        doc = {"machine": C.machine(), "args": vars(args), "rows": rows, "total": total, "apart": apart}
        with open(args.out, "w") as fh:
            json.dump(doc, fh, indent=1)
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
