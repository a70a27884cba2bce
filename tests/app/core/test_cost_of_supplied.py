"""A supplied model's audit is quoted without training: the quote must not build a training recipe the settings
refuse (``epochs=0`` without the polish, refused since it would leave a model untrained), which made every audit of
an uploaded model a 422."""

from __future__ import annotations

from app.audits.budget import cost_of
from bind_core.data.datasets import synthetic
from bind_core.models.gnn import ModelConfig
from bind_core.pipeline.audit import AuditConfig
from bind_core.training.fit import TrainConfig


def test_a_supplied_models_quote_counts_no_training() -> None:
    summary = synthetic(200, seed=1).summary()
    supplied = {"model": ModelConfig(layers=2).to_dict()}
    config = AuditConfig(model=ModelConfig(layers=2), training=TrainConfig(epochs=300, polish=True))
    quoted = cost_of(config, summary, supplied)
    assert quoted.work["training"] == 0.0 and quoted.memory_bytes["polish"] == 0
    trains = cost_of(config, summary)
    assert trains.work["training"] > 0.0
    assert quoted.work_flops < trains.work_flops
