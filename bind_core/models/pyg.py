"""Models trained with PyG's own ``torch_geometric.nn.models`` (``GCN``, ``GraphSAGE``, ``GIN``, ``GAT``), read as
this project's :class:`~bind_core.models.gnn.GNN`, weight for weight.

A PyG ``BasicGNN`` built with ``out_channels`` and no ``jk`` is ``num_layers`` convolutions with ``act`` and dropout
between them and nothing after the last one, whose output is the logits: the project's GNN with ``head=False``
(no linear head) and ``outputs=out_channels``. Its convolutions are the same PyG layers: ``GCNConv`` (normalised
here once per graph with the same ``D̃^{-1/2}(A + I)D̃^{-1/2}``), mean-``SAGEConv``, ``GINConv`` over a two-layer
MLP, and ``GATConv`` or, with ``v2``, ``GATv2Conv`` (``residual`` and ``share_weights`` as given; hidden layers
concatenate ``heads`` heads of ``hidden_channels / heads``, the last one averages them; the attention scores go
through GAT's own leaky ReLU, ``attention="leaky_relu"``). The state dict's names
are the same but for GIN's MLP (``nn.lins.0`` / ``nn.lins.1`` here ``nn.0`` / ``nn.2``).

A supplied PyG model is described by a JSON config (:data:`PYG_FORMAT`)::

    {"format": "torch_geometric", "class": "GraphSAGE",
     "args": {"in_channels": 8, "hidden_channels": 16, "num_layers": 2, "out_channels": 2, "act": "relu"},
     "training": {"loss": "cross_entropy", "weight_decay": 5e-4}}

``args`` are the constructor's arguments; every option this module cannot reproduce exactly (a ``norm``, a ``jk``
mode, edge features, ...) is refused with an :class:`UnsupportedModelError` that names each one. ``training``
states the objective the model was trained with: the ``loss`` (``"cross_entropy"`` over ``out_channels`` logits, or
``"binary_cross_entropy"`` on one logit) and the ``weight_decay`` λ given to ``torch.optim.Adam`` (the objective
``mean(ℓ_train) + (λ/2)·‖θ‖²``); any other :class:`~bind_core.training.fit.TrainConfig` setting (``epochs``, ``lr``,
``optimizer``, ``patience`` for early stopping, ``seed``) is the user's recipe, with which the audit retrains when it
debiases; it has no polish unless it says ``"polish": true`` (a PyG user's training has none) and keeps its last
epoch's weights unless it says ``"keep": "best_val"`` or early-stops (``patience``), as a PyG training loop does.

``layer_names`` (optional) reads a module of the user's own class, as PyG's tutorials write it (``self.conv1 =
GCNConv(...)``, ``self.conv2 = ...``, the activation and dropout between them): the attribute names of its
convolutions in the order its forward applies them, read as the class's ``convs.0``, ``convs.1``
(:func:`~bind_core.models.pyg_names.basic_names`); weights handed back
(:func:`~bind_core.models.pyg_names.pyg_state_dict`) carry those names again.

``classes`` (optional, at the top level or in ``training``) says which label value each output column stands for,
output 0 first: ``"classes": ["denied", "approved"]`` for a model trained with ``approved`` coded as 1. The audit
numbers a label's values in sorted order (``approved`` class 0, ``denied`` class 1), so without ``classes`` output
``k`` is read as the ``k``-th value in that order; with it, the model's output columns are put in the label's order
before the audit, exactly (the last layer's output rows permuted, or for one logit negated), and the audit's
``supplied_model`` record says so. A name that is not a value of the label is refused. A supplied model without
``classes`` whose scores on its own training nodes rank the classes clearly below chance is audited with a warning
that its outputs may be in another order (``supplied_model.output_order``).
:func:`~bind_core.training.document.read_document` turns it into the project's config form (with the PyG description
kept under ``source``), :func:`~bind_core.models.pyg_names.bind_state_dict` renames the weights, and
:func:`reproduction` checks the result against the PyG module itself, built from the same arguments and weights.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

import torch
from torch import Tensor, nn

from bind_core.data.graph import Graph
from bind_core.errors import ConfigError
from bind_core.models.fits import read_classes
from bind_core.models.gnn import ACTIVATIONS, GNN, ModelConfig
from bind_core.models.norms import BATCH_NORMS, LAYER_NORMS, norm_kind, resolved_norm
from bind_core.models.pyg_names import basic_names, shared_filled
from bind_core.models.records import PYG_FORMAT, PygCheck, PygModel

PYG_CLASSES = {"GCN": "gcn", "GraphSAGE": "sage", "GIN": "gin", "GAT": "gat"}
"""The supported ``torch_geometric.nn.models`` classes and the project's architecture each becomes."""

LOSSES = ("cross_entropy", "binary_cross_entropy")
"""Training losses: ``cross_entropy`` over ``out_channels`` logits (softmax), ``binary_cross_entropy`` on one logit."""

REPRODUCTION_TOLERANCE = 1e-6
"""The largest difference of a logit (float64, relative to ``max(1, |logit|)``) between the converted model and the
PyG module that :func:`reproduction` accepts."""


class UnsupportedModelError(ConfigError):
    """A PyG model config asks for something the audit cannot reproduce.

    Args:
        problems: every ``(field, message)`` at fault; the exception's text joins them.
    """

    def __init__(self, problems: list[tuple[str, str]]) -> None:
        self.problems = problems
        super().__init__("; ".join(f"{field}: {message}" for field, message in problems))


Check = Callable[[Any], str | None]
"""An argument's check: ``None`` when the value is accepted, else why not."""


def _shown(value: Any) -> str:
    """A value as the user wrote it in JSON."""
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)


def _only(*allowed: object, why: str = "the audit reproduces the model exactly or not at all") -> Check:
    def check(value: Any) -> str | None:
        if any(value is a or (type(value) is type(a) and value == a) for a in allowed):
            return None
        shown = " or ".join(_shown(a) for a in allowed)
        return f"{_shown(value)} is not supported (only {shown}): {why}"

    return check


def _integer(low: int, high: int) -> Check:
    def check(value: Any) -> str | None:
        if isinstance(value, int) and not isinstance(value, bool) and low <= value <= high:
            return None
        return f"{_shown(value)} must be an integer between {low} and {high}"

    return check


def _fraction(value: Any) -> str | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value < 1:
        return None
    return f"{_shown(value)} must be a number in [0, 1)"


def _boolean(value: Any) -> str | None:
    return None if isinstance(value, bool) else f"{_shown(value)} must be true or false"


_PYG_ACTIVATIONS = tuple(a for a in ACTIVATIONS if a != "identity")
"""The ``act`` names PyG resolves that the audit reads; ``null`` is none (the audit's ``"identity"``)."""


def _activation(value: Any) -> str | None:
    if value is None or (isinstance(value, str) and value.lower() in _PYG_ACTIVATIONS):
        return None
    return f"{_shown(value)} is not supported (one of {', '.join(_PYG_ACTIVATIONS)}, or null for none)"


def _empty(value: Any) -> str | None:
    return None if value is None or value == {} else f"{_shown(value)} is not supported (only null)"


def _number(value: Any) -> str | None:
    return (
        None if isinstance(value, int | float) and not isinstance(value, bool) else f"{_shown(value)} must be a number"
    )


def _norm(value: Any) -> str | None:
    if value is None or (isinstance(value, str) and resolved_norm(value) in (*BATCH_NORMS, *LAYER_NORMS)):
        return None
    return (
        f'{_shown(value)} is not supported (only null, "batch_norm" or "layer_norm" with norm_kwargs {{"mode": '
        '"node"}): the other normalisations (GraphNorm, InstanceNorm, PairNorm, ...) normalise a node by other '
        "nodes' values in evaluation mode too, which the audit does not reproduce"
    )


def _eps(value: Any) -> str | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 < value < 1:
        return None
    return f"{_shown(value)} must be a number in (0, 1)"


def _momentum(value: Any) -> str | None:
    if value is None or value == 1 or _fraction(value) is None:
        return None
    return f"{_shown(value)} must be a number in [0, 1] or null"


_NORM_KWARGS: dict[str, Check] = {
    "eps": _eps,
    "momentum": _momentum,
    "affine": _boolean,
    "track_running_stats": _only(
        True,
        why="without running statistics a batch normalisation normalises the nodes of each forward pass together in"
        " evaluation mode too, so a node's output depends on every other node's",
    ),
    "allow_single_element": _boolean,
}
"""``BatchNorm``'s arguments the audit reads."""
_LAYER_NORM_KWARGS: dict[str, Check] = {
    "eps": _eps,
    "affine": _boolean,
    "mode": _only(
        "node",
        why='PyG\'s LayerNorm in its default mode "graph" normalises by the mean and variance of every node of the '
        "graph together, so each node's output depends on every other node's; \"node\" normalises each node's row "
        "on its own",
    ),
}
"""``LayerNorm``'s arguments the audit reads."""


def _norm_kwargs(value: Any) -> str | None:
    """The shape of ``norm_kwargs`` (its arguments are checked against the ``norm`` they go with,
    :func:`_norm_problems`)."""
    if value is None or isinstance(value, dict):
        return None
    return f"{_shown(value)} must be an object of the normalisation's arguments"


def _norm_problems(args: Mapping[str, Any]) -> list[tuple[str, str]]:
    """What is wrong with ``args``' normalisation: each of ``norm_kwargs`` an argument of its ``norm`` the audit
    reads, and a LayerNorm in ``mode="node"`` (PyG's default ``"graph"`` refused, with what to give)."""
    norm, kwargs = args.get("norm"), args.get("norm_kwargs")
    if _norm(norm) is not None or _norm_kwargs(kwargs) is not None:
        return []  # said already
    if norm is None:
        return []  # PyG reads norm_kwargs only with a norm
    kwargs = kwargs or {}
    layer = norm_kind(norm) == "layer"
    known, cls = (_LAYER_NORM_KWARGS, "LayerNorm") if layer else (_NORM_KWARGS, "BatchNorm")
    for name, given in kwargs.items():
        check = known.get(name)
        if check is None:
            return [
                (
                    "config.args.norm_kwargs",
                    f"{_shown(name)} is not an argument of {cls} the audit knows ({', '.join(known)})",
                )
            ]
        if (message := check(given)) is not None:
            return [("config.args.norm_kwargs", f"{name}: {message}")]
    if layer and "mode" not in kwargs:
        return [
            (
                "config.args.norm_kwargs",
                'required with "layer_norm": {"mode": "node"} (PyG\'s LayerNorm in its default mode "graph" '
                "normalises by every node of the graph together, so each node's output depends on every other "
                "node's, which the audit does not reproduce; a model trained in that mode is another model)",
            )
        ]
    return []


_COMMON: dict[str, Check] = {
    "in_channels": _integer(1, 1_000_000),
    "hidden_channels": _integer(1, 4096),
    "num_layers": _integer(1, 8),
    "out_channels": _integer(1, 4096),
    "dropout": _fraction,
    "act": _activation,
    "act_first": _boolean,  # without a norm, act_first changes nothing
    "act_kwargs": _empty,
    "norm": _norm,
    "norm_kwargs": _norm_kwargs,
    "jk": _only(
        None,
        "last",
        why="of jumping knowledge only 'last' is supported (a linear head after the last layer's activation)",
    ),
}
_BIAS = _only(True, why="the audited layers have biases")
_EXTRA: dict[str, dict[str, Check]] = {
    "GCN": {
        "improved": _only(False, why="GCN's improved self-loops (weight 2) are not supported"),
        "cached": _boolean,
        "add_self_loops": _only(True, why="the audited GCN adds self-loops"),
        "normalize": _only(True, why="the audited GCN normalises symmetrically"),
        "bias": _BIAS,
    },
    "GraphSAGE": {
        "aggr": _only("mean", why="only the mean aggregation is supported"),
        "normalize": _boolean,
        "root_weight": _only(True, why="the audited SAGE layer has a root weight"),
        "project": _only(False, why="projected neighbour features are not supported"),
        "bias": _BIAS,
    },
    "GIN": {
        "train_eps": _only(False, why="a trained eps is not supported (the audit's parameters are the MLPs')"),
        "norm": _only(
            None, why="a GIN's norm normalises inside each layer's MLP too, which the audited GIN does not reproduce"
        ),
        "eps": _number,
    },
    "GAT": {
        "heads": _integer(1, 16),
        "concat": _boolean,
        "v2": _boolean,
        "share_weights": _boolean,
        "negative_slope": _fraction,
        "add_self_loops": _only(True, why="the audited GAT adds self-loops"),
        "edge_dim": _only(None, why="edge features are not supported"),
        "fill_value": _only("mean", why="without edge features it is unused"),
        "residual": _boolean,
        "bias": _BIAS,
    },
}
_REQUIRED = ("in_channels", "hidden_channels", "num_layers", "out_channels")


@dataclass(frozen=True)
class PygConfig:
    """A supplied ``torch_geometric.nn.models`` config, checked (:func:`read_pyg_config`)."""

    model: PygModel
    """The model's description."""
    recipe: Mapping[str, object]
    """The ``training`` settings besides the ``loss``: the user's recipe, read by ``TrainConfig``."""
    dtype: object | None
    """The ``dtype`` as given, if any."""
    classes: tuple[str, ...] | None = None
    """The label value each output stands for, output 0 first (the config's ``classes``); ``None``: not given."""


def is_pyg_config(config: object) -> bool:
    """Whether a supplied model's config describes a ``torch_geometric.nn.models`` model."""
    return isinstance(config, Mapping) and config.get("format") == PYG_FORMAT


def read_pyg_config(config: Mapping[str, object]) -> PygConfig:
    """The checked model description, the ``training`` settings without the ``loss``, and the ``dtype``.

    Args:
        config: ``{"format": "torch_geometric", "class", "args", "training", "dtype"?, "classes"?}`` (``classes``
            may also be given in ``training``).

    Returns:
        The :class:`PygConfig`.

    Raises:
        UnsupportedModelError: naming every option that is missing, malformed or not reproducible.
    """
    problems = [
        (f"config.{k}", "unknown key")
        for k in sorted(set(config) - {"format", "class", "args", "training", "dtype", "classes", *LAYOUT_KEYS})
    ]
    training = config.get("training")
    if not isinstance(training, dict):
        problems.append(("config.training", "must be an object with the loss and the weight_decay trained with"))
        training = {}
    if "weight_decay" not in training:
        problems.append(("config.training.weight_decay", "required: the L2 coefficient the model was trained with"))
    problems += _description_problems(config.get("class"), config.get("args"), training.get("loss"), "config.training")
    problems += _layer_name_problems(config.get("layer_names"), config.get("args"), "config.layer_names")
    problems += _norm_name_problems(config.get("norm_names"), config.get("args"), "config.norm_names")
    problems += _last_heads_problems(config.get("last_heads"), config.get("class"), "config.last_heads")
    problems += _head_name_problems(config.get("head_name"), config.get("args"), "config.head_name")
    classes = _classes(config, training, problems)
    if problems:
        raise UnsupportedModelError(problems)
    pyg = _described(
        str(config["class"]),
        cast("dict[str, Any]", config["args"]),
        str(training["loss"]),
        cast("list[str] | None", config.get("layer_names")),
        cast("int | None", config.get("last_heads")),
        cast("str | None", config.get("head_name")),
        cast("list[str] | None", config.get("norm_names")),
    )
    recipe = {k: v for k, v in training.items() if k not in ("loss", "classes")}
    return PygConfig(pyg, recipe, config.get("dtype"), classes)


def _classes(
    config: Mapping[str, object], training: dict[str, Any], problems: list[tuple[str, str]]
) -> tuple[str, ...] | None:
    """The config's ``classes`` (top level, or in ``training``), checked for its form; a problem is added."""
    if "classes" in config and "classes" in training:
        problems.append(("config.classes", "given twice (at the top level and in training): give it once"))
        return None
    at = "config.training.classes" if "classes" in training else "config.classes"
    args = config.get("args")
    out = args.get("out_channels") if isinstance(args, dict) else None
    if not isinstance(out, int) or isinstance(out, bool):
        return None  # out_channels' own problem is named
    classes, problem = read_classes(config.get("classes", training.get("classes")), 2 if out == 1 else out)
    if problem is not None:
        problems.append((at, problem))
    return classes


def read_source(source: object) -> PygModel:
    """A stored PyG description (``source`` of a canonical config, :class:`PygModel` encoded), checked again.

    Raises:
        UnsupportedModelError: as :func:`read_pyg_config`.
    """
    if not isinstance(source, Mapping):
        raise UnsupportedModelError([("source", "must be an object describing a torch_geometric model")])
    problems = _description_problems(source.get("class"), source.get("args"), source.get("loss"), "source")
    problems += _layer_name_problems(source.get("layer_names"), source.get("args"), "source.layer_names")
    problems += _norm_name_problems(source.get("norm_names"), source.get("args"), "source.norm_names")
    problems += _last_heads_problems(source.get("last_heads"), source.get("class"), "source.last_heads")
    problems += _head_name_problems(source.get("head_name"), source.get("args"), "source.head_name")
    if problems:
        raise UnsupportedModelError(problems)
    return _described(
        str(source["class"]),
        source["args"],
        str(source["loss"]),
        source.get("layer_names"),
        source.get("last_heads"),
        source.get("head_name"),
        source.get("norm_names"),
    )


LAYOUT_KEYS = ("layer_names", "norm_names", "last_heads", "head_name")
"""A config's keys beside the class's arguments that describe a module of the user's own built of its layers (the
:class:`~bind_core.models.records.PygModel` fields of the same names)."""


def _head_name_problems(name: Any, args: Any, at: str) -> list[tuple[str, str]]:
    """What is wrong with a config's ``head_name`` (none given: nothing)."""
    if name is None:
        return []
    if not isinstance(name, str) or not name or name.strip(".") != name:
        return [(at, 'must be the attribute name of the linear classifier ("classifier")')]
    if not isinstance(args, dict) or args.get("jk") != "last":
        return [(at, 'a linear classifier after the convolutions is read with "jk": "last" in args')]
    return []


def _last_heads_problems(heads: Any, cls: Any, at: str) -> list[tuple[str, str]]:
    """What is wrong with a config's ``last_heads`` (none given: nothing)."""
    if heads is None:
        return []
    if cls != "GAT":
        return [(at, "only a GAT's last layer has heads")]
    return [(at, message)] if (message := _integer(1, 16)(heads)) is not None else []


def _layer_name_problems(names: Any, args: Any, at: str) -> list[tuple[str, str]]:
    """What is wrong with a config's ``layer_names`` (none given: nothing): one name per layer, distinct, none
    inside another (``gnn`` and ``gnn.conv1``)."""
    if names is None:
        return []
    layers = args.get("num_layers") if isinstance(args, dict) else None
    if not isinstance(names, list) or not all(isinstance(n, str) and n.strip(".") == n and n for n in names):
        return [(at, 'must be a list of the convolutions\' attribute names ("conv1", "conv2"), in the order applied')]
    if isinstance(layers, int) and len(names) != layers:
        return [(at, f"{len(names)} names for {layers} layers (num_layers): name each convolution once")]
    return _distinct_names(names, at)


def _norm_name_problems(names: Any, args: Any, at: str) -> list[tuple[str, str]]:
    """What is wrong with a config's ``norm_names`` (none given: nothing): with a ``norm``, one name per normalised
    layer (every one but the last; the last too with ``jk``), distinct, none inside another."""
    if names is None:
        return []
    args = args if isinstance(args, dict) else {}
    if args.get("norm") is None:
        return [(at, 'names the normalisations of a module with "norm": "batch_norm" or "layer_norm" in args')]
    if not isinstance(names, list) or not all(isinstance(n, str) and n.strip(".") == n and n for n in names):
        return [(at, 'must be a list of the normalisations\' attribute names ("bn1" or "bns.0"), in the order applied')]
    layers = args.get("num_layers")
    if isinstance(layers, int) and len(names) != (wanted := _normalised_layers(args)):
        where = "every convolution" if args.get("jk") == "last" else "every convolution but the last"
        return [(at, f"{len(names)} names for {wanted} normalisations (one after {where})")]
    return _distinct_names(names, at)


def _normalised_layers(args: Mapping[str, Any]) -> int:
    """How many normalisations a checked PyG description's layers have (``BasicGNN``: one after every convolution
    but the last, and after the last too with ``jk``; none without ``norm``)."""
    if args.get("norm") is None:
        return 0
    return int(args["num_layers"]) - 1 + int(args.get("jk") == "last")


def _distinct_names(names: list[str], at: str) -> list[tuple[str, str]]:
    """Names that are distinct and none inside another (``gnn`` and ``gnn.conv1``)."""
    if len(set(names)) != len(names):
        return [(at, f"{_shown(names)} names a layer twice")]
    inside = [(a, b) for a in names for b in names if b.startswith(f"{a}.")]
    if inside:
        return [(at, f"{_shown(inside[0][1])} is inside {_shown(inside[0][0])}: name the convolutions themselves")]
    return []


def _description_problems(cls: Any, args: Any, loss: Any, loss_at: str) -> list[tuple[str, str]]:
    problems = []
    if cls not in PYG_CLASSES:
        problems.append(("config.class", f"{_shown(cls)} is not one of {', '.join(PYG_CLASSES)}"))
    if not isinstance(args, dict):
        problems.append(("config.args", "must be an object of the constructor's arguments"))
        args = {}
    checks = {**_COMMON, **_EXTRA.get(str(cls), {})}
    problems += [(f"config.args.{key}", "required") for key in _REQUIRED if key not in args]
    for name, value in args.items():
        check = checks.get(name)
        message = f"{_shown(name)} is not an argument the audit knows for {cls}" if check is None else check(value)
        if message is not None:
            problems.append((f"config.args.{name}", message))
    problems += _norm_problems(args)
    if cls == "GAT" and args.get("share_weights") is True and args.get("v2") is not True:
        problems.append(("config.args.share_weights", 'only with "v2": true (GATConv has no share_weights)'))
    out = args.get("out_channels")
    if loss not in LOSSES:
        problems.append((f"{loss_at}.loss", f"{_shown(loss)} is not one of {', '.join(LOSSES)}"))
    elif loss == "binary_cross_entropy" and out != 1:
        problems.append(("config.args.out_channels", f"{_shown(out)}: must be 1 with the loss 'binary_cross_entropy'"))
    elif loss == "cross_entropy" and out == 1:
        problems.append(("config.args.out_channels", "1: cross_entropy needs one logit per class (2 or more)"))
    return problems


def _described(
    cls: str,
    args: dict[str, Any],
    loss: str,
    layer_names: list[str] | None = None,
    last_heads: int | None = None,
    head_name: str | None = None,
    norm_names: list[str] | None = None,
) -> PygModel:
    """The description with PyG's defaults filled in for the options that matter (checked already)."""
    defaults: dict[str, Any] = {"dropout": 0.0}
    if cls == "GAT":
        defaults |= {"heads": 1, "concat": True, "negative_slope": 0.2}
    act = args.get("act", "relu")
    args = {**defaults, **args, "act": None if act is None else str(act).lower()}
    names = None if layer_names is None else list(layer_names)
    heads = None if last_heads is None or last_heads == args.get("heads") else int(last_heads)
    head = None if head_name in (None, "lin") else head_name
    norms = None if norm_names is None else list(norm_names)
    return PygModel(
        cls=cls, args=args, loss=loss, layer_names=names, norm_names=norms, last_heads=heads, head_name=head
    )


def model_config(pyg: PygModel) -> ModelConfig:
    """The project's architecture for a checked PyG model (``head=False``: the last layer outputs the logits)."""
    a = pyg.args
    heads = int(a.get("heads", 1))
    head = a.get("jk") == "last"  # BasicGNN's lin after the last layer's activation and dropout
    # Every layer concatenates its heads but one that outputs the logits (PyG's GAT without jk).
    concat = bool(a.get("concat", False)) and heads > 1 and (int(a["num_layers"]) > 1 or head)
    norm = a.get("norm_kwargs") or {}
    return ModelConfig(
        arch=PYG_CLASSES[pyg.cls],
        layers=int(a["num_layers"]),
        hidden=int(a["hidden_channels"]),
        dropout=float(a["dropout"]),
        heads=heads,
        activation="identity" if a["act"] is None else str(a["act"]),
        head=head,
        head_activation=head,
        outputs=int(a["out_channels"]),
        concat=concat,
        attention="leaky_relu" if pyg.cls == "GAT" else "smooth",
        negative_slope=float(a.get("negative_slope", 0.2)),
        last_heads=pyg.last_heads or 0,
        norm=norm_kind(a.get("norm")),
        norm_eps=float(norm.get("eps", 1e-5)),
        norm_momentum=None if (momentum := norm.get("momentum", 0.1)) is None else float(momentum),
        norm_affine=bool(norm.get("affine", True)),
        act_first=bool(a.get("act_first", False)),
        v2=bool(a.get("v2", False)),
        share_weights=bool(a.get("share_weights", False)),
        residual=bool(a.get("residual", False)),
        normalize=pyg.cls == "GraphSAGE" and bool(a.get("normalize", False)),
    )


def pyg_module(source: PygModel) -> nn.Module:
    """The ``torch_geometric.nn.models`` module itself, built from the checked arguments (for :func:`reproduction`)."""
    # torch_geometric is loaded here, not at the top: only checking a supplied PyG model needs it, and importing it
    # costs seconds that every other user of bind_core (the API, the worker, the CLI) would pay.
    from torch_geometric.nn import models as pyg_models

    module: nn.Module = getattr(pyg_models, source.cls)(**source.args)
    if source.last_heads:  # the user's own GAT: its last layer as the class builds it, but for its heads
        from torch_geometric.nn import GATConv, GATv2Conv

        a = source.args
        convs = cast("nn.ModuleList", module.convs)
        v2 = {"share_weights": bool(a.get("share_weights", False))} if a.get("v2") else {}
        convs[-1] = (GATv2Conv if v2 else GATConv)(
            cast("Any", convs[-1]).in_channels,
            int(a["out_channels"]),
            heads=source.last_heads,
            concat=False,
            negative_slope=float(a.get("negative_slope", 0.2)),
            dropout=float(a.get("dropout", 0.0)),
            add_self_loops=True,
            residual=bool(a.get("residual", False)),
            **v2,
        )
    return module


def reproduction(module: GNN, weights: dict[str, Tensor], source: PygModel, graph: Graph) -> PygCheck:
    """How exactly ``module`` (the converted model) reproduces the PyG module on ``graph``: both in float64 and
    evaluation mode, the PyG module with the supplied ``weights`` loaded as they are.

    Returns:
        The :class:`PygCheck`: the largest ``|Δlogit| / max(1, |logit|)`` over all nodes.
    """
    reference = pyg_module(source).double().eval()
    state = shared_filled(basic_names(weights, source), source)
    reference.load_state_dict({k: v.double() for k, v in state.items()}, strict=True)
    ours = copy.deepcopy(module).cpu().double().eval()
    with torch.no_grad():
        expected = reference(graph.x.double(), graph.edge_index)
        got = ours(ours.prepare(graph, torch.float64, torch.device("cpu")))
    scale = expected.abs().clamp(min=1.0)
    return PygCheck(
        cls=source.cls, max_logit_difference=float(((got - expected).abs() / scale).max()), nodes=graph.num_nodes
    )
