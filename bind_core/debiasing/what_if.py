"""What if these training nodes were deleted? The estimate of deleting a chosen set at once, from the audit's
per-node estimates, with what it can be trusted for.

The influence function's node-set estimate is the sum of its members' ΔΓ (BIND's Theorem 3: exact to first order
where the members' computation graphs do not overlap, an approximation where they do). For a step estimate (a
multi-layer or attention model) the sum of the members' damped steps is an approximation too: the set's own step
comes with verification (retraining without the set).
"""

# ruff: noqa: RUF009  (key() returns dataclasses.field(...): fields with metadata, not shared defaults)
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bind_core.codec import key
from bind_core.errors import ConfigError
from bind_core.influence.records import InfluenceRow

SUM_OF_MEMBERS = "sum of the members' estimates"


@dataclass(frozen=True, kw_only=True)
class SetEstimate:
    """The estimated change of the bias if a set of training nodes were deleted and the model retrained
    (:func:`estimate_set`); :func:`bind_core.codec.encode` gives its JSON."""

    nodes: list[int | str] = key("integers or strings: the user's ids of the set's members, in the order chosen")
    size: int = key("integer: the set's members")
    delta: float | None = key(
        "number: estimated ΔΓ (negative: deleting the set reduces bias); null where a member has none (its deletion "
        "has no minimum near the given weights: the note says so)"
    )
    delta_sp: float | None = key("number: the same for Γ_SP (null with delta)")
    delta_eo: float | None = key("number: the same for Γ_EO (null with delta)")
    method: str = key("string: how it was estimated")
    note: str = key("string: how far it can be trusted")


def choose(rows: Sequence[InfluenceRow], *, nodes: Sequence[int | str] | None, top: int | None) -> list[int]:
    """The positions (in ``rows``) of the chosen training nodes: the user's ids in ``nodes``, or the ``top`` most
    harmful (most negative ΔΓ; a node without one, ``delta`` null, is never among them).

    Args:
        rows: one row per training node (its ``node_id``, the user's id, and ``delta`` are read).
        nodes: the user's ids to delete (integers or text, as the rows give them; ``"7"`` matches ``7``).
        top: the number of most harmful nodes to delete.

    Returns:
        Positions into ``rows``, in the order chosen, without repeats.

    Raises:
        ConfigError: neither or both given, an empty set, ``top`` < 1, no node with a ΔΓ to rank (``top``), or ids
            that are not training nodes (named).
    """
    if (nodes is None) == (top is None):
        raise ConfigError("nodes or top: give exactly one of them")
    if top is not None:
        if top < 1:
            raise ConfigError(f"top: {top!r} must be at least 1")
        values = {i: r.delta for i, r in enumerate(rows) if r.delta is not None}
        if not values:
            raise ConfigError("top: no training node has a ΔΓ to rank (no deletion has a minimum near the weights)")
        order = sorted(values, key=lambda i: values[i])
        return [i for i in order[:top] if values[i] < 0] or order[:1]
    index = {str(r.node_id): i for i, r in enumerate(rows)}
    wanted = list(dict.fromkeys(str(n) for n in nodes or []))
    if not wanted:
        raise ConfigError("nodes: the set is empty")
    unknown = [n for n in wanted if n not in index]
    if unknown:
        shown = ", ".join(repr(n) for n in unknown[:10])
        raise ConfigError(f"nodes: {len(unknown)} id(s) are not training nodes of this audit: {shown}")
    return [index[n] for n in wanted]


def estimate_set(rows: Sequence[InfluenceRow], positions: Sequence[int], *, method: str) -> SetEstimate:
    """The estimated effect of deleting the training nodes at ``positions`` at once.

    Args:
        rows: one row per training node.
        positions: the chosen rows (:func:`choose`).
        method: the audit's estimator, ``linear`` (the influence function) or ``step``.

    Returns:
        The :class:`SetEstimate`: the sum of the members' estimates, with a note on what it is.
    """
    chosen = [rows[i] for i in positions]
    note = (
        "the influence function's node-set estimate: exact to first order where the members' computation graphs "
        "do not overlap, an approximation where they do"
        if method != "step"
        else "the sum of the members' damped steps approximates the set's own step (which deleting the set and "
        "retraining checks)"
    )
    unsettled = sum(r.settled is False for r in chosen)
    if unsettled:
        note += (
            f"; {unsettled} of the {len(chosen)} members' steps did not settle, so their estimates, and this sum, are "
            "approximate"
        )
    missing = sum(r.delta is None for r in chosen)
    if missing:
        note += (
            f"; {missing} of the {len(chosen)} members have no ΔΓ (their deletion has no minimum near the given "
            "weights), so the sum is undefined"
        )
    return SetEstimate(
        nodes=[r.node_id for r in chosen],
        size=len(chosen),
        delta=_total([r.delta for r in chosen]),
        delta_sp=_total([r.delta_sp for r in chosen]),
        delta_eo=_total([r.delta_eo for r in chosen]),
        method=f"{SUM_OF_MEMBERS} ({'step' if method == 'step' else 'influence function'})",
        note=note,
    )


def _total(values: list[float | None]) -> float | None:
    """The sum of ``values``, or ``None`` where one of them is (a member without a value)."""
    known = [v for v in values if v is not None]
    return sum(known) if len(known) == len(values) else None
