"""Neighbour-sampled mini-batch training and the polish on the training nodes' computation graph."""

from __future__ import annotations

import json
from typing import cast

import pytest
import torch

from bind_core.data.datasets import synthetic
from bind_core.data.graph import Graph
from bind_core.errors import ConfigError
from bind_core.models.gnn import GNN, ModelConfig, node_losses
from bind_core.pipeline.config import AuditConfig
from bind_core.training import minibatch
from bind_core.training.compgraph import ComputationGraph, computation_graph, objective_inputs
from bind_core.training.fit import TrainConfig, TrainedModel, train
from bind_core.training.minibatch import validation_nodes
from bind_core.training.objective import flat_objective, objective_gradient, training_objective
from bind_core.training.polish import max_abs_gradient, polish
from bind_core.training.sampling import NeighbourSampler, SampledBatch

ARCHS = ("gcn", "sage", "gin")


@pytest.fixture(scope="module")
def graph() -> Graph:
    return synthetic(400, seed=5, train_per_class=40)


@pytest.fixture(scope="module")
def sparse_graph() -> Graph:
    """Few training nodes of a sparse graph: their computation graph is a small part of it."""
    return synthetic(3000, avg_degree=3, seed=2, train_per_class=20)


def _model(graph: Graph, arch: str, dtype: torch.dtype, layers: int = 2) -> GNN:
    torch.manual_seed(0)
    model = ModelConfig(arch=arch, layers=layers, hidden=8)
    return GNN(model, graph.num_features, graph.num_classes).to(dtype).eval()


def _run(module: GNN, graph: Graph, batch: SampledBatch) -> torch.Tensor:
    inputs = module.prepare(graph)
    source = inputs.x_prop if batch.aggregated else inputs.x
    assert source is not None
    return module.forward_blocks(source[batch.input_nodes], batch.blocks)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize(("dtype", "tol"), [(torch.float32, 1e-6), (torch.float64, 1e-12)])
@pytest.mark.parametrize("fan_out", [(-1, -1), (-1, 10_000), (10_000, 10_000)])
def test_full_fan_out_gives_the_full_batch_logits(
    graph: Graph, arch: str, dtype: torch.dtype, tol: float, fan_out: tuple[int, int]
) -> None:
    module = _model(graph, arch, dtype)
    with torch.no_grad():
        full = module(module.prepare(graph))
    sampler = NeighbourSampler(graph, arch, fan_out, layers=2, dtype=dtype, generator=torch.Generator().manual_seed(0))
    batch = sampler.sample(graph.train_idx)
    assert len(batch.blocks) == (1 if fan_out[-1] == -1 else 2)
    with torch.no_grad():
        out = _run(module, graph, batch)
    scale = max(1.0, float(full.abs().max()))
    assert float((out - full[graph.train_idx]).abs().max()) <= tol * scale


def test_three_layers_with_full_fan_out(graph: Graph) -> None:
    module = _model(graph, "sage", torch.float64, layers=3)
    sampler = NeighbourSampler(graph, "sage", (), layers=3, dtype=torch.float64)
    with torch.no_grad():
        out = _run(module, graph, sampler.sample(graph.val_idx))
        full = module(module.prepare(graph))[graph.val_idx]
    assert float((out - full).abs().max()) <= 1e-12


def test_samples_are_neighbours_without_replacement(graph: Graph) -> None:
    sampler = NeighbourSampler(graph, "sage", (3, 2), layers=2, dtype=torch.float64,
                               generator=torch.Generator().manual_seed(1))  # fmt: skip
    seeds = graph.train_idx[:20]
    batch = sampler.sample(seeds)
    block = batch.blocks[-1]  # the seeds' own neighbours
    crow, col, values = block.parts
    src = batch.input_nodes[: batch.blocks[0].shape[0]]  # the last block's input rows: the first block's output rows
    assert torch.equal(src[: seeds.numel()], seeds)
    edges = {(int(a), int(b)) for a, b in graph.edge_index.t()}
    for i, node in enumerate(seeds.tolist()):
        picked = src[col[crow[i] : crow[i + 1]]].tolist()
        assert len(picked) == len(set(picked)) == min(3, int(graph.degree[node]))
        assert all((node, j) in edges for j in picked)
        assert torch.allclose(values[crow[i] : crow[i + 1]], torch.full((len(picked),), 1 / len(picked)).double())


def test_samples_are_uniform(graph: Graph) -> None:
    """Every neighbour of a degree-5 node is drawn with probability 2/5 at fan-out 2, whatever its position."""
    seeds = (graph.degree == 5).nonzero().squeeze(1)
    sampler = NeighbourSampler(graph, "sage", (2, -1), layers=2, dtype=torch.float64,
                               generator=torch.Generator().manual_seed(0))  # fmt: skip
    counts = torch.zeros(5)
    rounds = 200
    for _ in range(rounds):
        batch = sampler.sample(seeds)
        crow, col, _ = batch.blocks[0].parts
        owner = torch.repeat_interleave(torch.arange(seeds.numel()), crow[1:] - crow[:-1])
        first = torch.searchsorted(graph.edge_index[0], seeds)  # each seed's neighbours, in the edge list's order
        picked = batch.input_nodes[col]
        rank = torch.searchsorted(graph.edge_index[1][first[owner, None] + torch.arange(5)], picked[:, None])
        counts += torch.bincount(rank.squeeze(1), minlength=5)
    expected = rounds * seeds.numel() * 2 / 5
    assert seeds.numel() >= 10
    assert float((counts / expected - 1).abs().max()) < 0.1


def test_sampling_is_seeded(graph: Graph) -> None:
    def batches(seed: int) -> list[list[torch.Tensor]]:
        sampler = NeighbourSampler(graph, "gcn", (2, 2), layers=2, dtype=torch.float32,
                                   generator=torch.Generator().manual_seed(seed))  # fmt: skip
        return [
            [b.seeds, b.input_nodes, *(t for block in b.blocks for t in block.parts)]
            for b in sampler.batches(graph.train_idx, 16)
        ]

    same = all(
        torch.equal(a, b) for x, y in zip(batches(3), batches(3), strict=True) for a, b in zip(x, y, strict=True)
    )
    assert same
    first, other = batches(3), batches(4)
    assert not all(
        a.shape == b.shape and torch.equal(a, b)
        for x, y in zip(first, other, strict=True)
        for a, b in zip(x, y, strict=False)  # different samples may have different numbers of blocks' parts
    )


@pytest.mark.parametrize("arch", ARCHS)
def test_one_full_mini_batch_epoch_is_the_full_batch_epoch(graph: Graph, arch: str) -> None:
    model = ModelConfig(arch=arch, layers=2, hidden=8, dropout=0.0)
    base = TrainConfig(epochs=3, lr=0.01, polish=False, seed=2)
    full = train(graph, base, model)
    mini = train(graph, TrainConfig(epochs=3, lr=0.01, polish=False, seed=2,
                                    batch_size=int(graph.train_idx.numel()), fan_out=(-1, -1)), model)  # fmt: skip
    assert mini.history.batches == 1 and mini.history.best_epoch == full.history.best_epoch
    assert mini.history.best_val_loss is not None and full.history.best_val_loss is not None
    assert abs(mini.history.best_val_loss - full.history.best_val_loss) <= 1e-6
    for name, value in full.module.state_dict().items():
        assert torch.allclose(mini.module.state_dict()[name], value, rtol=1e-5, atol=1e-6), name


def test_mini_batch_training_is_deterministic_and_seeded(graph: Graph) -> None:
    model = ModelConfig(arch="sage", layers=2, hidden=8)

    def weights(seed: int) -> torch.Tensor:
        config = TrainConfig(epochs=4, lr=0.01, polish=False, seed=seed, batch_size=16, fan_out=(3, 3))
        trained = train(graph, config, model)
        return torch.cat([p.detach().reshape(-1) for p in trained.module.parameters()])

    assert torch.equal(weights(1), weights(1))
    assert not torch.equal(weights(1), weights(2))


def test_a_large_validation_set_is_judged_on_a_seeded_subset(graph: Graph, monkeypatch: pytest.MonkeyPatch) -> None:
    val = graph.val_idx
    assert torch.equal(validation_nodes(val, 1), val)  # small sets stay whole
    part = validation_nodes(val, 1, limit=10)
    assert part.unique().numel() == 10 and bool(torch.isin(part, val).all())
    assert torch.equal(part, validation_nodes(val, 1, limit=10)) and not torch.equal(part, validation_nodes(val, 2, 10))
    # the epochs' validation loss is the exact mean loss over that subset (every neighbour), and the history says so
    monkeypatch.setattr(minibatch, "VALIDATION_NODES", 10)
    config = TrainConfig(epochs=2, lr=0.01, polish=False, seed=1, batch_size=16, fan_out=(3, 3))
    trained = train(graph, config, ModelConfig(arch="sage", layers=2, hidden=8))
    assert trained.history.validation_nodes == 10
    module = trained.module.eval()
    epochs = minibatch.MiniBatchEpochs(
        module, trained.prepare(graph), graph, torch.optim.Adam(module.parameters()), batch_size=16, fan_out=(3, 3),
        seed=1,
    )  # fmt: skip
    with torch.no_grad():
        expected = node_losses(module(trained.prepare(graph), part), graph.y[part]).mean()
        assert torch.equal(epochs.validation_nodes, part)
        torch.testing.assert_close(epochs.validation_loss(), expected)


def test_sampled_training_is_about_as_accurate_as_full_batch() -> None:
    graph = synthetic(1200, seed=7, train_per_class=100)
    model = ModelConfig(arch="gcn", layers=2, hidden=16)

    def val_accuracy(config: TrainConfig) -> float:
        trained = train(graph, config, model)
        predicted = trained.predict_proba(graph, graph.val_idx).argmax(1)
        return float((predicted == graph.y[graph.val_idx]).double().mean())

    full = val_accuracy(TrainConfig(epochs=60, lr=0.01, polish=False, seed=0))
    sampled = val_accuracy(TrainConfig(epochs=60, lr=0.01, polish=False, seed=0, batch_size=32, fan_out=(4, 4)))
    assert full > 0.7
    assert abs(sampled - full) <= 0.05


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("layers", [2, 3])
def test_computation_graph_objective_equals_the_full_graphs(sparse_graph: Graph, arch: str, layers: int) -> None:
    module = _model(sparse_graph, arch, torch.float64, layers=layers)
    inputs = module.prepare(sparse_graph)
    sub = computation_graph(module, inputs, sparse_graph)
    assert sub is not None and sub.nodes.numel() < sparse_graph.num_nodes / 2
    wd = 1e-3
    full = training_objective(module, inputs, sparse_graph, wd)
    part = training_objective(module, sub.inputs, sub, wd)
    assert abs(float(full - part)) <= 1e-10
    full_grads = objective_gradient(module, inputs, sparse_graph, wd)
    for g_full, g_part in zip(full_grads, objective_gradient(module, sub.inputs, sub, wd), strict=True):
        assert float((g_full - g_part).abs().max()) <= 1e-10
    chosen_inputs, chosen_rows = objective_inputs(module, inputs, sparse_graph)
    assert chosen_rows is not sparse_graph and chosen_inputs.adjacency is not None


@pytest.mark.parametrize("arch", ARCHS)
def test_computation_graph_hessian_vector_products_equal_the_full_graphs(sparse_graph: Graph, arch: str) -> None:
    """What the polish's Newton finish forms its Hessians from (forward over reverse on the flat objective)."""
    module = _model(sparse_graph, arch, torch.float64)
    inputs = module.prepare(sparse_graph)
    sub = computation_graph(module, inputs, sparse_graph)
    assert sub is not None
    full, theta, _ = flat_objective(module, inputs, sparse_graph, 1e-3)
    part, _, _ = flat_objective(module, sub.inputs, sub, 1e-3)
    vector = torch.randn(theta.shape, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    hvp_full = torch.func.jvp(torch.func.grad(full), (theta,), (vector,))[1]
    hvp_part = torch.func.jvp(torch.func.grad(part), (theta,), (vector,))[1]
    assert float(hvp_full.abs().max()) > 1e-3
    assert float((hvp_full - hvp_part).abs().max()) <= 1e-10


def test_objective_inputs_keep_the_whole_graph_when_the_part_is_most_of_it(graph: Graph) -> None:
    module = _model(graph, "gcn", torch.float64)
    inputs = module.prepare(graph)
    sub = computation_graph(module, inputs, graph)
    assert sub is not None
    share = sub.nodes.numel() / graph.num_nodes
    assert objective_inputs(module, inputs, graph, max_fraction=share - 0.01) == (inputs, graph)
    _, rows = objective_inputs(module, inputs, graph, max_fraction=share)
    assert rows is not graph and torch.equal(cast(ComputationGraph, rows).nodes, sub.nodes)
    dense = synthetic(300, seed=1, train_per_class=40)  # training nodes whose neighbours are nearly every node
    dense_module = _model(dense, "gcn", torch.float64)
    dense_inputs = dense_module.prepare(dense)
    assert objective_inputs(dense_module, dense_inputs, dense) == (dense_inputs, dense)
    one_layer = _model(graph, "gcn", torch.float64, layers=1)
    assert computation_graph(one_layer, one_layer.prepare(graph), graph) is None


def test_polish_on_the_computation_graph_reaches_a_stationary_point_of_the_full_objective(sparse_graph: Graph) -> None:
    trained = train(sparse_graph, TrainConfig(epochs=20, lr=0.01, polish=False, seed=1, batch_size=10, fan_out=(3, 3)),
                    ModelConfig(arch="gcn", layers=2, hidden=8))  # fmt: skip
    polish(trained, sparse_graph, newton_max_seconds=60)
    assert trained.stationarity.converged
    # On the whole graph, not the computation graph the polish used:
    module = trained.module
    grads = objective_gradient(module, module.prepare(sparse_graph), sparse_graph, trained.train_config.weight_decay)
    assert max(float(g.abs().max()) for g in grads) <= trained.train_config.polish_tol
    assert max_abs_gradient(trained, sparse_graph) <= trained.train_config.polish_tol


def test_train_config_round_trips_the_batch_settings() -> None:
    config = AuditConfig(model=ModelConfig(layers=2), training=TrainConfig(batch_size=256, fan_out=(10, 10)))
    again = AuditConfig.from_dict(json.loads(json.dumps(config.to_dict())))
    assert again == config and again.training.fan_out == (10, 10)
    assert TrainConfig.from_dict({"fan_out": [5, None]}).fan_out == (5, -1)
    trained = train(synthetic(200, seed=1, train_per_class=20), TrainConfig(epochs=2, polish=False, batch_size=8))
    loaded = TrainedModel.from_bytes(trained.to_bytes(), json.loads(json.dumps(trained.config_dict())))
    assert loaded.train_config == trained.train_config and loaded.history.batch_size == 8
    assert loaded.history == trained.history


def test_an_audit_config_that_cannot_sample_is_refused_when_made() -> None:
    """Checked when the audit is requested (the API's 422), not when a worker trains it."""
    with pytest.raises(ConfigError, match="fan_out"):
        AuditConfig(training=TrainConfig(batch_size=256, fan_out=(10, 10)))  # one layer, two entries
    with pytest.raises(ConfigError, match="gat"):
        AuditConfig(model=ModelConfig(arch="gat", layers=2), training=TrainConfig(batch_size=256))
    assert AuditConfig(model=ModelConfig(arch="gat", layers=2), training=TrainConfig(fan_out=(3, 3))).training


@pytest.mark.parametrize(
    "settings",
    [{"batch_size": -1}, {"batch_size": True}, {"fan_out": [0, 3]}, {"fan_out": ["a"]}, {"fan_out": 3},
     {"fan_out": [2.5]}],
)  # fmt: skip
def test_bad_batch_settings_are_refused(settings: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        TrainConfig.from_dict(settings)


def test_mini_batches_need_a_sampled_architecture_and_a_fan_out_per_layer(graph: Graph) -> None:
    with pytest.raises(ConfigError, match="one entry per layer"):
        train(graph, TrainConfig(epochs=1, polish=False, batch_size=8, fan_out=(3,)), ModelConfig(layers=2))
    with pytest.raises(ConfigError, match="gat"):
        train(graph, TrainConfig(epochs=1, polish=False, batch_size=8), ModelConfig(arch="gat", layers=2))
    with pytest.raises(ValueError, match="blocks"):
        _model(graph, "gcn", torch.float32).forward_blocks(graph.x, [])
