"""Training a GNN node classifier (full-batch or mini-batch Adam, then the stationary-point polish of
:mod:`bind_core.training.polish`) and the trained model's (de)serialisation.

``train`` runs Adam on the mean cross-entropy of the training nodes (weight decay as in Adam, i.e. an L2 term
``(λ/2)·‖θ‖²`` in the objective) and keeps the weights with the best validation loss, as the paper does.
Influence functions need a stationary point of the training objective, which 1000 Adam epochs do not reach, so
by default the result is then *polished*: full-batch L-BFGS in float64 on the same objective without dropout,
warm-started from the Adam weights, until the gradient norm is ~1e-7; where L-BFGS stops short (a one-layer GIN
on a graph with a high-degree hub), a trust-region Newton finish with the exact Hessian completes it
(:mod:`bind_core.training.hessian`). The polished weights are the model that is audited; both gradient norms are
reported in ``TrainedModel.stationarity``.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

import torch
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save
from torch import Tensor

from bind_core.codec import encode
from bind_core.data.graph import ArrayLike, Graph, row_numbers
from bind_core.errors import ConfigError
from bind_core.models.gnn import GNN, ModelConfig, node_losses, probabilities, require_finite
from bind_core.models.propagation import GraphInputs
from bind_core.models.pyg_names import bind_state_dict, heads_problem, pyg_state_dict, weights_problem
from bind_core.models.records import PygModel
from bind_core.training.compgraph import objective_inputs
from bind_core.training.document import ModelDocument, read_document
from bind_core.training.minibatch import MiniBatchEpochs
from bind_core.training.objective import (
    training_objective,
)
from bind_core.training.polish import gradient_norm, polish
from bind_core.training.records import Stationarity, TrainingHistory
from bind_core.training.settings import UNTRAINED, TrainConfig

__all__ = ["ProgressCallback", "TrainConfig", "TrainedModel", "fine_tune", "train", "training_objective"]

ProgressCallback = Callable[[str, float], None]
"""``progress(stage, fraction_done)``; it may raise to abort the work."""


@dataclass(frozen=True)
class SuppliedForm:
    """How a model read from a supplied config (:meth:`TrainedModel.from_bytes`) was described: what an audit of it
    checks and records (:func:`~bind_core.training.supplied.prepare_model`)."""

    source: PygModel | None = None
    """A ``torch_geometric.nn.models`` model's description (its reproduction is checked), else ``None``."""
    classes: tuple[str, ...] | None = None
    """The label value each output stands for, output 0 first, as the config gave them; ``None``: not given."""
    names: tuple[str, ...] = ()
    """The weights' parameter names as supplied."""
    record: dict[str, Any] | None = None
    """Once prepared for an audit: what was done to it (the audit's ``supplied_model``); ``None`` before."""


@dataclass
class TrainedModel:
    """A trained GNN with its settings, training history and stationarity report.

    Attributes:
        module: the network (:class:`~bind_core.models.gnn.GNN`), in the dtype and on the device it computes in.
        model_config: its architecture.
        train_config: the recipe it was trained with (a supplied model's: its config's training section).
        history: the training run (epochs, best epoch and validation loss, seconds).
        stationarity: the polish's record (gradient norms, whether it converged).
        supplied: for a model read from a supplied config (:meth:`from_bytes`), how it was described; ``None`` for
            one trained here.
    """

    module: GNN
    model_config: ModelConfig
    train_config: TrainConfig
    history: TrainingHistory = field(default_factory=TrainingHistory)
    stationarity: Stationarity = field(default_factory=Stationarity)
    supplied: SuppliedForm | None = field(default=None, repr=False, compare=False)

    @property
    def dtype(self) -> torch.dtype:
        return next(self.module.parameters()).dtype

    @property
    def device(self) -> torch.device:
        return next(self.module.parameters()).device

    @property
    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.module.parameters())

    def prepare(self, graph: Graph) -> GraphInputs:
        """The graph as this model's inputs (features and propagation), in its dtype and on its device.

        Args:
            graph: the graph to run the model on.

        Returns:
            The :class:`~bind_core.models.gnn.GraphInputs` its forward pass takes.
        """
        return self.module.prepare(graph, self.dtype, self.device)

    @torch.no_grad()
    def logits(self, graph: Graph, rows: ArrayLike | None = None) -> Tensor:
        """The model's raw outputs in evaluation mode, without gradients.

        Args:
            graph: the graph to run the model on.
            rows: row numbers (0-based node indices into ``graph``) to return, as a tensor, an array or a list
                (default: every node); :meth:`Graph.rows_of <bind_core.data.graph.Graph.rows_of>` turns the user's
                ids into them.

        Returns:
            ``[n, K]`` (or ``[len(rows), K]``) logits, ``K`` = 1 for two classes, else the number of classes.

        Raises:
            GraphValidationError: ``rows`` is not a tensor and holds text (the user's ids) or an out-of-range row.
        """
        self.module.eval()
        if rows is not None and not isinstance(rows, Tensor):
            rows = row_numbers(graph, rows)
        return cast(Tensor, self.module(self.prepare(graph), None if rows is None else rows.to(self.device)))

    def predict_proba(self, graph: Graph, rows: ArrayLike | None = None) -> Tensor:
        """Class probabilities in evaluation mode, on the CPU.

        Args:
            graph: the graph to run the model on.
            rows: row numbers (0-based node indices into ``graph``) to return, as a tensor, an array or a list
                (default: every node); :meth:`Graph.rows_of <bind_core.data.graph.Graph.rows_of>` turns the user's
                ids into them.

        Returns:
            ``[n, C]`` (or ``[len(rows), C]``) probabilities, each row summing to 1.

        Raises:
            NonFiniteError: some probability is NaN or inf (weights or activations that overflow), which
                would otherwise become a class-0 prediction.
            GraphValidationError: ``rows`` is not a tensor and holds text (the user's ids) or an out-of-range row.
        """
        proba = probabilities(self.logits(graph, rows)).cpu()
        require_finite(proba, "the model's predicted probabilities")
        return proba

    def objective(self, graph: Graph) -> float:
        """The training objective at the current weights (no dropout).

        Args:
            graph: the graph whose training nodes the objective averages over.

        Returns:
            ``mean(ℓ_train) + (λ/2)·‖θ‖²`` with λ the recipe's weight decay.
        """
        with torch.no_grad():
            return float(training_objective(self.module, self.prepare(graph), graph, self.train_config.weight_decay))

    # ------------------------------------------------------------------ serialisation (no pickle)
    def document(self) -> ModelDocument:
        """The model's description, typed (what :meth:`config_dict` encodes).

        Returns:
            The :class:`~bind_core.training.document.ModelDocument`: architecture, recipe, dimensions, ``dtype``,
            ``history`` and ``stationarity``.
        """
        return ModelDocument(
            model=self.model_config,
            training=self.train_config,
            in_dim=self.module.in_dim,
            num_classes=self.module.num_classes,
            dtype=str(self.dtype).removeprefix("torch."),
            history=self.history,
            stationarity=self.stationarity,
        )

    def config_dict(self) -> dict[str, Any]:
        """The model's JSON description, to save beside :meth:`to_bytes`'s weights.

        Returns:
            :meth:`document` encoded: ``format`` (``bind-audit/model@1``), ``model``, ``training``, ``in_dim``,
            ``num_classes``, ``dtype``, ``history`` and ``stationarity``.
        """
        return encode(self.document())

    def to_bytes(self) -> bytes:
        """The weights as safetensors (no pickle).

        Returns:
            The safetensors file's bytes; pair them with :meth:`config_dict`.
        """
        return st_save(saved_state(self.module))

    @classmethod
    def from_bytes(cls, weights: bytes, config: object) -> TrainedModel:
        """Rebuild a model from safetensors bytes and a config.

        The config is :meth:`config_dict`'s form, or a ``torch_geometric.nn.models`` model's description
        (:mod:`bind_core.models.pyg`: ``{"format": "torch_geometric", "class", "args", "training"}``), whose
        weights are that module's ``state_dict``; so is a config whose ``source`` is one (read by
        :func:`~bind_core.training.document.read_document`). Without a ``dtype`` the weights' own is kept.
        The model's outputs stay in the order it was trained with; a config's ``classes`` (which label value each
        output stands for) is kept in :attr:`supplied` and applied by :func:`~bind_core.pipeline.audit.run_audit`,
        which puts the outputs in the graph's class order before the audit.

        Args:
            weights: a safetensors file's bytes.
            config: the model's description (see above).

        Returns:
            The :class:`TrainedModel`, in evaluation mode.

        Raises:
            ConfigError: the weights are not safetensors, the config is malformed (its ``history`` or ``stationarity``
                included: :class:`~bind_core.codec.ResultFormatError` where they do not have the records' shape), or
                they do not fit each other (:class:`~bind_core.models.pyg.UnsupportedModelError` for a PyG model the
                audit cannot reproduce).
        """
        return cls.from_document(weights, read_document(config))

    @classmethod
    def from_document(cls, weights: bytes, document: ModelDocument) -> TrainedModel:
        """Rebuild a model from safetensors bytes and its read description (:meth:`from_bytes`, the config read).

        Args:
            weights: a safetensors file's bytes (under the PyG module's parameter names where ``document.source``).
            document: the model's description.

        Returns:
            The :class:`TrainedModel`, in evaluation mode.

        Raises:
            ConfigError: the weights are not safetensors, or do not fit the description.
        """
        try:
            state = st_load(weights)
        except Exception as exc:  # safetensors raises its own error types for corrupt input
            raise ConfigError(f"weights are not a valid safetensors file: {exc}") from exc
        names = tuple(state)
        per_channel = {n for n, v in state.items() if n.endswith(".weight") and v.ndim == 1}  # normalisations' scales
        dtype = getattr(torch, document.dtype or _weights_dtype(state), None)
        if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
            raise ConfigError(f"dtype: {document.dtype!r} is not a floating-point type")
        try:
            module = GNN(document.model, document.in_dim, document.num_classes).to(dtype)
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            if isinstance(exc, ConfigError):
                raise
            raise ConfigError(f"model config is malformed: {exc}") from exc
        if document.source is not None:
            state = bind_state_dict(state, document.source)
        try:
            module.load_state_dict({k: v.to(dtype) for k, v in state.items()}, strict=True)
        except RuntimeError as exc:
            said = None
            if document.source is not None:
                classes_own = replace(document.source, layer_names=None, norm_names=None, head_name=None)
                expected = pyg_state_dict(module.state_dict(), classes_own, names)
                said = weights_problem(names, document.source, expected, per_channel) or heads_problem(
                    state, document.source
                )
            raise ConfigError(said or f"weights do not fit the model config: {exc}") from exc
        module.eval()
        form = SuppliedForm(document.source, None if document.classes is None else tuple(document.classes), names)
        return cls(module, document.model, document.training, document.history, document.stationarity, form)

    def save(self, directory: str | Path) -> None:
        """Write the model to a folder (created if missing).

        Args:
            directory: where ``model.safetensors`` and ``config.json`` are written.
        """
        path = Path(directory)
        path.mkdir(parents=True, exist_ok=True)
        (path / "model.safetensors").write_bytes(self.to_bytes())
        (path / "config.json").write_text(json.dumps(self.config_dict(), indent=2))

    @classmethod
    def load(cls, directory: str | Path) -> TrainedModel:
        """Read a model :meth:`save` wrote.

        Args:
            directory: the folder holding ``model.safetensors`` and ``config.json``.

        Returns:
            The :class:`TrainedModel` (see :meth:`from_bytes`, whose errors it raises).
        """
        path = Path(directory)
        return cls.from_bytes((path / "model.safetensors").read_bytes(), json.loads((path / "config.json").read_text()))


def saved_state(module: torch.nn.Module) -> dict[str, Tensor]:
    """``module``'s state dict as safetensors writes it: on the CPU, contiguous, and each entry its own tensor (a
    GATv2 with ``share_weights`` holds ``lin_r`` as ``lin_l``, two names of one tensor, which safetensors refuses;
    each name is written, so the file loads into the module strictly)."""
    out: dict[str, Tensor] = {}
    seen: set[int] = set()
    for name, value in module.state_dict().items():
        tensor = value.detach().cpu().contiguous()
        shared = tensor.untyped_storage().data_ptr() in seen and tensor.numel() > 0
        seen.add(tensor.untyped_storage().data_ptr())
        out[name] = tensor.clone() if shared else tensor
    return out


def _weights_dtype(state: dict[str, Tensor]) -> str:
    """The dtype of the first floating-point tensor in a state dict (``float32`` if none)."""
    for value in state.values():
        if value.is_floating_point():
            return str(value.dtype).removeprefix("torch.")
    return "float32"


# ---------------------------------------------------------------------- objective
def train(
    graph: Graph,
    config: TrainConfig | None = None,
    model: ModelConfig | None = None,
    *,
    progress: ProgressCallback | None = None,
    device: str | torch.device = "cpu",
    threads: int = 1,
) -> TrainedModel:
    """Train a GNN on ``graph`` with the recipe ``config``: Adam or SGD on full batches or sampled mini-batches, the
    weights of the best validation loss kept (or the last), early stopping with ``patience``, then the polish to a
    stationary point when ``config.polish``; left unset (``None``), where the audit's default estimate is the
    paper's influence function (:meth:`TrainConfig.polishes`: one-layer GCN, GIN and SAGE, the paper's recipe), not
    where it is the step estimate (deeper models, GAT: Adam's weights, as a user trains them). The trained model's
    ``train_config`` says which was done.

    Deterministic for a given ``config.seed`` on the CPU.

    Args:
        graph: the graph, with its train/validation/test split.
        config: the recipe (default :class:`TrainConfig`: the paper's).
        model: the architecture (default :class:`~bind_core.models.gnn.ModelConfig`: the paper's one-layer GCN).
        progress: ``progress("training", f)``, called about a hundred times with ``f`` in [0, 1].
        device: where to train.
        threads: CPU threads forming the polish's Hessian rows for a message-passing model
            (:func:`~bind_core.training.polish.polish`; the same model, bit for bit). The epochs run on the caller's
            torch threads whatever it is, so that the weights do not depend on it
            (:func:`~bind_core.threads.intra_op_times`).

    Returns:
        The trained model, with its training history (float64 after the polish; float32 without it).
    """
    config = config or TrainConfig()
    model = model or ModelConfig()
    torch.manual_seed(config.seed)
    module = GNN(model, graph.num_features, graph.num_classes).to(device)
    parameters = sum(p.numel() for p in module.parameters())
    if config.polish and model.stationary_point is not None:
        raise ConfigError(f"training.polish: {model.stationary_point}, so no polish can end; leave polish unset")
    polish = config.polishes(
        row_separable=model.row_separable, num_parameters=parameters, stationary_point=model.stationary_point is None
    )
    config = replace(config, polish=polish)
    if config.epochs == 0 and not config.polish:
        raise ConfigError(UNTRAINED)
    trained = TrainedModel(module, model, config)
    return _adam(trained, graph, config, progress=progress, stage="training", threads=threads)


def fine_tune(
    trained: TrainedModel,
    graph: Graph,
    *,
    epochs: int = 30,
    lr: float = 1e-2,
    polish: bool = False,
    seed: int | None = None,
    progress: ProgressCallback | None = None,
) -> TrainedModel:
    """Continue training a copy of ``trained`` on ``graph`` from its current weights with Adam.

    The paper's reference protocol for the "actual" effect of a deletion (30 epochs at lr 0.01). The weight
    decay is the model's. For the re-optimised ground truth use :func:`polish` instead.
    """
    config = replace(trained.train_config, epochs=epochs, lr=lr, polish=polish, keep="last")
    if seed is not None:
        config = replace(config, seed=seed)
    torch.manual_seed(config.seed)
    module = copy.deepcopy(trained.module).float() if not polish else copy.deepcopy(trained.module)
    clone = TrainedModel(module, trained.model_config, config)
    return _adam(clone, graph, config, progress=progress, stage="fine_tune")


def _adam(
    trained: TrainedModel,
    graph: Graph,
    config: TrainConfig,
    *,
    progress: ProgressCallback | None,
    stage: str,
    threads: int = 1,
) -> TrainedModel:
    module = trained.module
    keep_best = config.keep == "best_val" or config.patience > 0  # early stopping keeps the best epoch
    share = 0.8 if config.polish else 1.0  # of the stage's progress; the polish reports the rest
    inputs = trained.prepare(graph)
    optimizer = _optimizer(module, config)
    step, validation_loss, record = _epochs(module, inputs, graph, config, optimizer)
    best_val, best_epoch = float("inf"), -1
    best_state = {k: v.detach().clone() for k, v in module.state_dict().items()}
    start = time.perf_counter()
    every = max(1, config.epochs // 100)
    toggle = not module.row_separable  # a one-layer GCN has no dropout: skip the mode switches
    module.train()
    ran = config.epochs
    for epoch in range(config.epochs):
        if config.patience and best_epoch >= 0 and epoch - best_epoch > config.patience:
            ran = epoch  # early stopping: no improvement for `patience` epochs
            break
        if toggle:
            module.train()
        step()
        if toggle:
            module.eval()
        with torch.no_grad():
            val_loss = float(validation_loss())
        if keep_best and val_loss < best_val:
            best_val, best_epoch = val_loss, epoch
            best_state = {k: v.detach().clone() for k, v in module.state_dict().items()}
        if progress is not None and (epoch % every == 0 or epoch == config.epochs - 1):
            progress(stage, share * (epoch + 1) / config.epochs)
    if keep_best and best_epoch >= 0:
        module.load_state_dict(best_state)
    module.eval()
    trained.history = replace(
        record,
        epochs=ran,
        best_epoch=best_epoch if keep_best else ran - 1,
        best_val_loss=best_val if keep_best else None,
        seconds=time.perf_counter() - start,
    )
    adam_grad = gradient_norm(trained, graph)
    trained.stationarity = Stationarity(adam_grad_norm=adam_grad, grad_norm=adam_grad, polished=False)
    if config.polish:
        polish(
            trained,
            graph,
            max_iter=config.polish_max_iter,
            tol=config.polish_tol,
            newton_max_seconds=config.newton_seconds,
            progress=None if progress is None else (lambda f: progress(stage, share + (1 - share) * f)),
            threads=threads,
        )
        trained.stationarity.adam_grad_norm = adam_grad
    return trained


def _optimizer(module: GNN, config: TrainConfig) -> torch.optim.Optimizer:
    """The optimiser of ``config``'s epochs."""
    if config.optimizer == "sgd":
        return torch.optim.SGD(
            module.parameters(), lr=config.lr, momentum=config.momentum, weight_decay=config.weight_decay
        )
    return torch.optim.Adam(module.parameters(), lr=config.lr, weight_decay=config.weight_decay, fused=True)


def _epochs(
    module: GNN, inputs: GraphInputs, graph: Graph, config: TrainConfig, optimizer: torch.optim.Optimizer
) -> tuple[Callable[[], None], Callable[[], Tensor], TrainingHistory]:
    """``(step, validation_loss, record)``: one epoch's Adam steps (full batch, or mini-batches when
    ``config.batch_size > 0``), the validation loss after it, and what the history records of the batches (a
    :class:`TrainingHistory` with only those set)."""
    if config.batch_size > 0:
        epochs = MiniBatchEpochs(
            module, inputs, graph, optimizer, batch_size=config.batch_size, fan_out=config.fan_out, seed=config.seed
        )
        record = TrainingHistory(
            batch_size=config.batch_size,
            fan_out=list(epochs.fan_out),
            batches=epochs.batches_per_epoch,
            validation_nodes=int(epochs.validation_nodes.numel()),
        )
        return epochs.step, epochs.validation_loss, record
    dev = inputs.x.device
    train_idx, val_idx = graph.train_idx.to(dev), graph.val_idx.to(dev)
    y_train, y_val = graph.y.to(dev)[train_idx], graph.y.to(dev)[val_idx]
    forward_train, forward_val = _row_forwards(module, inputs, graph, val_idx)

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        loss = node_losses(forward_train(), y_train).mean()
        loss.backward()  # type: ignore[no-untyped-call]
        optimizer.step()

    return step, (lambda: node_losses(forward_val(), y_val).mean()), TrainingHistory()


def _row_forwards(
    module: GNN, inputs: GraphInputs, graph: Graph, val_idx: Tensor
) -> tuple[Callable[[], Tensor], Callable[[], Tensor]]:
    """Forward passes for the training and validation rows; a one-layer GCN reuses its fixed rows of ``Â·X``. A
    multi-layer model's training rows are computed on their computation graph where it is a small part of the graph
    (:func:`~bind_core.training.compgraph.objective_inputs`: the same outputs; dropout's masks are drawn for its rows
    only), so an epoch's forward and backward passes cost what the training nodes read, not the graph."""
    dev = inputs.x.device
    if module.row_separable and inputs.x_prop is not None:
        z_train, z_val = inputs.x_prop[graph.train_idx.to(dev)], inputs.x_prop[val_idx]
        return (lambda: module.forward_propagated(z_train)), (lambda: module.forward_propagated(z_val))
    train_inputs, rows = objective_inputs(module, inputs, graph)
    train_rows = rows.train_idx.to(dev)
    return (lambda: module(train_inputs, train_rows)), (lambda: module(inputs, val_idx))
