"""The graph's part of the audit results, typed (collected in :mod:`bind_core.pipeline.results`), and the summary of
a graph read from a user's files."""

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
    test_group_sizes: list[int] | None = key(
        "integers: test nodes per group (what min_group_size is checked against before an audit is queued; absent "
        "in graphs stored before 2026-11-29)",
        optional=True,
    )
    test_group_positives: list[int] | None = key(
        "integers: positive (y=1) test nodes per group (binary labels: a group without one has no ΔEO)", optional=True
    )
    features_scaled: bool | None = key(
        "boolean: the feature columns were min-max scaled to [-1, 1] when the graph was read (scale); a model "
        "trained on the table's own values sees other inputs here",
        optional=True,
    )


@dataclass(kw_only=True)
class Imputation:
    """How one column's missing values were filled while reading a node table."""

    rule: str = key("string: median (a numeric column: the column's median) or no category (a text column: all 0)")
    count: int = key("integer: cells filled")
    value: float | None = key("number or null: the value used (null: no category)")
    read_as_missing: list[str] | None = key(
        "strings: the cells read as missing besides empty ones ('?', 'unknown', ...)", optional=True
    )


@dataclass(kw_only=True)
class IngestSummary:
    """What reading a user's files did to them
    (:meth:`bind_core.data.datasets.ingest_report.IngestReport.summary`)."""

    encoded: dict[str, list[str]] = key("object, text column → its categories (one feature column col=value each)")
    booleans: list[str] = key("strings: boolean columns read as 0/1")
    imputed: dict[str, Imputation] = key("object, column → how its missing values were filled")
    unlabeled: int = key("integer: nodes without a label (in no split)")
    binned: dict[str, list[str]] = key("object, sensitive column → the group names its binning rule made")
    dropped_edges: int = key("integer: edge rows dropped because they name a node absent from the node table")
    unknown_ids: list[str] = key("strings: the first few such node ids, as written in the edge list")
    self_loops: int = key("integer: edge rows from a node to itself (dropped)")
    duplicate_edges: int | None = key(
        "integer: edge rows that repeat an earlier row, node for node (merged: each edge is stored once)", optional=True
    )
    ignored_edge_columns: list[str] = key("strings: edge-list columns after the first two, not used")
    scaled: dict[str, list[float]] | None = key(
        "object, feature column → [min, max] of its values before they were min-max scaled to [-1, 1] (scale); "
        "empty when the features are the table's own values",
        optional=True,
    )
    hints: list[str] = key("strings: things that look wrong but were accepted, options named as the caller says them")
    notes: list[str] = key("strings: one sentence per change, for people")


@dataclass(kw_only=True)
class IngestedGraphSummary(GraphSummary):
    """The summary of a graph read from a user's files, with what reading them did
    (:meth:`bind_core.data.datasets.ingest_report.Ingested.summary`)."""

    ingest: IngestSummary = key("what reading the files did")


@dataclass(kw_only=True)
class CarriedInputs:
    """A supplied model audited on another version of the graph it was registered for
    (:func:`bind_core.data.carry.carry_inputs`): how the version's inputs were made the registration's."""

    registered_graph_id: str | None = key(
        "string: the graph version the model was registered for (the service's graph id)", optional=True
    )
    registered_version: int | None = key("integer: that graph's version number", optional=True)
    columns_named: bool = key(
        "boolean: both versions name their feature columns, so the columns were matched by name; false: by count "
        "and position alone"
    )
    columns_reordered: bool = key("boolean: this version's feature columns were put in the registration's order")
    rescaled: bool = key(
        "boolean: this version's features were re-expressed on the registration's scale (min-max scaled by its "
        "minima and maxima, or unscaled where the registration was not scaled); values outside its range then fall "
        "outside [-1, 1]"
    )
    scaled_as_registered: bool = key(
        "boolean: the registration's features were min-max scaled to [-1, 1], and the audited ones are on that scale"
    )
    filled: list[str] | None = key(
        "strings: the model's one-hot columns (column=value) of a category no node of this version has, given as "
        "columns of zeros, as the registration's encoding makes them; absent where none",
        optional=True,
    )
    ignored: list[str] | None = key(
        "strings: this version's one-hot columns (column=value) of a category the model was never registered with, "
        "left out as its registration asks (unknown_categories 'ignore'): their nodes read as none of the model's "
        "categories of that column, as an encoder set to ignore unknown values gives them; absent where none",
        optional=True,
    )
    ignored_nodes: int | None = key(
        "integer: the nodes of this version that have such a category (absent where none was ignored)", optional=True
    )
    trained_on: str | None = key(
        "string: the table the model was trained on, where it was carried to that table's columns and scale rather "
        "than to a registration's (bind-audit run --trained-on); absent for a model registered with the service",
        optional=True,
    )
    text: str = key("string: what was carried and what the attribution then means, in a sentence")
