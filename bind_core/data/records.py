"""The graph's part of the audit results, typed (collected in :mod:`bind_core.pipeline.results`)."""

# ruff: noqa: RUF009  (key() and open_keys() return dataclasses.field(...): fields with metadata, not shared defaults)
from __future__ import annotations

from dataclasses import dataclass

from bind_core.codec import key


@dataclass(kw_only=True)
class GraphSummary:
    """The graph audited (:meth:`bind_core.data.graph.Graph.summary`)."""

    name: str = key("string: the graph's name")
    nodes: int = key("integer: nodes")
    edges: int = key("integer: undirected edges")
    features: int = key("integer: feature columns")
    classes: int = key("integer: label classes")
    groups: int = key("integer: sensitive groups")
    group_sizes: list[int] = key("integers: nodes per group")
    group_names: list[str] = key("strings: each group's value(s) as the user's file writes them (the codes for arrays)")
    sensitive: list[str] | None = key(
        "strings: the sensitive attribute(s), as the user's columns are named (sens for arrays); absent in audits "
        "from before it was recorded",
        optional=True,
    )
    group_labels: list[str] | None = key(
        "strings: each group in the user's terms, attribute=value (race=1, gender=F & age=young), with its "
        "documented meaning in parentheses where the data's provenance gives one",
        optional=True,
    )
    label: str | None = key("string: the label's column (y for arrays)", optional=True)
    class_names: list[str] | None = key("strings: each class's value as the user's file writes it", optional=True)
    node_id_column: str | None = key(
        "string: the node table's column the node ids come from; absent where node ids are row positions",
        optional=True,
    )
    node_id_meaning: str | None = key("string: what every node_id of the results is, in words", optional=True)
    class_sizes: list[int] = key("integers: labelled nodes per class")
    unlabeled: int = key("integer: nodes without a label")
    train: int = key("integer: training nodes")
    val: int = key("integer: validation nodes")
    test: int = key("integer: test nodes")
