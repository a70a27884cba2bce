"""Refined estimates: each deletion re-optimised with the Hessian at the trained weights frozen.

Where the refinement converges it reaches the stationary point re-optimisation reaches, so on the paper's GCN
(a well-conditioned minimum) it must equal the validation's re-optimised ΔΓ up to the stopping tolerance
(measured: |difference| ≤ 6·10⁻⁷ against changes of 7·10⁻³ to 4·10⁻²; the bound is 10⁻⁵). On a one-layer GIN
the first-order estimate fails on this graph (per-node Pearson 0.15, 0.00, −0.12 for seeds 0, 1, 2) and the
refinement recovers most of it (0.79, 0.73, 0.95), so the check (seed 0) is above 0.6 and a gain of at least
0.3.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch
from scipy.stats import pearsonr

from bind_core.codec import encode
from bind_core.data.graph import Graph
from bind_core.debiasing.records import Validation
from bind_core.debiasing.validation import actual_delta, validate
from bind_core.errors import ConfigError
from bind_core.influence import estimate, refine, refine_deletions
from bind_core.influence import refinement as refinement_module
from bind_core.influence.records import Refinement
from bind_core.models.gnn import ModelConfig
from bind_core.pipeline.audit import AuditConfig, AuditResult, run_audit
from bind_core.pipeline.stages import metrics_stage
from bind_core.training.fit import TrainConfig, TrainedModel, train


@pytest.fixture(scope="module")
def influence(small_model: TrainedModel, small_graph: Graph):  # type: ignore[no-untyped-def]
    return estimate(small_model, small_graph)


def test_converged_refinement_equals_reoptimisation_on_gcn(
    small_model: TrainedModel,
    small_graph: Graph,
    influence,  # type: ignore[no-untyped-def]
) -> None:
    order = torch.argsort(influence.delta)
    positions = [*order[:2].tolist(), *order[-2:].tolist()]
    out, rec = refine(small_model, small_graph, influence, positions=positions, max_iter=2000)
    assert bool(rec.converged.all()), rec.record()
    for i, pos in enumerate(positions):
        sp, eo = actual_delta(small_model, small_graph, [int(small_graph.train_idx[pos])])
        assert abs(float(rec.refined[i, 0]) - sp) < 1e-5 and abs(float(rec.refined[i, 1]) - eo) < 1e-5
        assert float(out.delta[pos]) == pytest.approx(0.5 * sp + 0.5 * eo, abs=1e-5)


def test_refined_result_keeps_the_other_nodes_and_its_parts_add_up(
    small_model: TrainedModel,
    small_graph: Graph,
    influence,  # type: ignore[no-untyped-def]
) -> None:
    out, rec = refine(small_model, small_graph, influence, positions=[3, 7], max_iter=20)
    others = torch.ones(influence.delta.numel(), dtype=torch.bool)
    others[[3, 7]] = False
    assert torch.equal(out.delta[others], influence.delta[others])
    total = sum(out.parts.values())
    assert torch.allclose(total[:, 0], out.delta_sp) and torch.allclose(total[:, 1], out.delta_eo)
    assert torch.allclose(out.delta, 0.5 * out.delta_sp + 0.5 * out.delta_eo)
    assert rec.deletions == [[3], [7]] and "refine" in out.timings
    assert json.dumps(encode(rec.record()))  # JSON-ready
    assert influence.settled is None and out.settled is None  # the linear estimate: nothing to settle
    flags = torch.ones(influence.delta.numel(), dtype=torch.bool)  # as a step estimate's, every node settled
    stepped, rec = refine(small_model, small_graph, replace(influence, settled=flags), positions=[3, 7], max_iter=1)
    assert stepped.settled is not None and torch.equal(stepped.settled[[3, 7]], rec.converged)
    assert not bool(rec.converged.all()) and bool(stepped.settled[others].all())  # one step: not converged


def test_a_node_set_is_refined_as_one_deletion(small_model: TrainedModel, small_graph: Graph) -> None:
    rec = refine_deletions(small_model, small_graph, [[1, 2, 3]], max_iter=2000)
    nodes = small_graph.train_idx[[1, 2, 3]].tolist()
    sp, eo = actual_delta(small_model, small_graph, nodes)
    assert bool(rec.converged[0])
    assert float(rec.refined[0, 0]) == pytest.approx(sp, abs=1e-5)
    assert float(rec.refined[0, 1]) == pytest.approx(eo, abs=1e-5)


def test_refine_rejects_bad_positions_and_large_models(
    small_model: TrainedModel,
    small_graph: Graph,
    influence,  # type: ignore[no-untyped-def]
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    m = small_graph.train_idx.numel()
    with pytest.raises(ConfigError, match="positions"):
        refine(small_model, small_graph, influence, positions=[m])
    monkeypatch.setattr(refinement_module, "NEWTON_MAX_PARAMETERS", 10)
    with pytest.raises(ConfigError, match="dense Hessian"):
        refine(small_model, small_graph, influence, positions=[0])


@pytest.mark.heavy  # 27 s here
def test_refinement_recovers_gin_estimates_where_one_newton_step_fails(small_graph: Graph) -> None:
    model = train(small_graph, TrainConfig(epochs=200, seed=0), ModelConfig(arch="gin"))
    first = estimate(model, small_graph)
    check = validate(model, small_graph, first, protocol="sample", sample=20, seed=1)
    positions = [int((small_graph.train_idx == s[0]).nonzero()) for s in check.sets]
    out, _ = refine(model, small_graph, first, positions=positions)
    before = check.correlations()["gamma"]["pearson"]
    after = float(pearsonr(out.delta[positions].numpy(), check.actual[:, 0])[0])
    assert after > 0.6 and after > before + 0.3, (before, after)


def test_audit_refines_on_request_and_records_it(small_graph: Graph) -> None:
    config = AuditConfig(
        training=TrainConfig(epochs=50, seed=1), budgets=(), validation_sample=0, bootstrap=0, refine_steps=5
    )
    result = run_audit(small_graph, config)
    assert result.refinement is not None and result.refinement.deletions == small_graph.train_idx.numel()
    assert result.refinement.max_iter == 5
    d = result.to_dict()
    assert d["refinement"] == encode(result.refinement) and json.dumps(d)
    assert AuditConfig.from_dict(config.to_dict()) == config
    for bad in (-1, 10_001):
        with pytest.raises(ConfigError, match="refine_steps"):
            AuditConfig(refine_steps=bad)


def test_audit_refusing_a_model_too_large_to_refine_does_so_before_training(small_graph: Graph) -> None:
    config = AuditConfig(model=ModelConfig(hidden=1024), refine_steps=10)  # 1024·(8 + 2) + 1 = 10241 parameters
    seen: list[str] = []
    with pytest.raises(ConfigError, match="dense Hessian"):
        run_audit(small_graph, config, progress=lambda stage, _f: seen.append(stage))
    assert seen == []


def test_low_self_check_names_a_cause_that_fits_the_model(small_model: TrainedModel, small_graph: Graph) -> None:
    # A one-layer GCN: the linear estimate is one exact Newton step of a smooth convex objective, so advice about
    # other architectures (estimator="step", "a one-layer GIN") does not apply; the cause named is in this data.
    metrics = metrics_stage(small_model, small_graph, AuditConfig(bootstrap=0), None)
    result = AuditResult(small_graph, AuditConfig(), small_model, metrics, validation=_check(0.3))
    (warning,) = [w for w in result.warnings() if "self-check" in w]
    assert "0.30" in warning and "GIN" not in warning and 'estimator="step"' not in warning
    test = small_graph.test_idx
    positives = [int(((small_graph.sens[test] == g) & (small_graph.y[test] == 1)).sum()) for g in range(2)]
    if min(positives) < 30:  # the Γ_EO cause, with the group's name and its count
        assert f"has only {min(positives)} positive test nodes" in warning and "lam=1" in warning
    else:
        assert "No cause could be named" in warning
    gin = replace(small_model, model_config=replace(small_model.model_config, arch="gin"))
    (gin_warning,) = [
        w
        for w in AuditResult(small_graph, AuditConfig(), gin, metrics, validation=_check(0.3)).warnings()
        if "self-check" in w
    ]
    assert 'estimator="step"' in gin_warning and "gin, 1 layer(s)" in gin_warning
    once = Refinement(deletions=1)
    refined = AuditResult(small_graph, AuditConfig(), small_model, metrics, validation=_check(0.3), refinement=once)
    assert any("already refined" in w for w in refined.warnings())
    result.validation = _check(0.95)
    assert not [w for w in result.warnings() if "self-check" in w]


def _check(pearson: float) -> Validation:
    """A self-check with this Pearson correlation (its other figures do not matter here)."""
    return Validation(
        protocol="sample",
        mode="reoptimize",
        count=10,
        pearson=pearson,
        spearman=pearson,
        correlations={},
        points=[],
        seconds=1.0,
    )
