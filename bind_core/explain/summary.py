"""The profile of the harmful nodes in a few lines of text (what ``bind-audit run`` prints)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["profile_lines"]


def _pct(value: Any) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


def _delta(value: Any) -> str:
    return "–" if value is None else f"{value:+.2e}"


def profile_lines(profile: Mapping[str, Any], *, top: int = 3) -> list[str]:
    """The harmful set's share of the harm and group mix, then the ``top`` rules that held on the held-out half
    (or why none is reported)."""
    sets = profile["sets"]
    harmful, every = sets["harmful"], sets["all"]
    mix = ", ".join(f"{g['name']} {_pct(g['share'])} (all {_pct(a['share'])})"
                    for g, a in zip(harmful["groups"], every["groups"], strict=True))  # fmt: skip
    lines = [
        f"what the harmful nodes have in common (harmful: the {profile['fraction']:.0%} most negative ΔΓ, all < 0):",
        f"  harmful set: {harmful['nodes']} nodes holding {_pct(harmful['harm_share'])} of the harm; groups {mix}",
    ]
    search = profile["search"]
    rules = profile["rules"]
    if not rules:
        lines.append(f"  no rule reported: {search['reason']} ({search['tested']} candidate(s) checked)")
        return lines
    lines.append(f"  rules that held on the held-out half ({len(rules)} of {search['tested']} candidates):")
    for rule in rules[:top]:
        held = rule["holdout"]
        lines.append(
            f"    {rule['text']}: {held['support']} held-out nodes, mean ΔΓ {_delta(held['mean_delta'])}, "
            f"{_pct(held['harm_share'])} of the held-out harm (fitted {_pct(rule['fit']['harm_share'])}; "
            f"p = {rule['p_value']:.2g})"
        )
    return lines
