"""A trained model to take away: safetensors weights and a JSON config in the form of the model it descends from.

A model retrained by the audit (a debiasing budget's, a what-if's) is handed back in the form the user gave the
audited model: a supplied ``torch_geometric.nn.models`` model's weights under PyG's own parameter names with a PyG
config (:mod:`bind_core.models.pyg`), else this project's form (:meth:`TrainedModel.config_dict`). Either loads
through :meth:`TrainedModel.from_bytes` (how a supplied model is read) to the same predictions; never a pickle.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from safetensors.torch import load as st_load
from safetensors.torch import save as st_save

from bind_core.errors import ConfigError
from bind_core.models.pyg import LAYOUT_KEYS
from bind_core.models.pyg_names import pyg_state_dict
from bind_core.models.records import PYG_FORMAT
from bind_core.training.document import read_document
from bind_core.training.fit import TrainedModel, saved_state


@dataclass(frozen=True)
class ExportedModel:
    """A model's safetensors bytes and its JSON config, ready to download or register as a supplied model."""

    weights: bytes
    config: dict[str, Any]

    @property
    def size_bytes(self) -> int:
        """The weights' size."""
        return len(self.weights)

    @property
    def sha256(self) -> str:
        """The weights' SHA-256, hex."""
        return hashlib.sha256(self.weights).hexdigest()


def weight_names(weights: bytes) -> list[str]:
    """The parameter names in a safetensors file (what :func:`export_model`'s ``names`` takes).

    Args:
        weights: a safetensors file's bytes.

    Returns:
        Its tensors' names.

    Raises:
        ConfigError: the bytes are not safetensors.
    """
    try:
        return list(st_load(weights))
    except Exception as exc:  # safetensors raises its own error types for corrupt input
        raise ConfigError(f"weights are not a valid safetensors file: {exc}") from exc


def retrained_form(form: dict[str, Any] | None, classes: Sequence[str]) -> dict[str, Any] | None:
    """The audited model's form (:func:`export_model`'s ``form``) for a model the audit retrained on the graph: a
    ``classes`` in it (the supplied model's outputs, in its own order) becomes the graph's ``classes``, the order of
    every model the audit trains.

    Args:
        form: the audited model's config as the service stores it, or ``None``.
        classes: the audited graph's class names, class 0 first.
    """
    if form is None or form.get("classes") is None:
        return form
    return {**form, "classes": list(classes)}


def export_model(
    model: TrainedModel, form: dict[str, Any] | None = None, names: Collection[str] | None = None
) -> ExportedModel:
    """``model``'s weights and config in the form of the model it descends from.

    Args:
        model: the model to hand out (e.g. a debiasing budget's retrained model).
        form: the audited model's config as the service stores it (:meth:`TrainedModel.config_dict`, with
            ``source`` for a supplied PyG model); ``None``: a model the audit trained itself. Its ``classes``, if
            any, must say the label value of each of ``model``'s outputs: for a retrained model, the graph's
            (:func:`retrained_form`).
        names: the parameter names of the weights the user supplied (:func:`weight_names`), when known.

    Returns:
        For a PyG ``source``: the state dict under PyG's parameter names and the PyG config
        (``{"format": "torch_geometric", "class", "args", "training": {"loss", ...the recipe}, "dtype"}``, and the
        form's ``classes`` where it has them); else
        :meth:`TrainedModel.to_bytes` and :meth:`TrainedModel.config_dict`.
    """
    document = None if form is None else read_document(form)
    source = None if document is None else document.source
    if document is None or source is None:
        return ExportedModel(model.to_bytes(), model.config_dict())
    state = saved_state(model.module)
    config: dict[str, Any] = {
        "format": PYG_FORMAT,
        "class": source.cls,
        "args": dict(source.args),
        "training": {"loss": source.loss, **model.train_config.to_dict()},
        "dtype": str(model.dtype).removeprefix("torch."),
    }
    if document.classes is not None:
        config["classes"] = document.classes
    config |= {name: value for name in LAYOUT_KEYS if (value := getattr(source, name)) is not None}
    return ExportedModel(st_save(pyg_state_dict(state, source, names)), config)
