"""What the polish does to a model: Adam's best validation epoch against the same model polished, on the test split.

    python bench/bench_polish_effect.py --datasets income --seeds 10 --archs gcn,sage --layers 2 \
        --out docs/bench/polish_effect_income.json

Each model is trained with Adam alone (``TrainConfig(polish=False)``, its best validation epoch kept), evaluated,
then polished as ``train`` would polish it (``bind_core.training.polish.polish``: float64 L-BFGS, then Newton) and
evaluated again: accuracy, ΔSP, ΔEO, Γ_SP, Γ_EO on the test nodes (binary labels and groups), and the share of test
predictions the polish changed. Why the audit no longer polishes the deeper models it trains (docs/METHOD.md, "The
model as given").
"""

from __future__ import annotations

from typing import Any

import _common as C
import torch

from bind_core.fairness.metrics import gamma_eo, gamma_sp
from bind_core.models.gnn import ModelConfig
from bind_core.training.fit import TrainConfig, TrainedModel, train
from bind_core.training.polish import polish


def evaluate(model: TrainedModel, graph: Any) -> tuple[dict[str, float], torch.Tensor]:
    """The model's test metrics (percent) and its test predictions."""
    test = graph.test_idx
    proba = model.predict_proba(graph, test).double()
    pred, y, sens = proba.argmax(1), graph.y[test], graph.sens[test]
    rate = [float(pred[sens == g].double().mean()) for g in (0, 1)]
    tpr = [float(pred[(sens == g) & (y == 1)].double().mean()) for g in (0, 1)]
    metrics = {
        "accuracy": 100 * float((pred == y).double().mean()),
        "delta_sp": 100 * abs(rate[0] - rate[1]),
        "delta_eo": 100 * abs(tpr[0] - tpr[1]),
        "gamma_sp": 100 * float(gamma_sp(proba, sens)),
        "gamma_eo": 100 * float(gamma_eo(proba, y, sens)),
    }
    return {k: round(v, 2) for k, v in metrics.items()}, pred


def run_one(graph: Any, arch: str, layers: int, seed: int) -> dict[str, Any]:
    model = train(graph, TrainConfig(seed=seed, polish=False), ModelConfig(arch=arch, layers=layers))
    adam, before = evaluate(model, graph)
    polish(model, graph)
    polished, after = evaluate(model, graph)
    changed = round(100 * float((before != after).double().mean()), 2)
    return {"arch": arch, "layers": layers, "seed": seed, "adam": adam, "polished": polished, "changed": changed}


def main() -> None:
    p = C.parser(__doc__.splitlines()[0], seeds="10")
    p.set_defaults(datasets="income")
    p.add_argument("--archs", default="gcn,sage", help="comma-separated architectures")
    p.add_argument("--layers", type=int, default=2, help="message-passing layers")
    args = p.parse_args()
    C.setup(args)
    runs = []
    for name, graph in C.datasets(args):
        for arch in args.archs.split(","):
            for seed in C.seeds(args):
                run = {"dataset": name, **run_one(graph, arch, args.layers, seed)}
                print(
                    f"{name} {arch}-{args.layers} seed {seed}: Adam {run['adam']}; polished {run['polished']}; "
                    f"test predictions changed {run['changed']}%",
                    flush=True,
                )
                runs.append(run)
    C.write_json("bench_polish_effect", {"machine": C.machine(), "args": vars(args), "runs": runs}, args.out)


if __name__ == "__main__":
    main()
