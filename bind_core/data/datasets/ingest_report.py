"""What reading a user's files did to them: columns encoded or imputed, unlabeled nodes, edges dropped, hints."""

from __future__ import annotations

from dataclasses import dataclass, field

from bind_core.data.graph import Graph
from bind_core.data.records import Imputation, IngestedGraphSummary, IngestSummary
from bind_core.errors import Message, Namer, Option


@dataclass
class IngestReport:
    """Everything :func:`~bind_core.data.datasets.ingest_files` changed, dropped or guessed, for the graph summary
    (:meth:`summary` gives its record).

    Attributes:
        encoded: each text column one-hot encoded, with its categories (one feature column ``col=value`` each).
        booleans: boolean columns read as 0/1.
        imputed: each numeric column with missing values filled, with how many and the value used.
        unlabeled: nodes without a label (empty cell or the ``unlabeled`` value); they are in no split.
        binned: each sensitive column made into groups by a binning rule, with the group names.
        dropped_edges: edge rows dropped because they name a node absent from the node table.
        unknown_ids: the first few such node ids (as written in the edge list).
        self_loops: edge rows from a node to itself (dropped: the graph stores none).
        duplicate_edges: edge rows that repeat an earlier row, node for node (merged: the graph stores each edge
            once, so a model that counted the repeats as several edges computes otherwise here).
        ignored_edge_columns: edge-list columns after the first two (weights, timestamps), not used.
        scaled: each feature column min-max scaled to ``[-1, 1]`` (``scale=True``), with its ``(min, max)`` before;
            empty when the features are the table's own values.
        hints: things that look wrong but were accepted (a label with a sentinel value, more than two classes...);
            a hint that advises an option holds it as an :class:`~bind_core.errors.Option` (:meth:`notes`).
    """

    encoded: dict[str, list[str]] = field(default_factory=dict)
    booleans: list[str] = field(default_factory=list)
    imputed: dict[str, Imputation] = field(default_factory=dict)
    unlabeled: int = 0
    binned: dict[str, list[str]] = field(default_factory=dict)
    dropped_edges: int = 0
    unknown_ids: list[str] = field(default_factory=list)
    self_loops: int = 0
    duplicate_edges: int = 0
    ignored_edge_columns: list[str] = field(default_factory=list)
    scaled: dict[str, tuple[float, float]] = field(default_factory=dict)
    hints: list[str | Message] = field(default_factory=list)

    def summary(self, name: Namer = Option.python) -> IngestSummary:
        """The report as its record; ``notes`` says the same in sentences.

        Args:
            name: how an option a hint advises is said (as in :meth:`notes`).

        Returns:
            The :class:`~bind_core.data.records.IngestSummary`.
        """
        return IngestSummary(
            encoded=self.encoded,
            booleans=self.booleans,
            imputed=self.imputed,
            unlabeled=self.unlabeled,
            binned=self.binned,
            dropped_edges=self.dropped_edges,
            unknown_ids=self.unknown_ids,
            self_loops=self.self_loops,
            duplicate_edges=self.duplicate_edges,
            ignored_edge_columns=self.ignored_edge_columns,
            scaled={c: list(r) for c, r in self.scaled.items()},
            hints=[str(h) if isinstance(h, str) else h.text(name) for h in self.hints],
            notes=self.notes(name),
        )

    def notes(self, name: Namer = Option.python) -> list[str]:
        """One sentence per change, for people; an option a hint advises is said by ``name`` (default: as a Python
        keyword argument; the command line passes its flags, the HTTP API its request fields)."""
        out = [
            f"column {c!r} one-hot encoded into {len(v)} feature columns ({', '.join(map(repr, v[:10]))}"
            f"{', ...' if len(v) > 10 else ''})"
            for c, v in self.encoded.items()
        ]
        out += [f"column {c!r} read as 0/1 (boolean)" for c in self.booleans]
        out += [
            f"column {c!r}: {d.count} missing value(s) imputed with the column's median {d.value!r}"
            + (f" (read as missing: {', '.join(map(repr, d.read_as_missing))})" if d.read_as_missing else "")
            if d.rule == "median"
            else f"column {c!r}: {d.count} missing value(s) left with no category (all its columns 0)"
            for c, d in self.imputed.items()
        ]
        if self.unlabeled:
            out.append(f"{self.unlabeled} unlabeled node(s) kept in the graph (they pass messages), in no split")
        out += [f"sensitive column {c!r} binned into groups {g}" for c, g in self.binned.items()]
        if self.dropped_edges:
            out.append(
                f"{self.dropped_edges} edge row(s) dropped: they name node ids absent from the node table "
                f"(first: {', '.join(self.unknown_ids)})"
            )
        if self.self_loops:
            out.append(f"{self.self_loops} self-loop row(s) dropped (the graph stores none)")
        if self.duplicate_edges:
            out.append(
                f"{self.duplicate_edges} edge row(s) repeat an earlier row, node for node: merged (the graph stores "
                "each edge once; a model trained with the repeats as parallel edges computes otherwise here)"
            )
        if self.ignored_edge_columns:
            out.append(f"edge-list column(s) {self.ignored_edge_columns} ignored (edges are unweighted)")
        if self.scaled:
            scaled = Message.of(
                f"the {len(self.scaled)} feature column(s) min-max scaled to [-1, 1], as BIND's code does (each "
                "column's minimum and maximum before are kept): a model trained here sees the scaled values; to audit "
                "a model trained on the table's own values, read it with ",
                Option("scale", False),
            )
            out.append(scaled.text(name))
        return out + [h if isinstance(h, str) else h.text(name) for h in self.hints]


@dataclass(frozen=True)
class Ingested:
    """A graph read from user files and the report of what reading it did."""

    graph: Graph
    report: IngestReport

    def summary(self, name: Namer = Option.python) -> IngestedGraphSummary:
        """The graph's summary with the report under ``ingest``.

        Args:
            name: how an option a hint advises is said.

        Returns:
            The :class:`~bind_core.data.records.IngestedGraphSummary`.
        """
        return IngestedGraphSummary(**vars(self.graph.summary()), ingest=self.report.summary(name))
