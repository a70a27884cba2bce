"""Train a ``torch_geometric.nn.models`` model with plain PyG code on a synthetic graph and save it as a user would:
the ``state_dict`` as safetensors beside a JSON config in the ``torch_geometric`` form (docs/API.md, Supplied
models), for ``bind-audit run --model-weights --model-config`` or ``POST /v1/models``.

    python bench/pyg_model.py --nodes 300 --seed 1 --out /tmp/relu-sage
    bind-audit run --synthetic --synthetic-nodes 300 --seed 1 --model-weights /tmp/relu-sage/model.safetensors \\
        --model-config /tmp/relu-sage/config.json --budgets 1 --bootstrap 0 --threads 1

The graph is ``synthetic(nodes, seed=seed)``, the same one ``bind-audit run --synthetic --synthetic-nodes N --seed S``
audits.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from torch_geometric.nn import models

from bind_core.data.datasets import synthetic


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--nodes", type=int, default=300)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--cls", default="GraphSAGE", choices=("GCN", "GraphSAGE", "GIN", "GAT"))
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--hidden", type=int, default=16)
    p.add_argument("--act", default="relu")
    p.add_argument("--epochs", type=int, default=200)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--weight-decay", type=float, default=5e-4)
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args()
    torch.set_num_threads(1)
    graph = synthetic(args.nodes, seed=args.seed)
    torch.manual_seed(0)
    ctor = {
        "in_channels": graph.num_features,
        "hidden_channels": args.hidden,
        "num_layers": args.layers,
        "out_channels": graph.num_classes,
        "act": args.act,
    }
    model = getattr(models, args.cls)(**ctor)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    train = graph.train_idx
    for _ in range(args.epochs):
        optimizer.zero_grad()
        out = model(graph.x, graph.edge_index)
        F.cross_entropy(out[train], graph.y[train]).backward()
        optimizer.step()
    args.out.mkdir(parents=True, exist_ok=True)
    save_file(model.state_dict(), args.out / "model.safetensors")
    config = {
        "format": "torch_geometric",
        "class": args.cls,
        "args": ctor,
        "training": {"loss": "cross_entropy", "weight_decay": args.weight_decay, "lr": args.lr, "epochs": args.epochs},
    }
    (args.out / "config.json").write_text(json.dumps(config, indent=2))
    model.eval()
    with torch.no_grad():
        pred = model(graph.x, graph.edge_index).argmax(1)
    accuracy = float((pred[graph.test_idx] == graph.y[graph.test_idx]).float().mean())
    print(f"wrote {args.out}/model.safetensors and config.json (test accuracy {accuracy:.3f})")


if __name__ == "__main__":
    main()
