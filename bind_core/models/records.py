"""The records of a supplied PyG model (:mod:`bind_core.models.pyg`): its checked description and its reproduction
check, as the one encoder writes them (:mod:`bind_core.codec`)."""

# ruff: noqa: RUF009  (key() and open_keys() return dataclasses.field(...): fields with metadata, not shared defaults)

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bind_core.codec import key, open_keys

__all__ = ["PYG_FORMAT", "PygCheck", "PygModel"]

PYG_FORMAT = "torch_geometric"
"""The ``format`` of a config that describes a ``torch_geometric.nn.models`` model."""


@dataclass(frozen=True, kw_only=True)
class PygModel:
    """A checked PyG model description: the class name, its constructor arguments (with PyG's defaults for the
    options that matter filled in), and the loss it was trained with; what a canonical config keeps as ``source``."""

    format: str = field(default=PYG_FORMAT, metadata={"doc": f"string: {PYG_FORMAT}", "optional": False})
    cls: str = key("string: the torch_geometric.nn.models class (GCN, GraphSAGE, GIN, GAT)", name="class")
    args: dict[str, Any] = key("object: the constructor's arguments, PyG's defaults filled in where they matter")
    loss: str = key("string: the loss the model was trained with (cross_entropy or binary_cross_entropy)")
    layer_names: list[str] | None = key(
        "strings: a module of the user's own, the attribute names of its convolutions in the order its forward applies"
        " them (conv1, conv2), read as the class's convs.0, convs.1; absent: the class itself",
        optional=True,
    )
    head_name: str | None = key(
        "string: with jk last, a module of the user's own, the attribute name of its linear classifier after the "
        "convolutions (classifier), read as the class's lin; absent: lin",
        optional=True,
    )
    norm_names: list[str] | None = key(
        "strings: with a norm, a module of the user's own, the attribute names of its normalisations in the order its "
        "forward applies them (bns.0, bns.1; one after each convolution but the last), read as the class's norms.0, "
        "norms.1; absent: the class itself",
        optional=True,
    )
    last_heads: int | None = key(
        "integer: a GAT whose last layer has its own number of heads (averaged), as the GAT paper's and PyG's "
        "examples/gat.py end with one; absent: heads, as the class does",
        optional=True,
    )


@dataclass(kw_only=True)
class PygCheck:
    """A PyG model's reproduction check (:func:`reproduction`): the converted model against the PyG module's logits."""

    cls: str | None = key("string: the PyG class checked", optional=True, name="class")
    max_logit_difference: float | None = key("number: largest relative difference of the logits", optional=True)
    nodes: int | None = key("integer: the nodes compared", optional=True)
    extra: dict[str, Any] = open_keys("the check's other figures")
