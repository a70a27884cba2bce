"""Models and training: architectures, the one-layer-GCN shortcut, determinism, polish, serialisation."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable

import numpy as np
import pytest
import torch
from torch_geometric.nn import GCNConv

from bind_core.data.graph import Graph
from bind_core.errors import ConfigError
from bind_core.fairness.metrics import accuracy
from bind_core.models.gnn import ARCHS, GNN, ModelConfig
from bind_core.models.propagation import GraphInputs
from bind_core.training.fit import TrainConfig, TrainedModel, fine_tune, train, training_objective
from bind_core.training.hessian import dense_hessian
from bind_core.training.newton import newton_finish
from bind_core.training.polish import gradient_norm, polish


def test_one_layer_gcn_shortcut_equals_pyg_gcnconv(small_graph: Graph) -> None:
    torch.manual_seed(0)
    model = GNN(ModelConfig(), small_graph.num_features, 2).double().eval()
    inputs = model.prepare(small_graph)
    assert inputs.x_prop is not None  # the shortcut is taken
    reference = GCNConv(small_graph.num_features, 16).double()  # PyG's own normalisation
    reference.lin.weight.data = model.convs[0].lin.weight.data.clone()
    reference.bias.data = model.convs[0].bias.data.clone()
    expected = model.head(reference(small_graph.x.double(), small_graph.edge_index))
    assert torch.allclose(model(inputs), expected, atol=1e-10)


@pytest.mark.parametrize("arch", ["gin", "sage"])
def test_one_layer_gin_and_sage_shortcuts_equal_pyg(small_graph: Graph, arch: str) -> None:
    torch.manual_seed(0)
    model = GNN(ModelConfig(arch=arch), small_graph.num_features, 2).double().eval()
    inputs = model.prepare(small_graph)
    assert inputs.x_prop is not None and model.row_separable
    through_pyg = model(GraphInputs(inputs.x, inputs.edge_index, None, None))  # PyG's message passing
    assert torch.allclose(model(inputs), through_pyg, atol=1e-10)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("layers", [1, 2])
def test_every_architecture_trains_and_predicts(small_graph: Graph, arch: str, layers: int) -> None:
    trained = train(small_graph, TrainConfig(epochs=20, polish=False), ModelConfig(arch=arch, layers=layers, heads=2))
    proba = trained.predict_proba(small_graph)
    assert proba.shape == (small_graph.num_nodes, 2)
    assert torch.allclose(proba.sum(1), torch.ones(small_graph.num_nodes, dtype=proba.dtype))


def test_training_is_deterministic_for_a_seed(small_graph: Graph) -> None:
    cfg = TrainConfig(epochs=50, seed=4)
    a, b = train(small_graph, cfg), train(small_graph, cfg)
    c = train(small_graph, TrainConfig(epochs=50, seed=5))
    for (name, pa), pb, _pc in zip(
        a.module.state_dict().items(), b.module.state_dict().values(), c.module.state_dict().values(), strict=True
    ):
        assert torch.equal(pa, pb), name
    assert any(
        not torch.equal(pa, pc)
        for pa, pc in zip(a.module.state_dict().values(), c.module.state_dict().values(), strict=True)
    )


def test_polish_reaches_a_stationary_point_and_learns(small_graph: Graph, small_model: TrainedModel) -> None:
    record = small_model.stationarity
    assert record.polished and record.grad_norm is not None and record.adam_grad_norm is not None
    assert record.grad_norm < 1e-5 < record.adam_grad_norm
    assert gradient_norm(small_model, small_graph) < 1e-5
    test = small_graph.test_idx
    pred = small_model.predict_proba(small_graph, test).argmax(1)
    assert accuracy(small_graph.y[test], pred) > 0.75


def _max_abs_grad(trained: TrainedModel, graph: Graph) -> float:
    module = trained.module.eval()
    obj = training_objective(module, trained.prepare(graph), graph, trained.train_config.weight_decay)
    return max(float(g.abs().max()) for g in torch.autograd.grad(obj, list(module.parameters())))


def test_converged_lbfgs_polish_forms_no_hessian(small_model: TrainedModel) -> None:
    # the paper's GCN converges under L-BFGS: the Newton finish must not run (nor cost time) there
    assert small_model.stationarity.converged and small_model.stationarity.newton is None
    assert "newton" not in small_model.config_dict()["stationarity"]


def test_newton_finish_completes_a_capped_polish(small_graph: Graph) -> None:
    adam = train(small_graph, TrainConfig(epochs=50, polish=False, seed=2))
    lbfgs_only = polish(
        TrainedModel(copy.deepcopy(adam.module), adam.model_config, adam.train_config),
        small_graph,
        max_iter=5,
        newton=False,
    )
    assert not lbfgs_only.stationarity.converged and _max_abs_grad(lbfgs_only, small_graph) > 1e-5
    finished = polish(
        TrainedModel(copy.deepcopy(adam.module), adam.model_config, adam.train_config), small_graph, max_iter=5
    )
    newton = finished.stationarity.newton
    assert newton is not None and newton.converged and finished.stationarity.converged
    assert _max_abs_grad(finished, small_graph) <= 1e-7 and newton.negative_eigenvalues == 0
    reference = polish(TrainedModel(copy.deepcopy(adam.module), adam.model_config, adam.train_config), small_graph)
    assert reference.stationarity.newton is None  # L-BFGS alone converges with its full budget here
    # the same minimum (the objective has flat directions, so compare values, not weights)
    assert finished.objective(small_graph) <= reference.objective(small_graph) + 1e-12
    assert torch.allclose(finished.predict_proba(small_graph), reference.predict_proba(small_graph), atol=1e-5)


def test_message_passing_models_are_finished_by_frozen_hessian_newton(small_graph: Graph) -> None:
    # L-BFGS capped at 3 iterations leaves a two-layer model far from stationary; the frozen-Hessian Newton finish
    # brings it to the tolerance with few Hessians, and newton=False leaves it where L-BFGS stopped
    adam = train(small_graph, TrainConfig(epochs=20, polish=False), ModelConfig(layers=2, hidden=4))
    off = polish(TrainedModel(copy.deepcopy(adam.module), adam.model_config, adam.train_config), small_graph,
                 max_iter=3, newton=False)  # fmt: skip
    assert not off.stationarity.converged and off.stationarity.newton is None
    capped = polish(adam, small_graph, max_iter=3)
    newton = capped.stationarity.newton
    assert newton is not None and capped.stationarity.converged and newton.converged
    assert _max_abs_grad(capped, small_graph) <= 1e-7 and newton.rounds is not None
    assert newton.accepted > newton.hessians  # most steps reuse a frozen eigendecomposition


def _ill_conditioned_logistic() -> tuple[Callable[[torch.Tensor], torch.Tensor], int]:
    """Logistic regression whose feature scales span 10⁻³..10³: a Hessian condition number of ~10¹²."""
    gen = torch.Generator().manual_seed(0)
    n, p = 100, 10
    x = torch.randn(n, p, generator=gen, dtype=torch.float64) * torch.logspace(-3, 3, p, dtype=torch.float64)
    y = torch.sign(torch.randn(n, generator=gen, dtype=torch.float64))

    def objective(theta: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.softplus(-y * (x @ theta)).mean() + 0.5e-6 * (theta * theta).sum()

    return objective, p


def test_newton_finish_converges_where_lbfgs_stalls_on_an_ill_conditioned_objective() -> None:
    objective, p = _ill_conditioned_logistic()
    theta = torch.zeros(p, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS(
        [theta],
        lr=1.0,
        max_iter=500,
        max_eval=760,
        tolerance_grad=1e-10,
        tolerance_change=1e-16,
        history_size=50,
        line_search_fn="strong_wolfe",
    )

    def closure() -> torch.Tensor:
        opt.zero_grad()
        value = objective(theta)
        value.backward()
        return value

    opt.step(closure)
    start = theta.detach()
    assert float(torch.func.grad(objective)(start).abs().max()) > 1e-7  # the premise: L-BFGS stalls far off
    finished, record = newton_finish(objective, start, tol=1e-10)
    assert record.converged and record.iterations <= 20
    assert float(torch.func.grad(objective)(finished).abs().max()) <= 1e-10
    assert float(objective(finished)) <= float(objective(start))


def test_newton_finish_leaves_a_saddle_for_a_minimum() -> None:
    # (x² − 1)² + y² has a saddle at the origin (curvature −4 in x) and minima at x = ±1; plain Newton from
    # near the saddle jumps onto it, a step on the shifted (positive definite) Hessian does not
    def objective(theta: torch.Tensor) -> torch.Tensor:
        return (theta[0] ** 2 - 1) ** 2 + theta[1] ** 2

    start = torch.tensor([1e-3, 0.5], dtype=torch.float64)
    finished, record = newton_finish(objective, start, tol=1e-12)
    assert record.converged and record.negative_eigenvalues == 0
    assert torch.allclose(finished, torch.tensor([1.0, 0.0], dtype=torch.float64), atol=1e-9)
    assert bool((torch.linalg.eigvalsh(dense_hessian(objective, finished)) > 0).all())


@pytest.mark.parametrize(("limit", "gaps"), [(0, [2] * 23), (16, [2, 4, 8, 16, 16])])
def test_frozen_newton_waits_longer_for_each_refresh_up_to_the_limit(limit: int, gaps: list[int]) -> None:
    # a frozen curvature 1000 times too large: each step cuts the gradient by 0.1%, no window of steps halves it, so
    # every window ends in a refresh (here the same wrong curvature); with refresh_limit each doubles the next window
    def objective(theta: torch.Tensor) -> torch.Tensor:
        return 0.5 * (theta * theta).sum()

    formed_at: list[float] = []

    def wrong(_objective: object, theta: torch.Tensor, *, progress: object = None) -> torch.Tensor:
        formed_at.append(float(objective(theta)))
        return 1000.0 * torch.eye(theta.numel(), dtype=theta.dtype)

    start = torch.ones(3, dtype=torch.float64)
    eigen = torch.linalg.eigh(1000.0 * torch.eye(3, dtype=torch.float64))
    _, record = newton_finish(
        objective, start, tol=1e-12, max_iter=47, eigen=eigen, refresh_after=2, refresh_limit=limit, hessian=wrong
    )
    steps = [round(math.log(value / 1.5) / (2 * math.log(1 - 1e-3))) for value in formed_at]  # θ_k = (1 − 10⁻³)^k
    assert [b - a for a, b in zip([0, *steps], steps, strict=False)] == gaps and record.hessians == len(gaps)
    assert record.accepted == 47 and not record.converged


def test_dense_hessian_matches_torch_func() -> None:
    objective, p = _ill_conditioned_logistic()
    theta = torch.linspace(-1, 1, p, dtype=torch.float64) * 1e-3
    expected = torch.func.hessian(objective)(theta)
    assert torch.allclose(dense_hessian(objective, theta, chunk=3), 0.5 * (expected + expected.T), rtol=1e-10)


def test_progress_is_reported_up_to_one(small_graph: Graph) -> None:
    seen: list[tuple[str, float]] = []
    train(small_graph, TrainConfig(epochs=30, polish=False), progress=lambda s, f: seen.append((s, f)))
    fracs = [f for _, f in seen]
    assert {s for s, _ in seen} == {"training"} and fracs == sorted(fracs) and fracs[-1] == 1.0
    seen.clear()
    train(small_graph, TrainConfig(epochs=30), progress=lambda s, f: seen.append((s, f)))  # with the polish
    fracs = [f for _, f in seen]
    assert fracs == sorted(fracs) and fracs[-1] == 1.0 and any(0.8 < f < 1.0 for f in fracs)


def test_keep_best_val_vs_last(small_graph: Graph) -> None:
    best = train(small_graph, TrainConfig(epochs=60, polish=False, keep="best_val"))
    last = train(small_graph, TrainConfig(epochs=60, polish=False, keep="last"))
    assert best.history.best_epoch is not None and 0 <= best.history.best_epoch <= 59
    assert last.history.best_epoch == 59


def test_safetensors_roundtrip(tmp_path, small_graph: Graph, small_model: TrainedModel) -> None:  # type: ignore[no-untyped-def]
    small_model.save(tmp_path / "m")
    loaded = TrainedModel.load(tmp_path / "m")
    assert torch.equal(loaded.predict_proba(small_graph), small_model.predict_proba(small_graph))
    again = TrainedModel.from_bytes(small_model.to_bytes(), small_model.config_dict())
    assert again.stationarity == small_model.stationarity


def test_weights_that_do_not_fit_are_refused(small_model: TrainedModel) -> None:
    config = small_model.config_dict() | {"in_dim": small_model.module.in_dim + 1}
    with pytest.raises(ConfigError, match="do not fit"):
        TrainedModel.from_bytes(small_model.to_bytes(), config)
    with pytest.raises(ConfigError, match="safetensors"):
        TrainedModel.from_bytes(b"\x80\x04not a safetensors file", small_model.config_dict())
    with pytest.raises(ConfigError):
        TrainedModel.from_bytes(small_model.to_bytes(), {"model": {"arch": "mlp"}})


def test_fine_tune_moves_a_copy(small_graph: Graph, small_model: TrainedModel) -> None:
    before = {k: v.clone() for k, v in small_model.module.state_dict().items()}
    tuned = fine_tune(small_model, small_graph, epochs=5, lr=0.01)
    assert all(torch.equal(v, small_model.module.state_dict()[k]) for k, v in before.items())
    assert any(not torch.allclose(v.double(), tuned.module.state_dict()[k].double()) for k, v in before.items())


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"arch": "mlp"}, "arch"), ({"layers": 0}, "layers"), ({"dropout": 1.0}, "dropout"), ({"hidden": 0}, "hidden")],
)
def test_model_config_errors_quote_the_value(kwargs: dict, match: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(ConfigError, match=match):
        ModelConfig(**kwargs)


def test_train_config_errors() -> None:
    with pytest.raises(ConfigError, match="lr"):
        TrainConfig(lr=0)
    with pytest.raises(ConfigError, match="keep"):
        TrainConfig(keep="best")
    with pytest.raises(ConfigError, match="unknown"):
        TrainConfig.from_dict({"epochz": 3})


@pytest.mark.parametrize(
    ("cls", "data", "match"),
    [
        (TrainConfig, {"epochs": True}, "epochs: expected an integer, got bool"),
        (TrainConfig, {"epochs": 3.0}, "epochs: expected an integer"),
        (TrainConfig, {"lr": "0.1"}, "lr: expected a number, got str"),
        (TrainConfig, {"polish": 1}, "polish: expected true or false"),
        (ModelConfig, {"hidden": False}, "hidden: expected an integer"),
        (ModelConfig, {"arch": 1}, "arch: expected a string"),
    ],
)
def test_from_dict_refuses_booleans_as_numbers_and_strings(cls: type, data: dict, match: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(ConfigError, match=match):
        cls.from_dict(data)


def test_from_dict_takes_integers_for_floats() -> None:
    config = TrainConfig.from_dict({"lr": 1, "weight_decay": 0, "epochs": np.int64(5)})
    assert (config.lr, config.weight_decay, config.epochs) == (1, 0, 5)
