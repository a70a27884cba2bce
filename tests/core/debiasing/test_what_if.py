"""The what-if estimate: choosing training nodes by the user's ids or the top k, and summing their estimates."""

from __future__ import annotations

import dataclasses

import pytest

from bind_core.codec import decode, encode
from bind_core.debiasing.what_if import SetEstimate, choose, estimate_set
from bind_core.errors import ConfigError
from bind_core.influence.records import InfluenceRow


def _row(position: int, node_id: int, delta: float, delta_sp: float, delta_eo: float) -> InfluenceRow:
    return InfluenceRow(
        position=position,
        node_index=node_id,
        node_id=node_id,
        group=0,
        label=0,
        delta=delta,
        delta_sp=delta_sp,
        delta_eo=delta_eo,
    )


ROWS = [_row(0, 7, -0.2, -0.1, -0.3), _row(1, 9, 0.4, 0.5, 0.3), _row(2, 12, -0.5, -0.6, -0.4)]


def test_choose_by_ids_or_top() -> None:
    assert choose(ROWS, nodes=[12, "7", 12], top=None) == [2, 0]  # "7" matches 7; a repeat counts once
    assert choose(ROWS, nodes=None, top=2) == [2, 0] and choose(ROWS, nodes=None, top=3) == [2, 0]  # only harmful
    with pytest.raises(ConfigError, match="'99'"):
        choose(ROWS, nodes=[99], top=None)
    with pytest.raises(ConfigError, match="exactly one"):
        choose(ROWS, nodes=[7], top=1)
    with pytest.raises(ConfigError, match="empty"):
        choose(ROWS, nodes=[], top=None)


def test_the_set_estimate_is_the_sum_and_says_what_it_is() -> None:
    linear = estimate_set(ROWS, [0, 2], method="linear")
    assert linear.nodes == [7, 12] and linear.delta == pytest.approx(-0.7) and linear.delta_eo == pytest.approx(-0.7)
    assert "overlap" in linear.note and "influence function" in linear.method
    step = estimate_set(ROWS, [1], method="step")
    assert step.size == 1 and encode(step)["size"] == 1 and "approximates" in step.note and "step" in step.method
    assert "settle" not in step.note


def test_the_set_estimate_says_how_many_members_did_not_settle() -> None:
    rows = [dataclasses.replace(r, settled=k != 2) for k, r in enumerate(ROWS)]
    step = estimate_set(rows, [0, 2], method="step")
    assert step.note.endswith(
        "; 1 of the 2 members' steps did not settle, so their estimates, and this sum, are approximate"
    )
    assert "settle" not in estimate_set(rows, [0, 1], method="step").note


def test_the_set_estimate_json_keeps_its_keys_and_round_trips() -> None:
    found = estimate_set(ROWS, [2, 0], method="linear")
    body = encode(found)
    assert list(body) == ["nodes", "size", "delta", "delta_sp", "delta_eo", "method", "note"]
    assert body["nodes"] == [12, 7] and body["size"] == 2
    assert decode(SetEstimate, body) == found
