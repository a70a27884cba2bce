"""The trained model's records, typed: the training run, the polish and its Newton finish, the stationarity check
(with the kink check), the Hessian's spectrum and the model's configuration. Training fills them
(:class:`bind_core.training.fit.TrainedModel` ``history`` and ``stationarity``); the audit results collect them
(:mod:`bind_core.pipeline.results`); :func:`bind_core.codec.encode`/:func:`~bind_core.codec.decode` turn them into
JSON and back at the edges (the results, a saved model's ``config.json``)."""

# ruff: noqa: RUF009  (key() and open_keys() return dataclasses.field(...): fields with metadata, not shared defaults)
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bind_core.codec import key, open_keys


@dataclass(kw_only=True)
class NewtonRecord:
    """What the polish's Newton finish did (:func:`bind_core.training.newton.newton_finish`; a message-passing model's
    frozen-Hessian rounds, :func:`bind_core.training.objective.message_passing_finish`, sum their counts)."""

    iterations: int = key("integer: Newton steps tried")
    hessians: int = key("integer: Hessians formed")
    accepted: int = key("integer: steps accepted")
    converged: bool = key("boolean: whether the largest gradient entry reached the tolerance")
    reason: str = key("string: why it stopped: converged, max_iter, max_seconds or radius")
    max_abs_grad: float = key("number: the largest gradient entry at the end")
    grad_norm: float = key("number: the gradient norm at the end")
    negative_eigenvalues: int = key("integer: negative eigenvalues of the last Hessian")
    min_eigenvalue: float = key("number: the last Hessian's smallest eigenvalue (null when none was read)")
    seconds: float = key("number: seconds it took")
    rounds: int | None = key("integer: frozen-Hessian rounds (message-passing models)", optional=True)
    extra: dict[str, Any] = open_keys("other figures (a model stored by another version)")


@dataclass(kw_only=True)
class KinkStall:
    """Whether weights of a model with kinks are a minimum on them (:func:`bind_core.training.kinks.kink_stall`)."""

    no_descent: bool = key("boolean: a restarted L-BFGS lowered the objective by no more than round-off")
    objective_decrease: float = key("number: by how much it lowered it")
    pinned: int = key("integer: hidden pre-activations pinned at the kink")


@dataclass(kw_only=True)
class StationarityCheck:
    """How stationary the audited weights are (:func:`bind_core.training.stationarity.describe_stationarity`)."""

    max_abs_grad: float = key("number: the largest gradient entry of the training objective")
    grad_norm: float = key("number: its gradient norm")
    tolerance: float = key("number: the check's tolerance")
    stationary: bool | str = key('boolean, or "kinks": a minimum on the kinks (see ``kinks``)')
    kinks: KinkStall | None = key("the kink check's record, when it found a minimum on the kinks", optional=True)


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
    adam_grad_norm: float | None = key("number: the gradient norm after the epochs, before the polish", optional=True)
    iterations: int | None = key("integer: the polish's L-BFGS iterations", optional=True)
    seconds: float | None = key("number: seconds the polish took", optional=True)
    newton: NewtonRecord | None = key("the polish's Newton finish, where it ran", optional=True)
    extra: dict[str, Any] = open_keys("other figures (the kink check's record under ``kinks``)")


@dataclass(kw_only=True)
class TrainingHistory:
    """The training run (:class:`bind_core.training.fit.TrainedModel` ``history``)."""

    epochs: int | None = key("integer: Adam epochs run", optional=True)
    best_epoch: int | None = key("integer: the epoch of the kept weights", optional=True)
    best_val_loss: float | None = key("number: their validation loss", optional=True)
    seconds: float | None = key("number: seconds training took", optional=True)
    batch_size: int | None = key("integer: training nodes per mini-batch (mini-batch training)", optional=True)
    fan_out: list[int] | None = key("list of integers: neighbours sampled per hop (-1: all)", optional=True)
    batches: int | None = key("integer: mini-batches per epoch", optional=True)
    validation_nodes: int | None = key("integer: validation nodes the epochs' loss reads", optional=True)
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
