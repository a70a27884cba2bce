"""The model as given (issue 32): PyG models trained by plain PyG with early stopping, audited as supplied.

For each dataset, model and seed: train a ``torch_geometric.nn.models`` model as a PyG user does (Adam, lr 0.01,
weight decay 5e-4, at most ``--epochs`` epochs, the weights of the best validation loss kept, stopped after
``--patience`` epochs without improvement), save it as safetensors + a ``torch_geometric`` config, and audit it as
given (:func:`bind_core.pipeline.reference.prepare_for_audit`):

- the metrics as the user's model gives them (its own float64 forward pass) against the audit's (the largest
  difference);
- how far from stationary the weights are (:func:`bind_core.training.stationarity.describe_stationarity`);
- per node (``--sample`` random training nodes, the self-check's draw): the step estimate of each drawn node against
  the proximal Bregman response re-optimised to convergence (the defined ground truth), Pearson and Spearman, with
  the deletions whose objective has no finite optimum counted apart;
- with ``--debias``: the full estimate and BIND's ``--budgets`` against random deletion, every retraining from scratch
  with the user's recipe (the config's training section, early stopping included) over ``--debias-seeds``, with the
  noise floor.

    python bench/bench_as_given.py --datasets income,recidivism --seeds 1,10,100 --sample 10
    python bench/bench_as_given.py --datasets income --models GCN2 --seeds 10 --debias
    python bench/bench_as_given.py --datasets income,recidivism --models GCN2BN,SAGE2BN --seeds 10 --sample 10
    python bench/bench_as_given.py --datasets income,recidivism --models REF_GCN,REF_SAGE,REF_GAT --seeds 10 --sample 10
"""

from __future__ import annotations

import argparse
import copy
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from _common import datasets, machine, parser, seeds, setup, table, write_json
from safetensors.torch import save
from scipy.stats import pearsonr, spearmanr
from torch_geometric.nn import models

from bind_core.codec import encode
from bind_core.data.graph import Graph
from bind_core.debiasing.validation import gammas, retrain_without, sample_positions
from bind_core.errors import NonFiniteError
from bind_core.fairness.metrics import evaluate
from bind_core.influence.functional import FunctionalModel
from bind_core.influence.step import Stepper
from bind_core.pipeline.audit import AuditConfig, run_audit
from bind_core.pipeline.reference import prepare_for_audit
from bind_core.training.fit import TrainedModel
from bind_core.training.stationarity import describe_stationarity

MODELS = {
    "GCN2": ("GCN", {"num_layers": 2}),
    "SAGE2": ("GraphSAGE", {"num_layers": 2}),
    "GAT1": ("GAT", {"num_layers": 1}),
    "GCN2BN": ("GCN", {"num_layers": 2, "norm": "batch_norm"}),
    "SAGE2BN": ("GraphSAGE", {"num_layers": 2, "norm": "batch_norm"}),
    "GCN3": ("GCN", {"num_layers": 3}),
    "GCN3BN": ("GCN", {"num_layers": 3, "norm": "batch_norm"}),
    "SAGE3": ("GraphSAGE", {"num_layers": 3}),
    "GCN2LN": ("GCN", {"num_layers": 2, "norm": "layer_norm", "norm_kwargs": {"mode": "node"}}),
    "SAGE2LN": ("GraphSAGE", {"num_layers": 2, "norm": "layer_norm", "norm_kwargs": {"mode": "node"}}),
    "GCN4": ("GCN", {"num_layers": 4}),
    "SAGE4": ("GraphSAGE", {"num_layers": 4}),
    "GAT2": ("GAT", {"num_layers": 2, "heads": 2}),
    "GATv2_1": ("GAT", {"num_layers": 1, "v2": True}),
    "GATv2_2": ("GAT", {"num_layers": 2, "v2": True, "heads": 2}),
    "GAT1R": ("GAT", {"num_layers": 1, "residual": True}),
    # The BIND reference code's backbones (NIFTY's) as PyG's classes build them (docs/API.md): the paper's GCN (no
    # activation before its classifier), SAGE normalising each output before ReLU and a batch norm, GAT the same.
    "REF_GCN": ("GCN", {"num_layers": 1, "jk": "last", "act": None, "dropout": 0.5}),
    "REF_SAGE": (
        "GraphSAGE",
        {"num_layers": 1, "jk": "last", "normalize": True, "norm": "batch_norm", "act_first": True, "dropout": 0.5},
    ),
    "REF_GAT": ("GAT", {"num_layers": 1, "jk": "last", "norm": "batch_norm", "act_first": True, "dropout": 0.5}),
}
DEFAULT_MODELS = ("GCN2", "SAGE2", "GAT1")
"""The models run unless ``--models`` names others (the normalised and deeper ones by name)."""
METRICS = ("accuracy", "delta_sp", "delta_eo", "gamma_sp", "gamma_eo", "gamma")


def train_pyg(graph: Graph, cls: str, args: dict[str, Any], seed: int, cli: Any) -> tuple[torch.nn.Module, int]:
    """A PyG model trained as PyG users train it; ``(module, epochs run)``."""
    torch.manual_seed(seed)
    module: torch.nn.Module = getattr(models, cls)(**args)
    optimizer = torch.optim.Adam(module.parameters(), lr=cli.lr, weight_decay=cli.weight_decay)
    best, best_epoch, kept, epoch = float("inf"), -1, copy.deepcopy(module.state_dict()), 0
    for epoch in range(cli.epochs):
        if cli.patience and best_epoch >= 0 and epoch - best_epoch > cli.patience:
            break
        module.train()
        optimizer.zero_grad()
        F.cross_entropy(module(graph.x, graph.edge_index)[graph.train_idx], graph.y[graph.train_idx]).backward()
        optimizer.step()
        module.eval()
        with torch.no_grad():
            val = float(F.cross_entropy(module(graph.x, graph.edge_index)[graph.val_idx], graph.y[graph.val_idx]))
        if val < best:
            best, best_epoch, kept = val, epoch, copy.deepcopy(module.state_dict())
    module.load_state_dict(kept)
    return module.eval(), epoch + 1


def own_metrics(module: torch.nn.Module, graph: Graph) -> dict[str, Any]:
    """The PyG module's own forward pass (float64), measured with the audit's metric functions."""
    reference = copy.deepcopy(module).double().eval()
    with torch.no_grad():
        proba = torch.softmax(reference(graph.x.double(), graph.edge_index), dim=1)[graph.test_idx]
    test = graph.test_idx
    return encode(evaluate(proba, graph.y[test], graph.sens[test], lam=0.5, num_groups=graph.num_groups).values())


def per_node(model: TrainedModel, graph: Graph, sample: int) -> dict[str, Any]:
    """The drawn nodes' step estimates against the proximal Bregman response re-optimised to convergence."""
    m = int(graph.train_idx.numel())
    picks = sample_positions(m, sample, 0)  # the audit's self-check draw (seed 0)
    start = time.perf_counter()
    stepper = Stepper.build(FunctionalModel.from_trained(model, graph))
    setup_s = time.perf_counter() - start
    est, unsettled, finished = [], 0, 0
    settle_start = time.perf_counter()
    for pos in picks:
        out = stepper.delete([pos])
        est.append(0.5 * float(out.delta[0]) + 0.5 * float(out.delta[1]))
        unsettled += int(out.residual > stepper.tol)
        finished += out.finished
    per_deletion_s = (time.perf_counter() - settle_start) / max(1, len(picks))
    estimate_s = time.perf_counter() - start
    before = gammas(model, graph)
    act: list[float] = []
    start = time.perf_counter()
    coordinates = stepper.curvature.coordinates()  # the audit's truth: L-BFGS in the curvature's coordinates
    for pos in picks:
        node = graph.train_idx[pos : pos + 1]
        try:
            again = retrain_without(model, graph, node, "proximal", damping=stepper.mu, coordinates=coordinates)
            sp, eo = gammas(again, graph.without_nodes(node)[0])
            act.append(0.5 * (sp - before[0]) + 0.5 * (eo - before[1]))
        except NonFiniteError:
            act.append(float("nan"))
    truth_s = time.perf_counter() - start
    e, a = np.asarray(est), np.asarray(act)
    ok = np.isfinite(a)
    defined = int(ok.sum())
    scores: dict[str, Any] = {"pearson": None, "spearman": None}
    if defined >= 3 and np.std(e[ok]) > 0 and np.std(a[ok]) > 0:
        scores = {"pearson": float(pearsonr(e[ok], a[ok])[0]), "spearman": float(spearmanr(e[ok], a[ok])[0])}
    return scores | {
        "nodes": len(picks),
        "undefined_truth": len(picks) - defined,
        "unsettled": unsettled,
        "damping": stepper.mu,
        "setup_s": setup_s,
        "estimate_s": estimate_s,
        "per_deletion_s": per_deletion_s,
        "finish_evaluations": finished,
        "truth_s": truth_s,
        "estimates": est,
        "actual": [None if not np.isfinite(x) else float(x) for x in act],
    }


def debiasing(model: TrainedModel, graph: Graph, cli: Any) -> dict[str, Any]:
    """BIND at ``--budgets`` against random deletion, retrained with the user's recipe over ``--debias-seeds``."""
    config = AuditConfig(
        model=model.model_config, training=model.train_config, bootstrap=0, validation_sample=0,
        budgets=tuple(float(b) for b in cli.budgets.split(",")),
        debias_seeds=tuple(int(s) for s in cli.debias_seeds.split(",")), debias_random_sets=cli.random_sets,
    )  # fmt: skip
    start = time.perf_counter()
    result = run_audit(graph, config, model=model)
    rows = []
    for typed in result.debiasing or []:
        row = encode(typed)
        check = row.get("against_random") or {}
        rows.append(
            {
                "budget": row["budget"], "deleted": row["deleted"], "recipe": row.get("recipe"),
                "selected_mean": (check.get("selected") or {}).get("mean"),
                "random_mean": (check.get("random") or {}).get("mean"), "advantage": check.get("advantage"),
                "noise_floor": check.get("noise_floor"), "yardstick": check.get("yardstick"),
                "beats_random": check.get("beats_random"), "verdict": check.get("verdict"),
            }
        )  # fmt: skip
    return {"seconds": time.perf_counter() - start, "timings": result.timings, "rows": rows}


@dataclass
class Supplied:
    """A PyG model trained as PyG users train it, and the model the audit reads from its weights and config."""

    module: torch.nn.Module
    model: TrainedModel
    record: Any
    """:func:`~bind_core.pipeline.reference.prepare_for_audit`'s record (the reproduction check)."""
    epochs: int
    train_s: float


def supplied(graph: Graph, name: str, seed: int, cli: Any) -> Supplied:
    """The model ``name`` (:data:`MODELS`, ``cli.hidden`` wide) trained with ``seed`` and ``cli``'s recipe
    (:func:`add_training_options`), saved as safetensors with a ``torch_geometric`` config and read as given."""
    cls, extra = MODELS[name]
    args = {"in_channels": graph.num_features, "hidden_channels": cli.hidden, "out_channels": 2, **extra}
    start = time.perf_counter()
    module, epochs = train_pyg(graph, cls, args, seed, cli)
    train_s = time.perf_counter() - start
    weights = save({k: v.contiguous() for k, v in module.state_dict().items()})
    recipe = {
        "loss": "cross_entropy", "weight_decay": cli.weight_decay, "lr": cli.lr, "epochs": cli.epochs,
        "patience": cli.patience, "seed": seed,
    }  # fmt: skip
    config = {"format": "torch_geometric", "class": cls, "args": args, "training": recipe}
    model, record = prepare_for_audit(weights, config, graph, AuditConfig(bootstrap=0))
    return Supplied(module, model, record, epochs, train_s)


def add_training_options(p: argparse.ArgumentParser, *, models: str, hidden: int = 16) -> None:
    """The models to run and the PyG training recipe (:func:`supplied` reads them)."""
    p.add_argument("--models", default=models, help="comma-separated: " + ", ".join(MODELS))
    p.add_argument("--hidden", type=int, default=hidden)
    p.add_argument("--epochs", type=int, default=500)
    p.add_argument("--patience", type=int, default=50)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--weight-decay", type=float, default=5e-4)


def each_run(args: argparse.Namespace) -> Iterator[tuple[str, Graph, str, int]]:
    """``(dataset, graph, model, seed)`` for every dataset, ``--models`` entry and seed asked for."""
    for gname, graph in datasets(args):
        for name in args.models.split(","):
            for seed in seeds(args):
                yield gname, graph, name, seed


def run_one(graph: Graph, name: str, seed: int, cli: Any) -> dict[str, Any]:
    given = supplied(graph, name, seed, cli)
    module, model, record, epochs, train_s = given.module, given.model, given.record, given.epochs, given.train_s
    audited = run_audit(graph, AuditConfig(stages=("training", "metrics"), bootstrap=0), model=model)
    own = own_metrics(module, graph)
    got = encode(audited.metrics.test)
    row: dict[str, Any] = {
        "model": name, "seed": seed, "epochs_run": epochs, "train_s": train_s, "metrics": own,
        "max_metric_difference": max(abs(got[k] - own[k]) for k in METRICS),
        "pyg_logit_difference": None if record.pyg is None else record.pyg.max_logit_difference,
        "stationarity": {k: v for k, v in encode(describe_stationarity(model, graph)).items() if k != "kinks"},
    }  # fmt: skip
    if cli.sample:
        row["per_node"] = per_node(model, graph, cli.sample)
    if cli.debias:
        row["debiasing"] = debiasing(model, graph, cli)
    return row


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    add_training_options(p, models=",".join(DEFAULT_MODELS))
    p.add_argument("--sample", type=int, default=10, help="random training nodes checked per model (0: none)")
    p.add_argument("--debias", action="store_true", help="the full estimate and BIND against random deletion")
    p.add_argument("--budgets", default="0.1")
    p.add_argument("--debias-seeds", default="1,10,100")
    p.add_argument("--random-sets", type=int, default=3)
    args = p.parse_args()
    setup(args)
    rows = []
    for gname, graph, name, seed in each_run(args):
        row = {"graph": gname} | run_one(graph, name, seed, args)
        rows.append(row)
        write_json("as_given", {"machine": machine(), "args": vars(args), "rows": rows}, args.out)
        for deb in (row.get("debiasing") or {}).get("rows", []):
            print(f"  budget {deb['budget']}: advantage {deb['advantage']}, yardstick {deb['yardstick']}, "
                  f"noise floor {deb['noise_floor']}: {deb['verdict']}", flush=True)  # fmt: skip
        node = row.get("per_node") or {}
        print(
            f"{gname} {name} seed {seed}: {row['epochs_run']} epochs, accuracy {row['metrics']['accuracy']:.3f}"
            f" ΔSP {row['metrics']['delta_sp']:.3f} ΔEO {row['metrics']['delta_eo']:.3f}, metric difference "
            f"{row['max_metric_difference']:.1e}, max|∇L| {row['stationarity']['max_abs_grad']:.1e}, per node "
            f"Pearson {node.get('pearson')} Spearman {node.get('spearman')} (undefined "
            f"{node.get('undefined_truth')}, unsettled {node.get('unsettled')}), "
            f"{_num(node.get('per_deletion_s'))} s per deletion",
            flush=True,
        )
    print(
        table(
            ["graph", "model", "seed", "acc", "ΔSP", "ΔEO", "Δmetric", "max|∇L|", "Pearson", "Spearman", "undef"],
            [
                [
                    r["graph"],
                    r["model"],
                    r["seed"],
                    f"{r['metrics']['accuracy']:.3f}",
                    f"{r['metrics']['delta_sp']:.3f}",
                    f"{r['metrics']['delta_eo']:.3f}",
                    f"{r['max_metric_difference']:.0e}",
                    f"{r['stationarity']['max_abs_grad']:.1e}",
                    _num((r.get("per_node") or {}).get("pearson")),
                    _num((r.get("per_node") or {}).get("spearman")),
                    (r.get("per_node") or {}).get("undefined_truth"),
                ]
                for r in rows
            ],
        )
    )
    write_json("as_given", {"machine": machine(), "args": vars(args), "rows": rows}, args.out)


def _num(value: float | None) -> str:
    return "–" if value is None else f"{value:.4f}"


if __name__ == "__main__":
    main()
