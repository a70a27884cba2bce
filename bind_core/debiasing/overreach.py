"""The caveat for a debiasing estimate that claims the impossible: deleting a set lowers Γ by more than Γ itself."""

from __future__ import annotations


def overreach(estimated: float, gamma: float | None, items: str) -> str | None:
    """A summed estimate that lowers Γ by more than Γ itself claims the impossible (Γ ≥ 0): the set is too large,
    or the model too far from linear, for its members' effects to add up. Edges on Income: 5% of the edges summed to
    −0.38 against Γ = 0.16, and deleting them raised Γ by 0.09; a one-layer GIN's 75 most harmful nodes of
    ``synthetic(1500)`` summed to −25.7 (docs/RESULTS.md). ``items``: what was deleted ("edges", "nodes");
    ``gamma``: the audited model's Γ (``None``: undefined, no caveat)."""
    if gamma is None or estimated >= -gamma:
        return None
    return (
        f"the deleted {items}' estimates sum to {estimated:+.4f}, more than Γ = {gamma:.4f} itself: far outside "
        f"the range where the {items}' effects add up, so the retrained effect may differ in size and sign"
    )
