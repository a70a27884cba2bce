"""Deletions and Hessian rows on several threads (:mod:`bind_core.threads`, :mod:`bind_core.influence.threads`): the
same results as one thread, bit for bit, in order, and work that stops when it is told to."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from bind_core.data.datasets import synthetic
from bind_core.debiasing.validation import validate
from bind_core.errors import ConfigError
from bind_core.influence.deep_edges import estimate_edges_deep
from bind_core.influence.estimate import estimate
from bind_core.influence.functional import FunctionalModel
from bind_core.influence.step import Stepper
from bind_core.influence.step_nodes import step_estimate, step_set_estimates
from bind_core.models.gnn import ModelConfig
from bind_core.pipeline.audit import AuditConfig, run_audit
from bind_core.threads import check_threads, each_in_order
from bind_core.training.fit import TrainConfig, train
from bind_core.training.hessian import dense_hessian_by_rows


def _model(arch: str) -> FunctionalModel:
    """A two-layer model whose training nodes' computation graph is a small part of the graph (the first layer's
    rows are then reused, the stepper's most stateful path)."""
    graph = synthetic(3000, avg_degree=3, seed=2, train_per_class=20)
    model = train(graph, TrainConfig(epochs=100, polish=True), ModelConfig(arch=arch, layers=2, hidden=8))
    return FunctionalModel.from_trained(model, graph)


@pytest.mark.parametrize("arch", ["gcn", "sage"])
def test_threaded_deletions_equal_one_thread_bit_for_bit(arch: str, monkeypatch: pytest.MonkeyPatch) -> None:
    fm = _model(arch)
    one = step_estimate(fm, keep_weights=True, batch_bytes=0)
    forks: list[Stepper] = []
    fork = Stepper.fork
    monkeypatch.setattr(Stepper, "fork", lambda self: forks.append(fork(self)) or forks[-1])
    progress: list[float] = []
    threaded = step_estimate(fm, keep_weights=True, batch_bytes=0, threads=3, progress=progress.append)
    assert len(forks) == 2 and all(f.fm.module is not fm.module and f.fm.theta is fm.theta for f in forks)
    assert int(one.taken.max()) >= 2  # some deletions took chord steps, which read the first layer's memory
    for name in ("delta", "taken", "residual", "weights", "first_steps"):
        assert torch.equal(getattr(threaded, name), getattr(one, name)), name
    for name, part in one.parts.items():
        assert torch.equal(threaded.parts[name], part), name
    assert progress == sorted(progress) and progress[-1] == pytest.approx(1.0)  # in order, on this thread


def test_threaded_node_sets_equal_one_thread() -> None:
    fm = _model("gcn")
    sets = [[0, 1], [2], [3, 4, 5], [6], [7, 8]]
    one = step_set_estimates(fm, sets, batch_bytes=0)
    threaded = step_set_estimates(fm, sets, batch_bytes=0, threads=2)
    assert [torch.equal(a.delta, b.delta) and a.taken == b.taken for a, b in zip(one, threaded, strict=True)] == [
        True
    ] * len(sets)


@pytest.mark.parametrize("arch", ["gcn", "sage"])
def test_hessian_rows_on_threads_equal_one_thread(arch: str) -> None:
    fm = _model(arch)
    one = dense_hessian_by_rows(fm.bregman, fm.theta)
    seen: list[float] = []
    threaded = dense_hessian_by_rows(fm.bregman, fm.theta, threads=2, progress=seen.append)
    assert torch.equal(threaded, one)
    assert len(seen) == fm.num_parameters and seen == sorted(seen) and seen[-1] == 1.0


def test_work_runs_at_once_and_comes_back_in_order() -> None:
    """Both threads hold the barrier together (one thread alone would time out), and later units finishing first
    still come back in order."""
    barrier = threading.Barrier(2, timeout=30)
    names: set[str] = set()

    def work(state: str, unit: int) -> tuple[str, int]:
        if unit < 2:
            barrier.wait()
        time.sleep(0.002 * (unit % 3))
        names.add(threading.current_thread().name)
        return state, unit * unit

    got: list[tuple[int, int]] = []
    each_in_order(list(range(12)), work, lambda i, r: got.append((i, r[1])), ["a", "b"], processes=False)
    assert got == [(i, i * i) for i in range(12)]
    assert len(names) == 2


@pytest.mark.parametrize("processes", [False, True])
def test_a_failing_put_stops_the_work(processes: bool, tmp_path: Path) -> None:
    """A cancelled audit's progress callback raises inside ``put``: the units not yet started are dropped (forked
    children are killed; what they started is written to a file, which they share with this process)."""
    log = tmp_path / "started"

    def work(_: None, unit: int) -> int:
        with log.open("a") as f:
            f.write(f"{unit}\n")
        time.sleep(0.01)
        return unit

    class Cancelled(Exception):
        pass

    def put(i: int, _: int) -> None:
        if i == 1:
            raise Cancelled

    with pytest.raises(Cancelled):
        each_in_order(list(range(200)), work, put, [None, None], processes=processes)
    time.sleep(0.05)  # a killed child writes nothing more
    assert 2 <= len(log.read_text().split()) < 20


@pytest.mark.parametrize("processes", [False, True])
def test_a_failing_unit_propagates(processes: bool) -> None:
    def work(_: None, unit: int) -> int:
        if unit == 3:
            raise ValueError("unit 3")
        return unit

    with pytest.raises(ValueError, match="unit 3"):
        each_in_order(list(range(8)), work, lambda i, r: None, [None, None], processes=processes)


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "2"])
def test_bad_thread_counts_are_refused(bad: object) -> None:
    with pytest.raises(ConfigError, match="must be an integer >= 1"):
        check_threads(bad)  # type: ignore[arg-type]


def test_an_audit_refuses_bad_deletion_threads_before_training(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("bind_core.pipeline.audit.training_stage", lambda *a, **k: pytest.fail("trained"))
    with pytest.raises(ConfigError, match="deletion_threads: 0"):
        run_audit(synthetic(60, seed=0), AuditConfig(), deletion_threads=0)


@pytest.mark.heavy  # 22 s here: the extreme edges' settles finish by L-BFGS
def test_threaded_edges_equal_one_thread() -> None:
    """The settled edges (rounds of picks) on two threads: the same values, settled flags and residuals."""
    graph = synthetic(300, seed=3)
    model = train(graph, TrainConfig(epochs=60, polish=True), ModelConfig(arch="gcn", layers=2, hidden=6))
    one = estimate_edges_deep(model, graph, settle=6)
    two = estimate_edges_deep(model, graph, settle=6, threads=2)
    assert int(one.settled.sum()) >= 12
    for name in ("delta", "delta_sp", "delta_eo", "settled"):
        assert torch.equal(getattr(two, name), getattr(one, name)), name


def test_the_audit_builds_one_stepper_for_its_estimate_and_debiasing(monkeypatch: pytest.MonkeyPatch) -> None:
    """The debiasing's node sets are settled with the estimate's own stepper, not a second curvature."""
    built: list[Stepper] = []
    build = Stepper.build.__func__  # type: ignore[attr-defined]

    def counted(cls: type[Stepper], *args: object, **kwargs: object) -> Stepper:
        built.append(build(cls, *args, **kwargs))
        return built[-1]

    monkeypatch.setattr(Stepper, "build", classmethod(counted))
    config = AuditConfig(
        model=ModelConfig(arch="gcn", layers=2, hidden=6),
        training=TrainConfig(epochs=40, polish=True),
        stages=("training", "metrics", "influence", "debiasing"),
        budgets=(2,),
        bootstrap=0,
    )
    result = run_audit(synthetic(120, seed=1), config, deletion_threads=2)
    assert result.debiasing is not None and len(built) == 1


@pytest.mark.heavy  # re-optimises 16 models (5 s here)
@pytest.mark.parametrize(("layers", "mode"), [(2, "proximal"), (1, "reoptimize")])
def test_threaded_validation_equals_one_thread(layers: int, mode: str) -> None:
    """The deterministic ground truths re-optimised on two threads: the same actual values, bit for bit."""
    graph = synthetic(200, seed=3)
    model = train(graph, TrainConfig(epochs=60, polish=True), ModelConfig(arch="gcn", layers=layers, hidden=6))
    result = estimate(model, graph)
    progress: list[float] = []
    one = validate(model, graph, result, sample=8, mode=mode, seed=1)
    two = validate(
        model, graph, result, sample=8, mode=mode, seed=1, threads=2, progress=lambda _, f: progress.append(f)
    )
    assert np.array_equal(two.actual, one.actual, equal_nan=True) and np.array_equal(two.estimated, one.estimated)
    assert progress == [(i + 1) / 8 for i in range(8)]


def test_retraining_from_scratch_stays_on_one_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """Training draws from torch's global generator, so threads would make its ground truth depend on timing."""
    import bind_core.debiasing.validation as validation

    seen: list[int] = []
    each = validation.each_in_order
    monkeypatch.setattr(validation, "each_in_order", lambda u, w, p, s: seen.append(len(s)) or each(u, w, p, s))
    graph = synthetic(120, seed=3)
    model = train(graph, TrainConfig(epochs=20, polish=False), ModelConfig(arch="gcn", layers=1, hidden=6))
    validate(model, graph, estimate(model, graph), sample=2, mode="scratch", threads=2)
    assert seen == [1]


def test_training_with_threads_equals_one_thread() -> None:
    """The polish's Newton finish forms its Hessians' rows on two threads: the same weights, bit for bit."""
    graph = synthetic(300, seed=3)
    config = TrainConfig(
        epochs=30, polish=True, polish_max_iter=5
    )  # L-BFGS stops short, so the Newton finish forms Hessians
    one = train(graph, config, ModelConfig(arch="gcn", layers=2, hidden=6))
    two = train(graph, config, ModelConfig(arch="gcn", layers=2, hidden=6), threads=2)
    assert one.stationarity.newton is not None and one.stationarity.newton.hessians >= 1
    for (name, a), (_, b) in zip(one.module.state_dict().items(), two.module.state_dict().items(), strict=True):
        assert torch.equal(a, b), name


@pytest.mark.parametrize("arch", ["gcn", "sage", "gin"])
def test_adam_epochs_and_lbfgs_stay_on_the_callers_threads(arch: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Adam's epochs and the polish's L-BFGS run on the caller's torch threads whatever ``threads`` is: where the BLAS
    splits a weight gradient's sum over its threads (MKL on an Intel Xeon), more threads gave weights apart by 10⁻⁵
    (bind_core.threads.intra_op_times). On a graph large enough that torch would split its products, the same weights,
    bit for bit."""
    graph = synthetic(5000, avg_degree=10, seed=1, train_per_class=300)
    config = TrainConfig(epochs=40, polish=arch == "gcn", polish_max_iter=30)  # the polish's L-BFGS too
    seen: list[int] = []
    validation_loss = torch.nn.functional.binary_cross_entropy_with_logits
    monkeypatch.setattr(  # the loss is read every epoch: note how many threads torch had then
        torch.nn.functional,
        "binary_cross_entropy_with_logits",
        lambda *a, **k: seen.append(torch.get_num_threads()) or validation_loss(*a, **k),
    )
    before = torch.get_num_threads()
    one = train(graph, config, ModelConfig(arch=arch, layers=2))
    two = train(graph, config, ModelConfig(arch=arch, layers=2), threads=2)
    assert len(seen) >= 4 * config.epochs and set(seen) == {before} == {torch.get_num_threads()}
    for (name, a), (_, b) in zip(one.module.state_dict().items(), two.module.state_dict().items(), strict=True):
        assert torch.equal(a, b), name
