"""A warning of an audit: its sentence, for a person, and a stable code, for a machine.

A :class:`Caveat` is a ``str`` (the sentence, as the results' ``warnings`` have always held it) that also carries its
``code``: every reader of the sentences keeps working, and the results' ``warning_codes`` list each warning's code in
the same order. A platform that acts on an audit's warnings unattended (cancel the audit of a model fed the wrong
inputs, hold a release while the attribution is rough) reads the codes; the sentences may be reworded, the codes
are not (:data:`CODES` lists them, with what each means; the API's docs carry the same table).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Self

CODES: dict[str, str] = {
    "group_excluded": "a group is kept out of the metrics (absent from the test split, too small, no positive)",
    "no_edges": "the graph has no edges: the GNN sees only each node's own features",
    "few_positives": "a group has fewer than 30 positive test nodes: Γ_EO and ΔEO rest on few nodes",
    "scaled_inputs": "a supplied model is audited on features min-max scaled when the graph was read",
    "metric_undefined": "a test metric is undefined (null, not 0)",
    "few_resamples": "the metrics' intervals rest on fewer than 1000 bootstrap resamples",
    "resamples_dropped": "some intervals rest on fewer resamples than drawn (undefined in the others)",
    "output_order": "a supplied model ranks its training labels below chance: its outputs may be in another order",
    "training_fit": "a supplied model fits its own training nodes no better than a constant, or worse than a guess",
    "overconfident": "a supplied model classifies its training nodes well but its probabilities fit them worse than a "
    "guess (extreme, wrong probabilities)",
    "unseen_categories": "a supplied model on a later version: some nodes have a category it was never registered with",
    "many_classes": "the label has many classes with few nodes each (a continuous column)",
    "not_stationary": "the weights are not a stationary point: each estimate answers the proximal question",
    "non_smooth": "the model is not smooth (ReLU or similar between layers)",
    "minimum_on_kinks": "the weights are a minimum on the kinks, not a stationary point",
    "held_normalisation": "the model's batch normalisations are read as deployed and held as given by the attribution",
    "proximal_question": "the objective is flat: each ΔΓ is the proximal Bregman response, not leave-one-out",
    "no_minimum": "some deletions have no minimum near the given weights (their ΔΓ is null)",
    "moved_far": "some deletions carry the weights far from the given ones",
    "unsettled": "some nodes' steps did not settle: their values are approximate",
    "self_check_in_noise": "most of the self-check's deletions move Γ less than its ground truth's noise",
    "self_check_low": "the self-check's correlation is below 0.9: the estimates are rough",
    "other": "a warning without a code of its own (none is expected: every warning the audit writes has one)",
}
"""Every warning's code, and what it means; a code is never renamed or reused."""


class Caveat(str):
    """A warning's sentence (the ``str`` itself) with its stable :attr:`code` (one of :data:`CODES`)."""

    code: str

    def __new__(cls, text: str, code: str) -> Self:
        if code not in CODES:
            raise ValueError(f"unknown warning code {code!r}")
        made = super().__new__(cls, text)
        made.code = code
        return made

    def __getnewargs__(self) -> tuple[str, str]:  # type: ignore[override]  # (text, code): pickles with its code
        return str(self), self.code


def coded(texts: Iterable[str], code: str) -> list[Caveat]:
    """Each of ``texts`` as a :class:`Caveat` of ``code``.

    Returns:
        The caveats, in order.
    """
    return [Caveat(text, code) for text in texts]


def codes_of(warnings: Iterable[str]) -> list[str]:
    """The code of each warning, in order (a plain sentence, from code that made none, reads ``other``).

    Returns:
        One code per warning.
    """
    return [w.code if isinstance(w, Caveat) else "other" for w in warnings]
