"""PyG models trained as PyG users train them, for the tests of supplied models."""

from __future__ import annotations

import copy
from typing import Any

import torch
import torch.nn.functional as F
from torch_geometric.nn import models

from bind_core.data.graph import Graph


def early_stopped(cls: str, args: dict[str, Any], graph: Graph, epochs: int = 60) -> torch.nn.Module:
    """A ``torch_geometric.nn.models`` class ``cls`` built with ``args`` and trained on ``graph``'s training nodes
    with Adam (lr 0.01, weight decay 5e-4), the weights of the best validation loss kept (seed 0)."""
    torch.manual_seed(0)
    module: torch.nn.Module = getattr(models, cls)(**args)
    optimizer = torch.optim.Adam(module.parameters(), lr=0.01, weight_decay=5e-4)
    best, kept = float("inf"), copy.deepcopy(module.state_dict())
    for _ in range(epochs):
        module.train()
        optimizer.zero_grad()
        F.cross_entropy(module(graph.x, graph.edge_index)[graph.train_idx], graph.y[graph.train_idx]).backward()
        optimizer.step()
        module.eval()
        with torch.no_grad():
            val = float(F.cross_entropy(module(graph.x, graph.edge_index)[graph.val_idx], graph.y[graph.val_idx]))
        if val < best:
            best, kept = val, copy.deepcopy(module.state_dict())
    module.load_state_dict(kept)
    return module.eval()
