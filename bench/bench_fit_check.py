"""Does the fit check (``bind_core.training.fit_check``) tell a model fed other inputs from one that is only
overconfident?

On Income (the paper's 1000 balanced training nodes), train PyG GCN and GraphSAGE models (two layers, h16, 300 Adam
epochs at lr 0.01, weight decay 5e-4) on one scaling of the features and read them on another, as a model trained on
the user's own values and audited on an upload scaled otherwise is; then one GraphSAGE trained on the raw table with
early stopping on the validation loss, read on exactly those values. For each: the training nodes' cross-entropy and
accuracy on the inputs it was trained on and on those it is fed, and what the check says (``worse_than_guess``,
``overconfident``, ``suspect``); then what comparing the owner's outputs (computed on the inputs it was trained on,
as the owner's code computes them) with the model as read says (``bind_core.training.outputs.compare_outputs``:
``outputs`` matches, nodes that differ, the largest difference of a probability).

    python bench/bench_fit_check.py --data-root ../shared/datasets
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import torch
import torch.nn.functional as F
from torch_geometric.nn.models import GCN, GraphSAGE

from bind_core.data.datasets import ingest_files
from bind_core.data.graph import Graph
from bind_core.training.fit_check import check_training_fit
from bind_core.training.outputs import GivenOutputs, compare_outputs


def _train(cls: type, graph: Graph, x: torch.Tensor, *, epochs: int, patience: int | None) -> torch.nn.Module:
    torch.manual_seed(0)
    model: torch.nn.Module = cls(in_channels=graph.num_features, hidden_channels=16, num_layers=2, out_channels=2)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
    best, state, waited = float("inf"), None, 0
    for _ in range(epochs):
        model.train()
        optimizer.zero_grad()
        loss: torch.Tensor = F.cross_entropy(model(x, graph.edge_index)[graph.train_idx], graph.y[graph.train_idx])
        loss.backward()  # type: ignore[no-untyped-call]
        optimizer.step()
        if patience is None:
            continue
        model.eval()
        with torch.no_grad():
            seen = float(F.cross_entropy(model(x, graph.edge_index)[graph.val_idx], graph.y[graph.val_idx]))
        if seen < best:
            best, state, waited = seen, {k: v.clone() for k, v in model.state_dict().items()}, 0
        elif (waited := waited + 1) > patience:
            break
    if state is not None:
        model.load_state_dict(state)
    model.eval()
    return model


def _line(name: str, model: torch.nn.Module, graph: Graph, trained: torch.Tensor, fed: torch.Tensor) -> None:
    with torch.no_grad():
        owners = model(trained, graph.edge_index)
        own = check_training_fit(F.softmax(owners.double(), 1), graph)
        as_read = F.softmax(model(fed, graph.edge_index).double(), 1)
    read = check_training_fit(as_read, graph)
    match = compare_outputs(as_read, GivenOutputs.of(owners, graph), graph)
    print(
        f"{name:<34} own {own.loss:8.3f} {own.accuracy:6.1%} | fed {read.loss:8.3f} {read.accuracy:6.1%} "
        f"(commonest {read.majority:.1%}) worse={read.worse_than_guess} overconfident={read.overconfident} "
        f"suspect={read.suspect} | outputs matches={match.matches} differing={match.differing}/{match.nodes} "
        f"max={match.max_difference:.2g}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-root", type=Path, default=Path("../shared/datasets"))
    args = parser.parse_args()
    folder = args.data_root / "income"
    files = (folder / "income.csv", folder / "income_edges.txt")
    graph = ingest_files(*files, label="income", sensitive="race", scale=False).graph
    x = graph.x.float()
    low, high = x.min(0).values, x.max(0).values
    unit = (x - low) / (high - low).clamp_min(1e-12)
    scalings = {"raw": x, "[0,1]": unit, "[-1,1]": 2 * unit - 1, "standardised": (x - x.mean(0)) / x.std(0)}
    scaled = dataclasses.replace(graph, feature_ranges=tuple(zip(low.tolist(), high.tolist(), strict=True)))
    pairs = (("[0,1]", "[-1,1]"), ("[0,1]", "raw"), ("standardised", "[-1,1]"), ("[-1,1]", "[0,1]"))
    for cls in (GCN, GraphSAGE):
        for trained, fed in pairs:
            model = _train(cls, graph, scalings[trained], epochs=300, patience=None)
            # read on a scaling the reader made (the features an upload scaled), as the audit would see them
            on = scaled if fed in ("[-1,1]", "[0,1]") else graph
            _line(f"{cls.__name__} {trained} -> {fed}", model, on, scalings[trained], scalings[fed])
    model = _train(GraphSAGE, graph, x, epochs=1000, patience=100)
    _line("GraphSAGE raw, early stopping -> raw", model, graph, x, x)


if __name__ == "__main__":
    main()
