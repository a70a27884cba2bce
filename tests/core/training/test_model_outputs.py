"""A supplied model's own outputs, as its owner's code computes them, against the model as the audit reads it: read
as logits, log-probabilities or probabilities, from an ``.npy``, a CSV of node ids or a tensor; a model that does not
give them is refused with what most likely differs; one that does has its inputs confirmed, so that the fit check
no longer doubts a scaled upload and a poor fit is said without withholding the verdict."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import save
from torch_geometric.nn import GCN

import bind_core as bc
from bind_core.cli import main
from bind_core.data.datasets import ingest_files, save_npz, synthetic
from bind_core.data.graph import Graph
from bind_core.data.labels import user_ids
from bind_core.pipeline import prepare_for_audit, supplied_model_warnings
from bind_core.pipeline.output_order import supplied_model_doubt
from bind_core.pipeline.results import SuppliedModel
from bind_core.training.fit_check import check_training_fit
from bind_core.training.outputs import GivenOutputs, OutputsDifferError, compare_outputs, read_outputs

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def graph() -> Graph:
    return synthetic(120, seed=2, train_per_class=20)


def _pyg(graph: Graph, epochs: int = 40) -> tuple[GCN, bytes, dict[str, Any]]:
    """A PyG GCN trained on ``graph`` as its owner trains it, its weights and its config."""
    torch.manual_seed(0)
    args = {"in_channels": graph.num_features, "hidden_channels": 8, "num_layers": 2, "out_channels": 2}
    module = GCN(**args)
    optimizer = torch.optim.Adam(module.parameters(), lr=0.01, weight_decay=5e-4)
    for _ in range(epochs):
        optimizer.zero_grad()
        F.cross_entropy(module(graph.x, graph.edge_index)[graph.train_idx], graph.y[graph.train_idx]).backward()
        optimizer.step()
    config = {"format": "torch_geometric", "class": "GCN", "args": args,
              "training": {"loss": "cross_entropy", "weight_decay": 5e-4}}  # fmt: skip
    return module.eval(), save({k: v.contiguous() for k, v in module.state_dict().items()}), config


def _npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def _logits(module: GCN, graph: Graph) -> torch.Tensor:
    with torch.no_grad():
        return module(graph.x, graph.edge_index)


@pytest.mark.parametrize("kind", ["logits", "log_softmax", "probabilities"])
def test_the_owners_outputs_in_any_of_their_forms_are_given_by_the_model(graph: Graph, kind: str) -> None:
    module, weights, config = _pyg(graph)
    logits = _logits(module, graph)
    shown = {"logits": logits, "log_softmax": logits.log_softmax(1), "probabilities": logits.softmax(1)}[kind]
    given = read_outputs(_npy(shown.numpy()), "out.npy", graph)
    _, record = prepare_for_audit(weights, config, graph, bc.AuditConfig(), outputs=given)
    match = record.outputs
    assert match is not None and match.matches and match.nodes == graph.num_nodes
    assert match.reading == ("probabilities" if kind == "probabilities" else "logits")
    assert match.max_difference < 1e-6 and match.differing == 0


def test_a_csv_of_some_nodes_by_id_and_a_tensor_by_ids(graph: Graph) -> None:
    module, weights, config = _pyg(graph)
    proba = _logits(module, graph).softmax(1)
    test = graph.test_idx.tolist()
    ids = user_ids(graph, test)
    table = "node,denied,approved\n" + "".join(
        f"{i},{p[0]:.9f},{p[1]:.9f}\n" for i, p in zip(ids, proba[test].tolist(), strict=True)
    )
    given = read_outputs(table.encode(), "outputs.CSV", graph)
    assert given.form == "table" and given.rows.tolist() == test
    _, record = prepare_for_audit(weights, config, graph, bc.AuditConfig(), outputs=given)
    assert record.outputs is not None and record.outputs.matches and record.outputs.nodes == len(test)
    by_ids = GivenOutputs.of(proba[test], graph, node_ids=ids)
    assert compare_outputs(proba.double(), by_ids, graph).matches


def test_outputs_are_compared_in_the_models_own_order_before_its_classes_reorder_them(graph: Graph) -> None:
    module, weights, config = _pyg(graph)
    given = GivenOutputs.of(_logits(module, graph), graph)
    reordered = {**config, "classes": ["1", "0"]}  # output 0 stands for label 1: the audit swaps the columns after
    model, record = prepare_for_audit(weights, reordered, graph, bc.AuditConfig(), outputs=given)
    assert record.outputs is not None and record.outputs.matches and record.classes == ["1", "0"]
    assert torch.allclose(model.predict_proba(graph), _logits(module, graph).double().softmax(1).flip(1), atol=1e-6)


def test_one_logit_for_two_classes(graph: Graph) -> None:
    module, _, _ = _pyg(graph)
    logits = _logits(module, graph)
    margin = (logits[:, 1] - logits[:, 0]).numpy()  # the one logit a two-class model's softmax is a sigmoid of
    proba = torch.softmax(logits.double(), 1)
    assert compare_outputs(proba, GivenOutputs.of(margin, graph), graph).reading == "logits"
    as_probability = GivenOutputs.of(torch.sigmoid(torch.from_numpy(margin)), graph)
    assert compare_outputs(proba, as_probability, graph).reading == "probabilities"
    assert compare_outputs(proba, as_probability, graph).matches


def test_outputs_the_model_does_not_give_are_refused_saying_what_most_likely_differs(tmp_path: Path) -> None:
    n = 60
    table = "id,age,score,gender,label\n" + "".join(
        f"{i},{20 + i},{(i * 7) % 11},{'fm'[i % 2]},{int(i % 4 < 2)}\n" for i in range(n)
    )
    (tmp_path / "t.csv").write_text(table)
    (tmp_path / "e.csv").write_text("".join(f"{i},{(i + 1) % n}\n" for i in range(n)))
    read = {"label": "label", "sensitive": "gender"}
    own = ingest_files(tmp_path / "t.csv", tmp_path / "e.csv", scale=False, **read).graph  # what the owner feeds it
    scaled = ingest_files(tmp_path / "t.csv", tmp_path / "e.csv", scale=True, **read).graph  # an upload's default
    module, weights, config = _pyg(own)
    given = read_outputs(_npy(_logits(module, own).numpy()), "o.npy", scaled)
    with pytest.raises(OutputsDifferError) as info:
        prepare_for_audit(weights, config, scaled, bc.AuditConfig(), outputs=given)
    message = str(info.value)
    assert message.startswith("the model as read here does not give your outputs: ")
    assert "scaled to [-1, 1] when it was read" in message and "scale=false" in message
    assert "the .npy's rows in another order" in message and not info.value.match.reordered
    assert not info.value.match.matches and info.value.match.differing > 0
    # on the values it is fed, the same outputs are the model's
    _, record = prepare_for_audit(weights, config, own, bc.AuditConfig(), outputs=given)
    assert record.outputs is not None and record.outputs.matches


def test_outputs_that_differ_a_little_are_said_to_come_from_rounded_inputs(graph: Graph) -> None:
    """The model fed the table's values rounded to two digits, as a table written with fewer digits than the owner's
    code fed it: outputs close to the model's but beyond the tolerance, said to come from inputs that differ a little
    (not from a scaling or other columns, which move them by far more)."""
    module, weights, config = _pyg(graph)
    with torch.no_grad():
        rounded = module(torch.round(graph.x * 100) / 100, graph.edge_index)
    given = read_outputs(_npy(rounded.numpy()), "o.npy", graph)
    with pytest.raises(OutputsDifferError) as info:
        prepare_for_audit(weights, config, graph, bc.AuditConfig(), outputs=given)
    assert 1e-4 < info.value.match.max_difference < 1e-2
    assert "Most likely: inputs that differ only a little" in str(info.value) and "rounded" in str(info.value)


@pytest.mark.parametrize(
    ("name", "data", "says"),
    [
        ("o.npy", _npy(np.zeros((3, 2))), "3 rows where the graph has 120 nodes"),
        ("o.npy", _npy(np.array([{"a": 1}] * 120, dtype=object)), "not a numpy .npy file of numbers"),  # a pickle
        ("o.npy", _npy(np.full((120, 2), np.nan)), "not a finite number"),
        ("o.npy", _npy(np.zeros((120, 3))), "3 columns where the model has 2 outputs"),
        ("o.csv", b"node,a,b\n1,0.5,0.5\n1,0.4,0.6\n", "node 1 is given twice"),
        ("o.csv", b"node,a,b\n100000,0.5,0.5\n", "not in this graph"),
        ("o.csv", b"node,a,b\n1,0.5\n", "line 2 has 2 fields where the header has 3"),
        ("o.csv", b"node,a,b\n1,x,0.5\n", "line 2: 'x' is not a number"),
        ("o.csv", b"node,a,b\nn1,0.5,0.5\n", "line 2: the node id 'n1' is not one of this graph's integer ids"),
        ("o.pt", b"\x80\x04", "neither .npy"),
    ],
)
def test_outputs_that_do_not_read_say_why(graph: Graph, name: str, data: bytes, says: str) -> None:
    _, weights, config = _pyg(graph, epochs=1)
    with pytest.raises(bc.ConfigError, match=says):
        given = read_outputs(data, name, graph)
        prepare_for_audit(weights, config, graph, bc.AuditConfig(), outputs=given)


def _scaled(graph: Graph) -> Graph:
    """``graph`` as if its features had been min-max scaled when it was read."""
    return Graph.build(
        graph.x, graph.edge_index, graph.y, graph.sens, graph.train_idx, graph.val_idx, graph.test_idx,
        feature_ranges=[(0.0, 1.0)] * graph.num_features,
    )  # fmt: skip


def test_confirmed_inputs_clear_the_doubt_of_a_scaled_upload(graph: Graph) -> None:
    scaled = _scaled(graph)
    y = scaled.y
    right = torch.rand(scaled.num_nodes, generator=torch.Generator().manual_seed(0)) < 0.85
    chosen = torch.where(right, y, 1 - y)
    extreme = F.one_hot(chosen, 2).double() * (1 - 2e-9) + 1e-9  # right 85% of the time, sure of every answer
    doubted = check_training_fit(extreme, scaled)
    assert doubted.worse_than_guess and not doubted.overconfident and doubted.suspect
    confirmed = check_training_fit(extreme, scaled, inputs_confirmed=True)
    assert confirmed.overconfident and not confirmed.suspect and confirmed.inputs_confirmed
    assert confirmed.text is not None and "it is fed what its owner feeds it" in confirmed.text
    # a poor fit with its inputs confirmed is said, and the verdict stands
    constant = torch.full((scaled.num_nodes, 2), 0.5, dtype=torch.float64)
    poor = check_training_fit(constant, scaled, inputs_confirmed=True)
    assert poor.no_better and poor.poor and not poor.suspect
    supplied = SuppliedModel(polished_by_service=False, training_fit=poor)
    [warning] = supplied_model_warnings(supplied)
    assert warning.code == "training_fit" and "trained on another split" in warning
    assert supplied_model_doubt(supplied) is None


def test_run_audit_takes_outputs_for_a_supplied_model_only(graph: Graph) -> None:
    module, weights, config = _pyg(graph)
    model = bc.TrainedModel.from_bytes(weights, config)
    given = GivenOutputs.of(_logits(module, graph), graph)
    settings = bc.AuditConfig(stages=("metrics",), bootstrap=0)
    result = bc.run_audit(graph, settings, model=model, outputs=given).typed()
    assert result.supplied_model is not None and result.supplied_model.outputs is not None
    assert result.supplied_model.outputs.matches
    with pytest.raises(bc.ConfigError, match="outputs: a supplied model's own outputs"):
        bc.run_audit(graph, settings, outputs=given)


def test_the_command_line_compares_model_outputs(
    tmp_path: Path, graph: Graph, capsys: pytest.CaptureFixture[str]
) -> None:
    module, weights, config = _pyg(graph)
    save_npz(graph, tmp_path / "g.npz")
    (tmp_path / "m.safetensors").write_bytes(weights)
    (tmp_path / "m.json").write_text(json.dumps(config))
    np.save(tmp_path / "right.npy", _logits(module, graph).numpy())
    np.save(tmp_path / "wrong.npy", _logits(module, graph).numpy()[::-1].copy())
    run = ["--npz", str(tmp_path / "g.npz"), "--model-weights", str(tmp_path / "m.safetensors"), "--model-config",
           str(tmp_path / "m.json"), "--skip", "influence,debiasing,validation", "--bootstrap", "0"]  # fmt: skip
    assert main([*run, "--model-outputs", str(tmp_path / "right.npy")]) == 0
    assert f"the outputs given for {graph.num_nodes} nodes reproduced (read as logits" in capsys.readouterr().out
    assert main([*run, "--model-outputs", str(tmp_path / "wrong.npy")]) == 2
    assert "the outputs given are the model's own, but for other nodes" in capsys.readouterr().err
    assert main(["--synthetic", "--model-outputs", str(tmp_path / "right.npy")]) == 2
    assert "--model-outputs: goes with --model-weights" in capsys.readouterr().err


def test_outputs_of_other_nodes_are_told_apart(graph: Graph) -> None:
    module, weights, config = _pyg(graph)
    logits = _logits(module, graph).numpy()
    shuffled = read_outputs(_npy(logits[::-1].copy()), "o.npy", graph)
    with pytest.raises(OutputsDifferError) as info:
        prepare_for_audit(weights, config, graph, bc.AuditConfig(), outputs=shuffled)
    assert info.value.match.reordered is True
    assert str(info.value).startswith("the outputs given are the model's own, but for other nodes: ")
    assert "the .npy's rows are not in the graph's order of nodes" in str(info.value)
