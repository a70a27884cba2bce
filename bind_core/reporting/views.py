"""The view models of the HTML report: what each section of ``templates/report.html`` shows, as plain text that the
template escapes (and figures as SVG marked safe where they were drawn).

A table is a list of rows, each a list of cells; everything else is a small frozen dataclass whose attributes the
template reads by name. Built by :mod:`bind_core.reporting.report` and the section modules from the typed results
(:class:`bind_core.pipeline.results.AuditResults`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from markupsafe import Markup

from bind_core.debiasing.records import UndefinedTruth
from bind_core.pipeline.results import AuditResults

__all__ = [
    "Card",
    "ChanceView",
    "DebiasingView",
    "GroupsView",
    "Headline",
    "InfluenceView",
    "Refined",
    "RunView",
    "Skipped",
    "StabilityView",
    "SuppliedView",
    "Table",
    "TopRow",
    "TrustView",
    "VerdictView",
    "normalised_words",
    "typed_results",
    "variant_words",
]

RESULT_KEYS = frozenset(f.name for f in fields(AuditResults))
"""The keys of a results document (:class:`AuditResults`)."""

Table = list[list[str]]
"""A table's rows of text cells."""


NORM_WORDS = {"batch": "batch-normalised", "layer": "layer-normalised"}
"""How a report names the normalisation between the model's layers (its ``norm``; none: nothing)."""


def normalised_words(norm: object, suffix: str) -> str:
    """``"batch-normalised<suffix>"`` or ``"layer-normalised<suffix>"`` for a model's ``norm``; ``""`` without."""
    words = NORM_WORDS.get(str(norm))
    return "" if words is None else words + suffix


ARCH_VARIANTS = (
    ("v2", "GATv2"),
    ("share_weights", "weights shared"),
    ("residual", "residual"),
    ("normalize", "outputs L2-normalised"),
)
"""A GAT's and a SAGE's variants as a report names them after its ``arch`` (the model's settings of those names)."""


def variant_words(settings: Mapping[str, Any], suffix: str) -> str:
    """A model's variants as a report names them after its ``arch`` (``"GATv2, residual<suffix>"``); ``""`` without."""
    variants = [words for name, words in ARCH_VARIANTS if settings.get(name)]
    return f"{', '.join(variants)}{suffix}" if variants else ""


def typed_results(results: AuditResults | Mapping[str, Any]) -> AuditResults:
    """The results, typed: decoded once where they arrive as the stored JSON.

    Args:
        results: :class:`AuditResults`, or ``AuditResult.to_dict()`` (as stored in ``audits.results``). Keys beyond
            the results' own are left out (the command line's ``--json`` adds ``config``, ``influence``, ``ingest``
            and ``supplied_model`` beside them).

    Returns:
        The :class:`AuditResults`.

    Raises:
        ResultFormatError: the document does not fit the types (:class:`~bind_core.codec.ResultFormatError`).
    """
    if isinstance(results, AuditResults):
        return results
    return AuditResults.from_dict({k: v for k, v in results.items() if k in RESULT_KEYS})


@dataclass(frozen=True, kw_only=True)
class Skipped:
    """A section that did not run, and why."""

    reason: str


@dataclass(frozen=True, kw_only=True)
class Card:
    """A metric card: its name, value (``note``: why it is undefined), interval and meaning."""

    name: str
    value: str
    note: str | None
    band: str
    what: str


@dataclass(frozen=True, kw_only=True)
class Headline:
    """The test metrics' cards, the test nodes they rest on and how the intervals were got."""

    nodes: str
    cards: list[Card]
    how: str


@dataclass(frozen=True, kw_only=True)
class GroupsView:
    """Each group's row, the worst pairs (with more than two groups) and the probability histograms."""

    rows: Table
    worst: Table
    svg: Markup | None
    positive: str = "y=1"
    """The positive class in the user's terms (``approved=1``)."""


@dataclass(frozen=True, kw_only=True)
class Refined:
    """The refinement of the estimates: deletions refined, steps allowed, those that converged."""

    deletions: str
    max_iter: str
    converged: str


@dataclass(frozen=True, kw_only=True)
class InfluenceView:
    """The distribution of every node's ΔΓ, its histogram (with the rows) and the refinement, if any."""

    facts: Table
    svg: Markup | None
    refined: Refined | None
    undefined: int | None = None
    """Nodes whose ΔΓ is null (no minimum near the given weights), left out of the figures."""


@dataclass(frozen=True, kw_only=True)
class TopRow:
    """One of the most harmful training nodes."""

    rank: str
    node_id: str
    group: str
    label: str
    delta: str
    delta_sp: str
    delta_eo: str
    unsettled: bool = False
    """The step estimate's steps did not settle for the node: its value is approximate."""


@dataclass(frozen=True, kw_only=True)
class VerdictView:
    """The summary's verdict, its findings and what the node ids are."""

    headline: str
    findings: list[str]
    ids: str


@dataclass(frozen=True, kw_only=True)
class StabilityView:
    """The overlap of the top-k harmful sets across training seeds: numbers, the sets and a pairwise grid."""

    k: str
    seeds: list[str]
    intersection: str
    union: str
    jaccard: str
    mean_jaccard: str
    pairs: Table
    members: Table
    svg: Markup


@dataclass(frozen=True, kw_only=True)
class TrustView:
    """Estimated against actual ΔΓ on the sampled nodes: correlations and the scatter."""

    count: str
    mode: str
    rows: Table
    svg: Markup
    without_truth: str | None = None
    """The line for the checked nodes without a ground truth (:func:`without_truth`), or ``None``."""


@dataclass(frozen=True, kw_only=True)
class ChanceView:
    """Each budget's deletion against deleting random nodes, and the seeds retrained with."""

    seeds: str
    rows: Table


@dataclass(frozen=True, kw_only=True)
class DebiasingView:
    """Each budget's deletion, before and after, the bars, the check against chance and the caveats."""

    head: list[str]
    rows: Table
    svg: Markup
    chance: ChanceView | None
    retraining: str | None
    caveats: list[str]
    noise: str | None = None
    """What the brackets in the before → after cells are (the change's paired bootstrap interval), where there are
    any."""


@dataclass(frozen=True, kw_only=True)
class RunView:
    """The footer: the device, the time each stage took and the gradient norm at the audited weights."""

    device: str
    spent: str
    grad_norm: str
    stationary: str


@dataclass(frozen=True, kw_only=True)
class SuppliedView:
    """A supplied model: which model the audit describes and, polished first, both side by side."""

    polished: bool
    grad_norm_supplied: str
    grad_norm: str
    rows: Table
    differ: str | None
    outputs: str | None = None
    """Where the owner's outputs were given: how closely the model as read gives them."""


def without_truth(gone: UndefinedTruth | None, checked: int, what: str) -> str | None:
    """The line a self-check's section gives the checked items without a ground truth (``undefined_truth``: the
    re-optimisation found no minimum near the given weights), or ``None`` when every one has one.

    Args:
        gone: the check's ``undefined_truth``.
        checked: how many items were checked.
        what: what an item is, plural ("nodes", "edges").

    Returns:
        The line, or ``None``.
    """
    if gone is None:
        return None
    return f"{gone.count} of the {checked} checked {what} have no ground truth: {gone.reason}."
