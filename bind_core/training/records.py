"""The trained model's parts of the audit results, typed: its stationarity and the Hessian's spectrum, the training
run and the model's configuration (collected in :mod:`bind_core.pipeline.results`)."""

# ruff: noqa: RUF009  (key() and open_keys() return dataclasses.field(...): fields with metadata, not shared defaults)
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bind_core.codec import key, open_keys


@dataclass(kw_only=True)
class Spectrum:
    """The Hessian's spectrum at the weights (from the influence estimate's solve)."""

    max_eigenvalue: float | None = key("number: largest eigenvalue", optional=True)
    min_eigenvalue: float | None = key("number: smallest eigenvalue", optional=True)
    below_weight_decay: int | None = key("integer: eigenvalues below the weight decay", optional=True)
    dropped_eigenvalues: int | None = key("integer: eigenvalues dropped by the solver", optional=True)
    damping: float | None = key("number: damping added", optional=True)


@dataclass(kw_only=True)
class Stationarity:
    """The polish's record and the audit's stationarity check."""

    stationary: bool | str | None = key(
        'boolean: the weights pass the check before influence, or the string "kinks": a model with kinks accepted '
        "as a minimum on them (see ``kinks``)",
        optional=True,
    )
    grad_norm: float | None = key("number: gradient norm of the training objective", optional=True)
    max_abs_grad: float | None = key("number: its largest entry", optional=True)
    tolerance: float | None = key("number: the check's tolerance", optional=True)
    polished: bool | None = key("boolean: whether the L-BFGS/Newton polish ran", optional=True)
    converged: bool | None = key("boolean: whether the polish converged", optional=True)
    spectrum: Spectrum | None = key("the Hessian's spectrum; null when the solver reports none", optional=True)
    extra: dict[str, Any] = open_keys("the polish's other figures (iterations, seconds, Newton steps...)")


@dataclass(kw_only=True)
class TrainingHistory:
    """The training run (:class:`bind_core.training.fit.TrainedModel` ``history``)."""

    epochs: int | None = key("integer: Adam epochs run", optional=True)
    best_epoch: int | None = key("integer: the epoch of the kept weights", optional=True)
    best_val_loss: float | None = key("number: their validation loss", optional=True)
    seconds: float | None = key("number: seconds training took", optional=True)
    extra: dict[str, Any] = open_keys("other figures of the run")


@dataclass(kw_only=True)
class ModelSummary:
    """The model audited: its parameter count and :class:`bind_core.models.gnn.ModelConfig`."""

    parameters: int = key("integer: trainable parameters")
    arch: str | None = key("string: gcn, gin, sage or gat", optional=True)
    layers: int | None = key("integer: message-passing layers", optional=True)
    hidden: int | None = key("integer: hidden width", optional=True)
    dropout: float | None = key("number: dropout during training", optional=True)
    heads: int | None = key("integer: attention heads (GAT)", optional=True)
    activation: str | None = key("string: the nonlinearity between layers", optional=True)
    extra: dict[str, Any] = open_keys("the model configuration's other settings")
