"""A model's JSON description, typed: what ``config.json`` beside ``model.safetensors`` holds
(:meth:`~bind_core.training.fit.TrainedModel.config_dict`), read from either of the forms a user may supply.

The two forms are this project's (``{"format": "bind-audit/model@1", "model", "training", "in_dim", "num_classes",
...}``) and a ``torch_geometric.nn.models`` model's (``{"format": "torch_geometric", "class", "args", "training"}``,
:mod:`bind_core.models.pyg`). :func:`read_document` reads both into one :class:`ModelDocument`; a PyG model's keeps
its description under ``source``, by which its weights' names are read. The document is encoded by the one encoder
(:func:`bind_core.codec.encode`).
"""

# ruff: noqa: RUF009  (key() returns dataclasses.field(...): fields with metadata, not shared defaults)

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from bind_core.codec import decode, key
from bind_core.errors import ConfigError
from bind_core.models.fits import read_classes
from bind_core.models.gnn import ModelConfig
from bind_core.models.pyg import (
    PygConfig,
    UnsupportedModelError,
    is_pyg_config,
    model_config,
    read_pyg_config,
    read_source,
)
from bind_core.models.records import PygModel
from bind_core.training.records import Stationarity, TrainingHistory
from bind_core.training.settings import TrainConfig

__all__ = ["MODEL_FORMAT", "ModelDocument", "read_document"]

MODEL_FORMAT = "bind-audit/model@1"
"""The ``format`` of this project's model description."""


@dataclass(kw_only=True)
class ModelDocument:
    """A model's description in this project's form (``config.json`` beside the weights).

    Attributes:
        format: ``bind-audit/model@1``.
        model: the architecture.
        training: the training recipe, which debiasing retrains with.
        in_dim: input features.
        num_classes: classes.
        dtype: the weights' floating-point type; ``None``: the stored weights' own.
        source: a ``torch_geometric.nn.models`` model's checked description, by which the weights' parameter names
            are read; ``None`` for this project's models.
        classes: the label value each output stands for, output 0 first; ``None``: the label's values in sorted
            order (the audit's class numbers).
        history: the training run (empty for a model trained elsewhere).
        stationarity: the polish's record (empty for a model trained elsewhere).
    """

    format: str = field(default=MODEL_FORMAT, metadata={"doc": f"string: {MODEL_FORMAT}", "optional": False})
    model: ModelConfig = key("the architecture (ModelConfig's settings)")
    training: TrainConfig = key("the training recipe (TrainConfig's settings), which debiasing retrains with")
    in_dim: int = key("integer: input features")
    num_classes: int = key("integer: classes")
    dtype: str | None = key(
        "string: the weights' floating-point type (float32, float64); absent: theirs'", optional=True
    )
    source: PygModel | None = key(
        "a torch_geometric model's description, by which the weights' parameter names are read", optional=True
    )
    classes: list[str] | None = key(
        "strings: the label value each output stands for, output 0 first; absent: the label's values in sorted order",
        optional=True,
    )
    history: TrainingHistory = field(
        default_factory=TrainingHistory, metadata={"doc": "the training run", "optional": False}
    )
    stationarity: Stationarity = field(
        default_factory=Stationarity, metadata={"doc": "the polish's record", "optional": False}
    )


def read_document(config: object) -> ModelDocument:
    """A supplied model's config, in either form, as a :class:`ModelDocument`.

    Args:
        config: this project's form or a ``torch_geometric.nn.models`` model's (see the module's docstring).

    Returns:
        The document; a PyG model's in the project's form, with ``source`` its checked description and ``training``
        its recipe (no polish unless the recipe says so: a PyG user's training has none).

    Raises:
        ConfigError: the config is not an object, misses a key or has a malformed one
            (:class:`~bind_core.codec.ResultFormatError` for its ``history`` or ``stationarity``);
            :class:`~bind_core.models.pyg.UnsupportedModelError` for a PyG model the audit cannot reproduce.
    """
    if not isinstance(config, Mapping):
        raise ConfigError(f"model config: expected an object, got {type(config).__name__}")
    if is_pyg_config(config):
        return _from_pyg(read_pyg_config(config))
    try:
        source = config.get("source")
        num_classes = int(config["num_classes"])
        classes, problem = read_classes(config.get("classes"), num_classes)
        if problem is not None:
            raise ConfigError(f"classes: {problem}")
        return ModelDocument(
            model=ModelConfig.from_dict(config["model"]),
            training=TrainConfig.from_dict(config["training"]),
            in_dim=int(config["in_dim"]),
            num_classes=num_classes,
            dtype=_dtype(config.get("dtype")),
            source=read_source(source) if is_pyg_config(source) else None,
            classes=None if classes is None else list(classes),
            history=decode(TrainingHistory, config.get("history") or {}, "history"),
            stationarity=decode(Stationarity, config.get("stationarity") or {}, "stationarity"),
        )
    except ConfigError:
        raise
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise ConfigError(f"model config is malformed: {exc}") from exc


def _from_pyg(pyg: PygConfig) -> ModelDocument:
    """A checked PyG config in the project's form."""
    try:
        model = model_config(pyg.model)
    except ConfigError as exc:
        raise UnsupportedModelError([("config.args", str(exc))]) from exc
    out = int(pyg.model.args["out_channels"])
    return ModelDocument(
        model=model,
        # a PyG user's loop has no polish and keeps its last epoch's weights unless it says otherwise (patience)
        training=TrainConfig.from_dict({"polish": False, "keep": "last", **pyg.recipe}),
        in_dim=int(pyg.model.args["in_channels"]),
        num_classes=2 if out == 1 else out,
        dtype=_dtype(pyg.dtype),
        source=pyg.model,
        classes=None if pyg.classes is None else list(pyg.classes),
    )


def _dtype(value: object) -> str | None:
    """A ``dtype`` as written (checked when the weights are cast to it), or ``None`` for none given."""
    return None if value is None or value == "" else str(value)
