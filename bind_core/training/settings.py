"""The training recipe: :class:`TrainConfig`, the settings every training run and retraining reads."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from bind_core.config import DictConfig
from bind_core.errors import ConfigError
from bind_core.models.estimator import polishes_by_default

__all__ = ["MAX_EPOCHS", "OPTIMIZERS", "UNTRAINED", "TrainConfig"]

UNTRAINED = (
    "training.epochs: 0 runs no Adam epoch, so only the polish would train the model, and it does not run for this "
    "model (polish off): the audit would describe untrained weights; give epochs >= 1, or polish on"
)
"""Why ``epochs=0`` without the polish is refused: when the polish is off in the recipe (:class:`TrainConfig`) or,
left open, for the model (:func:`bind_core.training.fit.train`)."""

MAX_EPOCHS = 100_000
"""The most Adam epochs a recipe takes (the service's and the command line's limit alike)."""
OPTIMIZERS = ("adam", "sgd")
"""The optimisers :attr:`TrainConfig.optimizer` names; both add ``weight_decay`` as the coupled L2 term of the
objective (AdamW's decoupled decay is another objective)."""


@dataclass(frozen=True)
class TrainConfig(DictConfig):
    """Optimisation settings (defaults: the paper's: 1000 epochs of Adam, lr 1e-3, weight decay 1e-4).

    Args:
        epochs: Adam epochs (full batch); the weights with the best validation loss are kept. ``0``: no Adam epoch,
            the polish alone trains the model from its seeded initial weights (for a one-layer GCN, whose objective
            is convex, to the same optimum as the paper's epochs); refused where the polish does not run
            (:data:`UNTRAINED`), which would leave the model untrained.
        lr: Adam learning rate.
        weight_decay: L2 coefficient λ; the objective is ``mean(ℓ_train) + (λ/2)·‖θ‖²``.
        seed: seeds weight initialisation and dropout (deterministic on the CPU).
        polish: finish with float64 L-BFGS (then Newton) at a stationary point of the training objective, where the
            paper's influence function answers "retrain without v". ``None`` (default): where the audit's estimate
            is that one (:func:`bind_core.models.estimator.polishes_by_default`: one-layer GCN, GIN and SAGE by
            default), not where it is the step estimate, which is defined at any weights (deeper models and GAT are
            then audited as Adam leaves them, as a user trains them). :meth:`polishes` resolves it; a trained
            model's ``train_config`` holds what was done.
        polish_max_iter: L-BFGS iteration cap.
        polish_tol: stop when the largest gradient entry is below this.
        newton_seconds: the time the polish's Newton finish may take (:func:`polish`); a model left short of a
            stationary point is audited as it is (its gradient is reported under ``stationarity``).
        keep: ``"best_val"`` keeps the Adam weights with the lowest validation loss (the paper's rule);
            ``"last"`` keeps the final epoch's (what the reference code ends up using). With ``polish`` the
            L-BFGS polish then moves either to a stationary point of the training objective.
        batch_size: ``0`` (default): full-batch epochs. ``b > 0``: each epoch takes an Adam step per batch of
            ``b`` shuffled training nodes on the batch's neighbour-sampled computation graph
            (:mod:`bind_core.training.minibatch`; GCN, GIN and SAGE). The validation loss stays exact, and the
            polish is the same full-batch one, so the audited weights are a stationary point of the full objective.
        fan_out: with ``batch_size``: neighbours sampled per hop, one entry per layer, the batch's own neighbours
            first (the last layer's, as PyG's ``num_neighbors``); ``-1`` takes every neighbour, and an empty tuple
            (default) every neighbour at every hop. A first layer (last entry) of ``-1`` reads the graph's
            aggregated features, exactly, without expanding that hop (:mod:`bind_core.training.sampling`).
        optimizer: ``"adam"`` (default; ``weight_decay`` as Adam's coupled L2 term, i.e. the objective above) or
            ``"sgd"`` (with ``momentum``): how the epochs step. A supplied model's recipe, which the audit's debiasing
            retrains with.
        momentum: SGD's momentum (``optimizer="sgd"`` only).
        patience: early stopping: ``0`` (default) runs every epoch; ``k > 0`` stops once the validation loss has not
            improved for ``k`` epochs (the best epoch's weights are kept, as with ``keep="best_val"``).
    """

    section: ClassVar[str] = "training"

    epochs: int = 1000
    lr: float = 1e-3
    weight_decay: float = 1e-4
    seed: int = 10
    polish: bool | None = None
    polish_max_iter: int = 1000
    polish_tol: float = 1e-7
    keep: str = "best_val"
    newton_seconds: float = 900.0
    batch_size: int = 0
    fan_out: tuple[int, ...] = ()
    optimizer: str = "adam"
    momentum: float = 0.0
    patience: int = 0

    def __post_init__(self) -> None:
        _check_fan_out(self)
        if self.optimizer not in OPTIMIZERS:
            raise ConfigError(f"optimizer: {self.optimizer!r} is not one of {', '.join(OPTIMIZERS)}")
        if not 0 <= self.momentum < 1 or (self.momentum and self.optimizer != "sgd"):
            raise ConfigError(f"momentum: {self.momentum!r} must be in [0, 1), and is for optimizer sgd only")
        if isinstance(self.patience, bool) or not 0 <= self.patience <= 1_000_000:
            raise ConfigError(f"patience: {self.patience!r} must be 0 (no early stopping) or a number of epochs")
        if not 0 <= self.epochs <= MAX_EPOCHS:
            raise ConfigError(f"epochs: {self.epochs!r} must be between 0 (the polish alone) and {MAX_EPOCHS}")
        if self.epochs == 0 and self.polish is False:
            raise ConfigError(UNTRAINED)
        if not 0 < self.lr <= 10:
            raise ConfigError(f"lr: {self.lr!r} must be in (0, 10]")
        if not 0 <= self.weight_decay <= 10:
            raise ConfigError(f"weight_decay: {self.weight_decay!r} must be in [0, 10]")
        if self.polish_max_iter < 0 or self.polish_tol <= 0:
            raise ConfigError("polish_max_iter must be >= 0 and polish_tol > 0")
        if not 0 < self.newton_seconds <= 86_400:
            raise ConfigError(f"newton_seconds: {self.newton_seconds!r} must be in (0, 86400]")
        if self.keep not in ("best_val", "last"):
            raise ConfigError(f"keep: {self.keep!r} is not one of best_val, last")
        if isinstance(self.batch_size, bool) or not 0 <= self.batch_size <= 100_000_000:
            raise ConfigError(f"batch_size: {self.batch_size!r} must be between 0 (full batch) and 100000000")

    def polishes(
        self, *, estimator: str = "auto", row_separable: bool, num_parameters: int, stationary_point: bool = True
    ) -> bool:
        """Whether training with this recipe ends with the polish: :attr:`polish` when set, else by the estimate the
        audit runs (:func:`~bind_core.models.estimator.polishes_by_default`), never where the objective has no
        stationary point.

        Args:
            estimator: the audit's ``"auto"``, ``"linear"`` or ``"step"``.
            row_separable: whether the model is a one-layer GCN, GIN or SAGE.
            num_parameters: the model's number of weights.
            stationary_point: whether the model's objective may have one
                (:attr:`~bind_core.models.gnn.ModelConfig.stationary_point`).

        Returns:
            Whether the polish runs.
        """
        if self.polish is not None:
            return self.polish
        if not stationary_point:
            return False
        return polishes_by_default(estimator=estimator, row_separable=row_separable, num_parameters=num_parameters)


def _check_fan_out(config: TrainConfig) -> None:
    """Store ``fan_out`` as a tuple of ints (JSON gives a list; ``None`` means ``-1``) and check its entries."""
    raw: object = config.fan_out
    if not isinstance(raw, list | tuple):
        raise ConfigError(f"fan_out: expected a list of integers, got {type(raw).__name__} {raw!r}")
    values = tuple(-1 if f is None else f for f in raw)
    if any(isinstance(f, bool) or not isinstance(f, int) or (f < 1 and f != -1) for f in values):
        raise ConfigError(f"fan_out: {list(raw)!r} entries must be positive integers or -1 (every neighbour)")
    object.__setattr__(config, "fan_out", values)
