"""What an audit says of a supplied model read against its own training labels: one whose outputs may be in another
order than the label's classes (:func:`~bind_core.training.output_order.check_output_order`), or one that fits them no
better than a constant or worse than a uniform guess (:func:`~bind_core.training.fit_check.check_training_fit`): a
warning each, and the reason the summary withholds its verdict (:func:`supplied_model_doubt`)."""

from __future__ import annotations

from bind_core.data.carry_words import CarryWords
from bind_core.pipeline.caveat import Caveat
from bind_core.pipeline.results import SuppliedModel


def supplied_model_warnings(record: SuppliedModel | None) -> list[Caveat]:
    """The warning of a supplied model whose scores rank its training labels below chance (its outputs may be in
    another order), else of one that fits its own training nodes no better than a constant, or worse than guessing
    every class alike (fed other inputs than it was trained on, or untrained); then, on another version of its graph,
    that of nodes with a category the model never saw, read as none of its own; empty otherwise.

    Args:
        record: the supplied model's record (the results' ``supplied_model``; :func:`prepare_for_audit`'s).

    Returns:
        The warnings, each a :class:`~bind_core.pipeline.caveat.Caveat` with its code.
    """
    if record is None:
        return []
    return _fit_warnings(record) + _unseen_categories(record)


def _fit_warnings(record: SuppliedModel) -> list[Caveat]:
    fit, found = record.training_fit, record.output_order
    if found is not None and found.below_chance and found.text:  # outputs read in another order explain a poor fit
        return [Caveat(found.text, "output_order")]
    if fit is not None and fit.overconfident and fit.text:  # its outputs carry the labels: not a doubt of its inputs
        return [Caveat(fit.text, "overconfident")]
    if fit is None or not fit.poor or not fit.text:  # poor with its inputs confirmed too: said, the verdict stands
        return []
    return [Caveat(fit.text + _carried(record), "training_fit")]


def _unseen_categories(record: SuppliedModel) -> list[Caveat]:
    """Nodes of this version with a category the model was never registered with, read as none of its categories
    (its registration ignores unknown values): what the audit measures of them is what the deployed model does."""
    carried = record.carried
    if carried is None or not carried.ignored:
        return []
    nodes, words = carried.ignored_nodes or 0, CarryWords.of(carried.trained_on)
    return [
        Caveat(
            f"{nodes} node{'s' if nodes != 1 else ''} of {words.here} {'have' if nodes != 1 else 'has'} a category the "
            f"model was never {words.done} with ({', '.join(repr(c) for c in carried.ignored)}), read as none of its "
            f"categories of that column, as {words.ignoring_named}: the figures describe the model as it serves them, "
            "on inputs it never trained on",
            "unseen_categories",
        )
    ]


def _carried(record: SuppliedModel) -> str:
    """Where the model is audited on another version of its graph, its inputs carried over to its registration's:
    the other cause of a poor fit, this version's data (drift)."""
    if record.carried is None:
        return ""
    words = CarryWords.of(record.carried.trained_on)
    here = words.here[0].upper() + words.here[1:]
    return (
        f". {here}'s inputs were carried over to the columns and scale the model was {words.done} with "
        f"(supplied_model.carried), so where it fit {words.fit_source}, {words.here}'s data differ from that one's "
        "(how the features are distributed, or how the label depends on them): as deployed, the model no longer fits "
        "them" + _unseen_cause(record)
    )


def _unseen_cause(record: SuppliedModel) -> str:
    """Where nodes with a category the model never saw are read as none of its own: a cause of a poor fit the
    version's data alone do not name (an input no training node had, which a GNN also passes to their neighbours)."""
    carried = record.carried
    if carried is None or not carried.ignored:
        return ""
    return (
        f". Among the differences: {carried.ignored_nodes or 0} nodes have a category it never saw "
        f"({', '.join(repr(c) for c in carried.ignored)}), read as none of its categories of that column, an input "
        "no node it was trained on had, which the graph's layers also pass to their neighbours; how it serves them "
        "is part of what this audit measures"
    )


def supplied_model_doubt(record: SuppliedModel | None) -> str | None:
    """Why no verdict can be given on a supplied model's figures: its outputs may be in another order than the
    label's classes (every figure may be inverted), or it fits its own training nodes no better than a constant, or
    worse than guessing every class alike (every figure describes it on inputs it never saw); ``None`` otherwise."""
    if record is None:
        return None
    found, fit = record.output_order, record.training_fit
    if found is not None and found.below_chance:
        what = "AUC" if found.statistic == "auc" else "accuracy"
        return (
            f"the model's outputs may be in another order than the label's classes ({found.advice}); on its training "
            f"nodes its {what} is {found.value:.2f}, below chance"
        )
    if fit is None or not fit.suspect or fit.loss is None:
        return None
    than, against = fit.baseline()
    shown = "—" if against is None else f"{against:.3g}"
    why = (
        f"{CarryWords.of(record.carried.trained_on).here_graph} differs from the data it fit, or it is fed other "
        "inputs than it was trained on"
        + (" (among them nodes of a category it never saw, read as none of its own)" if _unseen_cause(record) else "")
        if record.carried is not None
        else "it is most likely fed other inputs than it was trained on, or its training stopped before it fit them"
    )
    return (
        f"on its own training nodes the model does no better than {than} (mean cross-entropy {fit.loss:.3g} against "
        f"{shown}): {why} (see the warnings)"
    )
