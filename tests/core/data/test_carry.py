"""A supplied model on another version of its graph: columns matched by name, features put on the registration's
scale, and every difference it cannot carry refused by name (:func:`bind_core.data.carry.carry_inputs`)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from bind_core import AuditConfig, Graph, ModelDoesNotFitError, TrainConfig, TrainedModel, run_audit, synthetic, train
from bind_core.data.carry import InputSchema, carry_inputs
from bind_core.data.datasets.scaling import column_ranges, minmax_scale, scale_by
from bind_core.pipeline.output_order import supplied_model_doubt, supplied_model_warnings
from bind_core.pipeline.results import SuppliedModel
from bind_core.training.fit_check import TrainingFit


def _version(
    raw: np.ndarray,
    *,
    scaled: bool,
    names: tuple[str, ...] = ("age", "score", "tenure"),
    label: str = "approved",
    classes: tuple[str, ...] = ("no", "yes"),
) -> Graph:
    """A ring of ``len(raw)`` nodes with ``raw``'s columns as features (min-max scaled by its own ranges, as an
    upload with scale on does, where ``scaled``)."""
    n = raw.shape[0]
    lo, hi = column_ranges(raw)
    edges = np.stack([np.arange(n), (np.arange(n) + 1) % n])
    y, sens = (np.arange(n) // 4) % 2, (np.arange(n) // 8) % 2
    idx = np.arange(n)
    return Graph.build(
        minmax_scale(raw) if scaled else raw,
        edges,
        y,
        sens,
        idx[idx % 4 < 2],
        idx[idx % 4 == 2],
        idx[idx % 4 == 3],
        feature_ranges=list(zip(lo, hi, strict=True)) if scaled else (),
        feature_names=names,
        label_name=label,
        class_names=classes,
    )


def _raw(n: int, seed: int, shift: float = 0.0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.column_stack([rng.uniform(18, 80, n) + shift, rng.normal(0, 3, n), rng.integers(0, 30, n)])


def test_the_same_inputs_are_carried_unchanged() -> None:
    graph = _version(_raw(24, 1), scaled=False)
    carried, record = carry_inputs(graph, InputSchema.of(graph))
    assert carried is graph
    assert (record.columns_named, record.columns_reordered, record.rescaled) == (True, False, False)
    assert "would move the model if it were refit on this version" in record.text


def test_a_later_version_is_scaled_by_the_registrations_ranges() -> None:
    """Each upload scales by its own minima and maxima: the same raw value reads differently in two versions. The
    carried version holds the raw values scaled by the registration's ranges, outside [-1, 1] where they go beyond."""
    first, later = _raw(24, 1), _raw(30, 2, shift=15.0)
    registered = _version(first, scaled=True)
    carried, record = carry_inputs(_version(later, scaled=True), InputSchema.of(registered))
    lo, hi = column_ranges(first)
    expected = 2.0 * (later - lo) / (hi - lo) - 1.0
    assert torch.allclose(carried.x.double(), torch.from_numpy(expected), atol=1e-5)
    assert float(carried.x.max()) > 1.0  # older customers than any the model was registered with
    assert carried.feature_ranges == registered.feature_ranges
    assert (record.rescaled, record.scaled_as_registered, record.columns_reordered) == (True, True, False)
    assert "scaled by the registration's minima and maxima" in record.text


def test_unscaled_and_scaled_versions_meet_on_the_registrations_scale() -> None:
    raw = _raw(24, 3)
    plain, scaled = _version(raw, scaled=False), _version(raw, scaled=True)
    unscaled, record = carry_inputs(scaled, InputSchema.of(plain))  # registered on the values as given
    assert torch.allclose(unscaled.x, plain.x, atol=1e-4) and unscaled.feature_ranges == ()
    assert record.rescaled and not record.scaled_as_registered and "unscaled" in record.text
    rescaled, _ = carry_inputs(plain, InputSchema.of(scaled))
    assert torch.allclose(rescaled.x, scaled.x, atol=1e-6) and rescaled.feature_ranges == scaled.feature_ranges


def test_a_constant_column_reads_as_the_registration_read_it() -> None:
    first, later = _raw(24, 4), _raw(24, 5)
    first[:, 2], later[:, 2] = 7.0, 9.0  # constant in both versions: minmax_scale maps it to 0
    carried, _ = carry_inputs(_version(later, scaled=True), InputSchema.of(_version(first, scaled=True)))
    assert torch.equal(carried.x[:, 2], torch.zeros(24))
    plain, _ = carry_inputs(_version(later, scaled=True), InputSchema.of(_version(first, scaled=False)))
    assert torch.equal(plain.x[:, 2], torch.full((24,), 9.0))  # the raw value, recovered from its zero-width range


def test_columns_in_another_order_are_put_in_the_registrations() -> None:
    raw = _raw(24, 6)
    registered = _version(raw, scaled=True)
    shuffled = _version(raw[:, [2, 0, 1]], scaled=True, names=("tenure", "age", "score"))
    carried, record = carry_inputs(shuffled, InputSchema.of(registered))
    assert carried.feature_names == registered.feature_names
    assert torch.allclose(carried.x, registered.x, atol=1e-6)
    assert record.columns_reordered and not record.rescaled  # the same raw values, hence the same ranges
    assert "put in the order the model was registered with" in record.text


def test_columns_it_cannot_match_are_refused_by_name() -> None:
    raw = _raw(24, 7)
    registered = InputSchema.of(_version(raw, scaled=False))
    renamed = _version(raw, scaled=False, names=("age", "score", "months"))
    with pytest.raises(ModelDoesNotFitError) as refused:
        carry_inputs(renamed, registered)
    assert dict(refused.value.problems).keys() == {"feature_names"}
    assert "'tenure'" in str(refused.value) and "'months'" in str(refused.value)
    unnamed = InputSchema(features=3, label="approved", class_names=("no", "yes"))  # columns matched by count alone
    carried, record = carry_inputs(_version(raw, scaled=False), unnamed)
    assert not record.columns_named and carried.num_features == 3
    with pytest.raises(ModelDoesNotFitError, match="registered for 4 feature columns; this version has 3"):
        carry_inputs(_version(raw, scaled=False), InputSchema(4, label="approved", class_names=("no", "yes")))


def test_another_label_or_other_classes_are_refused() -> None:
    raw = _raw(24, 8)
    registered = InputSchema.of(_version(raw, scaled=False))
    with pytest.raises(ModelDoesNotFitError) as refused:
        carry_inputs(_version(raw, scaled=False, label="income", classes=("<=50K", ">50K")), registered)
    problems = dict(refused.value.problems)
    assert problems.keys() == {"label", "classes"}
    assert "'approved'" in problems["label"] and "'no', 'yes'" in problems["classes"]


def test_a_carried_model_that_fits_no_better_than_a_constant_is_told_the_version_may_differ() -> None:
    """On a later version, with its inputs carried over, a poor fit has another likely cause than wrong inputs: the
    version's data differ from those the model fit. The warning and the withheld verdict say both."""
    graph = _version(_raw(24, 9), scaled=False)
    _, carried = carry_inputs(graph, InputSchema.of(graph))
    fit = TrainingFit(loss=1.2, constant=0.69, accuracy=0.4, majority=0.55, nodes=12, no_better=True, text="fits badly")
    on_its_own = SuppliedModel(polished_by_service=False, training_fit=fit)
    on_a_later_version = SuppliedModel(polished_by_service=False, training_fit=fit, carried=carried)
    assert supplied_model_warnings(on_its_own) == ["fits badly"]
    (warned,) = supplied_model_warnings(on_a_later_version)
    assert warned.startswith("fits badly. This version's inputs were carried over") and "no longer fits" in warned
    assert "most likely fed other inputs" in str(supplied_model_doubt(on_its_own))
    assert "this version of its graph differs from the data it fit" in str(supplied_model_doubt(on_a_later_version))


def test_a_category_no_node_of_the_version_has_is_a_column_of_zeros() -> None:
    """One-hot columns (``column=value``): a category absent from this week's snapshot reads as the registration's
    encoding reads it (zeros, then scaled by the registration's range), a category the model never saw is refused."""
    rng = np.random.default_rng(11)
    names = ("age", "region=east", "region=north", "region=south")
    region = rng.integers(0, 3, 24)
    first = np.column_stack([rng.uniform(18, 80, 24), *(region == k for k in range(3))]).astype(float)
    later = first[:, [0, 2, 3]].copy()  # nobody from the east this week: the upload has no region=east column
    later[:, 1:] = np.eye(2)[np.arange(24) % 2]
    schema = InputSchema.of(_version(first, scaled=True, names=names))
    carried, record = carry_inputs(_version(later, scaled=True, names=("age", "region=north", "region=south")), schema)
    assert record.filled == ["region=east"] and not record.columns_reordered and record.rescaled
    assert carried.feature_names == names
    assert torch.equal(carried.x[:, 1], torch.full((24,), -1.0))  # raw 0 on the registration's [0, 1] range
    assert torch.equal(carried.x[:, 2:], torch.from_numpy(2 * later[:, 1:] - 1).float())
    assert "'region=east', given as zero columns" in record.text
    unscaled, _ = carry_inputs(
        _version(later, scaled=False, names=("age", "region=north", "region=south")),
        InputSchema.of(_version(first, scaled=False, names=names)),
    )
    assert torch.equal(unscaled.x[:, 1], torch.zeros(24)) and torch.equal(
        unscaled.x[:, 0], torch.tensor(later[:, 0]).float()
    )
    west = _version(np.column_stack([later, np.zeros(24)]), scaled=False, names=(*names[:1], *names[2:], "region=west"))
    with pytest.raises(ModelDoesNotFitError, match="not registered with: 'region=west'"):
        carry_inputs(west, InputSchema.of(_version(first, scaled=False, names=names)))


def test_a_category_the_model_never_saw_is_read_as_none_of_its_own_when_the_registration_ignores_them() -> None:
    """``unknown_categories="ignore"``: this week's ``region=west`` column is left out, its nodes read as none of the
    model's regions (zeros, then scaled by the registration's range), as a deployed encoder set to ignore unknown
    values gives them; the other nodes are carried as before. Without it the column is refused with the way out."""
    rng = np.random.default_rng(12)
    names = ("age", "region=east", "region=north")
    region = rng.integers(0, 2, 30)
    first = np.column_stack([rng.uniform(18, 80, 30), region == 0, region == 1]).astype(float)
    west = np.arange(30) % 5 == 0  # six new clients from the west
    later = np.column_stack([first[:, :1], (region == 0) & ~west, west, (region == 1) & ~west]).astype(float)
    week = ("age", "region=east", "region=west", "region=north")
    for scaled in (False, True):
        registration = _version(first, scaled=scaled, names=names)
        version = _version(later, scaled=scaled, names=week)
        with pytest.raises(ModelDoesNotFitError, match="register the model with unknown_categories 'ignore'"):
            carry_inputs(version, InputSchema.of(registration))
        carried, record = carry_inputs(version, InputSchema.of(registration, unknown_categories="ignore"))
        assert (record.ignored, record.ignored_nodes, record.filled) == (["region=west"], 6, None)
        assert carried.feature_names == names
        expected = later[:, [0, 1, 3]]
        if scaled:
            expected = scale_by(expected, *column_ranges(first))
        assert torch.allclose(carried.x.double(), torch.from_numpy(expected), atol=1e-6)
        assert not carried.x[west][:, 1:].gt(-1.0 if scaled else 0.0).any()  # none of the model's regions
        assert "'region=west', left out as its registration asks (6 nodes of them" in record.text
        (warned,) = supplied_model_warnings(SuppliedModel(polished_by_service=False, carried=record))
        assert warned.code == "unseen_categories" and warned.startswith("6 nodes of this version have a category")
        fit = TrainingFit(loss=1.2, constant=0.69, accuracy=0.5, majority=0.55, nodes=15, no_better=True, text="bad")
        misfit = SuppliedModel(polished_by_service=False, training_fit=fit, carried=record)
        poor, unseen = supplied_model_warnings(misfit)  # a poor fit names the unseen category among its causes
        assert (poor.code, unseen.code) == ("training_fit", "unseen_categories")
        assert "Among the differences: 6 nodes have a category it never saw ('region=west')" in poor
        assert "(among them nodes of a category it never saw" in str(supplied_model_doubt(misfit))
    other = _version(np.column_stack([later, np.ones(30)]), scaled=False, names=(*week, "tenure"))
    with pytest.raises(ModelDoesNotFitError, match="not registered with: 'tenure'") as refused:
        carry_inputs(other, InputSchema.of(_version(first, scaled=False, names=names), unknown_categories="ignore"))
    assert "unknown_categories" not in str(refused.value)  # a column that is no category is never ignored
    with pytest.raises(ValueError, match="'refuse' or 'ignore'"):
        InputSchema.of(_version(first, scaled=False, names=names), unknown_categories="skip")  # type: ignore[arg-type]


def test_the_library_records_what_was_carried_as_the_service_does() -> None:
    """``run_audit(model=..., carried=...)``: a library user's audit of a supplied model on a later version records
    what was carried and says what the attribution then means, as the service's audits do."""
    first = synthetic(300, seed=2)
    model = train(first, TrainConfig(epochs=200))
    supplied = TrainedModel.from_bytes(model.to_bytes(), model.config_dict())
    order = list(reversed(range(first.num_features)))
    later = dataclasses.replace(first, x=first.x[:, order], feature_names=tuple(first.feature_names[j] for j in order))
    carried, record = carry_inputs(later, InputSchema.of(first))
    config = AuditConfig(stages=("training", "metrics", "influence"), bootstrap=0)
    typed = run_audit(carried, config, model=supplied, carried=record).typed()
    assert typed.supplied_model is not None and typed.supplied_model.carried == record
    assert typed.supplied_model.carried.columns_reordered
    assert typed.summary is not None and typed.summary.attribution is not None
    assert "refit on this version" in typed.summary.attribution.text
    plain = run_audit(first, config, model=supplied).typed()  # on its own graph: nothing carried, nothing said
    assert plain.supplied_model is not None and plain.supplied_model.carried is None
    assert plain.summary is not None and plain.summary.attribution is not None
    assert "refit on this version" not in plain.summary.attribution.text
    assert torch.equal(carried.x, first.x)  # the columns put back in the model's order
