"""Verifying a what-if: the set is deleted and the model retrained over seeds, the actual effect is measured per seed
and judged against random sets of the same size; the retrained model of the first seed comes back."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from bind_core.codec import decode, encode
from bind_core.data.datasets import synthetic
from bind_core.data.graph import Graph
from bind_core.debiasing.chance import against_random, seed_baselines
from bind_core.debiasing.validation import gammas
from bind_core.debiasing.verify import Verification, verify_set
from bind_core.errors import ConfigError
from bind_core.training.fit import TrainConfig, TrainedModel, train

SEEDS = (1, 10, 100)
CONFIG = TrainConfig(epochs=40, lr=0.01, polish=False)


@pytest.fixture(scope="module")
def fitted() -> tuple[Graph, TrainedModel]:
    graph = synthetic(240, seed=2, train_per_class=30)
    return graph, train(graph, CONFIG)


def test_the_actual_effect_is_paired_by_seed_and_judged_against_random_sets(fitted: tuple[Graph, TrainedModel]) -> None:
    graph, model = fitted
    positions = [0, 3, 5, 8, 13]
    seen: list[float] = []
    verified = verify_set(model, graph, positions, seeds=SEEDS, random_sets=2, progress=seen.append)
    found = verified.verification
    assert isinstance(found, Verification) and found.size == 5 and found.seeds == list(SEEDS)
    assert found.random_sets == 2
    # Seed 1's actual effect, measured by hand: retrain with and without the set and subtract.
    nodes = graph.train_idx[positions]
    reduced = graph.without_nodes(nodes)[0]
    sp0, eo0 = gammas(train(graph, dataclasses.replace(CONFIG, seed=1)), graph)
    sp1, eo1 = gammas(train(reduced, dataclasses.replace(CONFIG, seed=1)), reduced)
    assert found.delta_sp.effects[0] == pytest.approx(sp1 - sp0, abs=1e-9)
    assert found.delta_eo.effects[0] == pytest.approx(eo1 - eo0, abs=1e-9)
    assert found.delta.effects[0] == pytest.approx(0.5 * (sp1 - sp0) + 0.5 * (eo1 - eo0), abs=1e-9)
    assert len(found.delta.effects) == 3 and found.delta.std >= 0
    assert len(found.chance.random_means) == 2 and found.chance.verdict
    # The same judgement as the chance check that retrains the set itself.
    baselines = seed_baselines(model, graph, SEEDS)
    direct = against_random(model, graph, nodes, baselines, random_sets=2)
    assert found.chance.advantage == pytest.approx(direct.advantage, abs=1e-9)
    assert found.chance.beats_random == direct.beats_random
    # Progress rose to 1 over (2 + 2)·3 retrainings; the retrained model is the first seed's, on the reduced graph.
    assert seen == sorted(seen) and seen[-1] == pytest.approx(1.0)
    assert verified.retrained is not None and verified.retrained.train_config.seed == 1
    torch.testing.assert_close(gammas(verified.retrained, reduced)[0], sp1)


def test_the_json_is_ready_leaves_the_model_out_and_round_trips(fitted: tuple[Graph, TrainedModel]) -> None:
    graph, model = fitted
    found = verify_set(model, graph, [1, 2], seeds=SEEDS, random_sets=1).verification
    body = encode(found)
    assert json.loads(json.dumps(body)) == body and decode(Verification, body) == found
    assert list(body) == ["size", "seeds", "random_sets", "gamma_before", "delta", "delta_sp", "delta_eo", "chance"]
    assert list(body["delta"]) == ["effects", "mean", "std"]
    assert list(body["chance"]) == [
        "noise_floor",
        "random_means",
        "random_mean",
        "random_std",
        "advantage",
        "yardstick",
        "beats_random",
        "reduces_bias",
        "verdict",
    ]
    assert body["seeds"] == list(SEEDS) and len(body["delta"]["effects"]) == 3
    assert isinstance(body["chance"]["random_means"], list) and isinstance(body["chance"]["beats_random"], bool)
    with pytest.raises(dataclasses.FrozenInstanceError):
        found.size = 3  # type: ignore[misc]


def test_a_progress_callback_that_raises_stops_the_retrainings(fitted: tuple[Graph, TrainedModel]) -> None:
    graph, model = fitted

    class Stop(Exception):
        pass

    def stop(fraction: float) -> None:
        if fraction > 0.2:
            raise Stop

    with pytest.raises(Stop):
        verify_set(model, graph, [1, 2], seeds=SEEDS, random_sets=3, progress=stop)


@pytest.mark.parametrize(
    ("positions", "seeds", "sets", "message"),
    [
        ([], SEEDS, 1, "empty"),
        ([1, 1], SEEDS, 1, "distinct"),
        ([10_000], SEEDS, 1, "distinct"),
        ([1], (1, 2), 1, "seeds"),
        ([1], SEEDS, 0, "random_sets"),
    ],
)
def test_bad_requests_are_refused_before_any_training(
    fitted: tuple[Graph, TrainedModel], positions: list[int], seeds: tuple[int, ...], sets: int, message: str
) -> None:
    graph, model = fitted
    with pytest.raises(ConfigError, match=message):
        verify_set(model, graph, positions, seeds=seeds, random_sets=sets)
