"""A PyG model's parameter names, as the user's weights hold them and as this project's GNN holds them
(:mod:`bind_core.models.pyg`): renaming one into the other (a module of the user's own, ``layer_names`` and
``head_name``; GIN's MLP; an older ``GATConv``'s shared ``lin_src``/``lin_dst``; a GATv2's ``lin_r`` saved once
as ``lin_l`` with ``share_weights``; ``jk="last"``'s ``lin`` as the head), and, where the weights do not load, why,
in the user's terms (:func:`weights_problem`, :func:`heads_problem`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection

import torch
from torch import Tensor

from bind_core.errors import ConfigError
from bind_core.models.norms import norm_kind
from bind_core.models.records import PygModel

__all__ = ["basic_names", "bind_state_dict", "heads_problem", "pyg_state_dict", "shared_filled", "weights_problem"]


def bind_state_dict(state: dict[str, Tensor], source: PygModel) -> dict[str, Tensor]:
    """A PyG model's state dict under the project's parameter names (a module of the user's own under the class's,
    :func:`basic_names`; GIN's MLP layers; an older ``GATConv``'s shared ``lin_src``/``lin_dst`` as ``lin``;
    ``jk="last"``'s ``lin`` as the head). Other names are the same; unknown ones are left for the strict load to
    name."""
    out: dict[str, Tensor] = {}
    headed = source.args.get("jk") == "last"
    state = basic_names(state, source)
    last = str(int(source.args.get("num_layers", 0)) - 1)
    for name, value in state.items():
        if headed and name.startswith("lin."):  # BasicGNN's classifier: this project's head
            out[f"head.{name}"] = value
            continue
        parts = name.split(".")
        if parts[0] == "norms" and parts[2:3] == ["module"] and len(parts) == 4:  # PyG's BatchNorm wraps torch's
            parts = [*parts[:2], parts[3]]
        if parts[0] == "norms" and len(parts) == 3:
            out[f"head.norm.{parts[2]}" if parts[1] == last else ".".join(parts)] = value
            continue
        if source.cls == "GIN" and parts[2:4] == ["nn", "lins"] and len(parts) == 6:
            parts = [*parts[:3], str(2 * int(parts[4])), parts[5]]
        elif source.cls == "GAT" and parts[2:3] in (["lin_src"], ["lin_dst"]):
            partner = ".".join([*parts[:2], "lin_dst" if parts[2] == "lin_src" else "lin_src", *parts[3:]])
            if partner not in state or not torch.equal(state[partner], value):
                pair = f"{_own(name, source)} and {_own(partner, source)}"
                raise ConfigError(f"weights: {pair} differ (a bipartite GATConv is not supported)")
            parts = [*parts[:2], "lin", *parts[3:]]
        out[".".join(parts)] = value
    out = shared_filled(out, source)
    for prefix in {n.rsplit(".", 1)[0] for n in out if n.endswith(".running_mean")}:
        # weights saved without the step count (it only weighs a cumulative average, momentum null): none yet
        out.setdefault(f"{prefix}.num_batches_tracked", torch.zeros((), dtype=torch.long))
    return out


def shared_filled(state: dict[str, Tensor], source: PygModel) -> dict[str, Tensor]:
    """``state`` (the class's names) with a GATv2's ``lin_r`` filled in from its ``lin_l`` where ``share_weights``
    makes them one map, as safetensors' ``save_model`` writes such a tensor: once.

    Raises:
        ConfigError: both are given and differ.
    """
    if not source.args.get("share_weights"):
        return state
    out = dict(state)
    for name in [n for n in state if n.split(".")[2:3] == ["lin_l"]]:
        twin = name.replace(".lin_l.", ".lin_r.", 1)
        if twin in out and not torch.equal(out[twin], out[name]):
            pair = f"{_own(name, source)} and {_own(twin, source)}"
            raise ConfigError(f"weights: {pair} differ, but share_weights is true (one linear map for both)")
        out.setdefault(twin, out[name])
    return out


def pyg_state_dict(
    state: dict[str, Tensor], source: PygModel, names: Collection[str] | None = None
) -> dict[str, Tensor]:
    """The inverse of :func:`bind_state_dict`: the project's state dict under the PyG module's parameter names.

    Args:
        state: the converted model's ``state_dict``.
        source: the PyG description.
        names: the parameter names of the weights the user supplied, when known: a GAT whose weights had an older
            ``GATConv``'s ``lin_src``/``lin_dst`` gets both again (else ``lin``, as the installed PyG names it).

    Returns:
        A state dict that ``torch_geometric.nn.models.<class>(**args).load_state_dict(..., strict=True)`` takes.
    """
    split = names is not None and any(".lin_src." in n for n in names)
    inner = ".module" if _wraps(source) else ""  # PyG's BatchNorm holds torch's as module; its LayerNorm is one
    out: dict[str, Tensor] = {}
    for name, value in state.items():
        if name.startswith("head.lin."):
            out[name.removeprefix("head.")] = value
            continue
        parts = name.split(".")
        if name.startswith("head.norm."):  # the last convolution's, before the activated head
            out[f"norms.{int(source.args['num_layers']) - 1}{inner}.{parts[2]}"] = value
            continue
        if parts[0] == "norms" and len(parts) == 3:
            out[f"norms.{parts[1]}{inner}.{parts[2]}"] = value
            continue
        if source.cls == "GIN" and parts[2:3] == ["nn"] and len(parts) == 5:
            out[".".join([*parts[:3], "lins", str(int(parts[3]) // 2), parts[4]])] = value
        elif source.cls == "GAT" and split and parts[2:3] == ["lin"]:
            out[".".join([*parts[:2], "lin_src", *parts[3:]])] = value
            out[".".join([*parts[:2], "lin_dst", *parts[3:]])] = value
        else:
            out[name] = value
    wrapped = _wrapped_norms(names, source)
    return {_own(name, source, wrapped=wrapped): value for name, value in out.items()}


def basic_names(state: dict[str, Tensor], source: PygModel) -> dict[str, Tensor]:
    """A module of the user's own (``source.layer_names``, ``source.norm_names``, ``source.head_name``) under the
    class's names: ``conv1.lin.weight`` → ``convs.0.lin.weight``, ``bn1.running_mean`` (a ``torch.nn.BatchNorm1d``)
    or ``bn1.module.running_mean`` (PyG's ``BatchNorm``) → ``norms.0.module.running_mean``, ``classifier.weight`` →
    ``lin.weight``; the class's own weights, and names no layer's, are returned as they are."""
    prefixes = [(f"{layer}.", f"convs.{i}.") for i, layer in enumerate(source.layer_names or [])]
    inner = ".module" if _wraps(source) else ""
    for i, norm in enumerate(source.norm_names or []):
        prefixes += [(f"{norm}.module.", f"norms.{i}.module."), (f"{norm}.", f"norms.{i}{inner}.")]
    if source.head_name:
        prefixes.append((f"{source.head_name}.", "lin."))
    if not prefixes:
        return state
    out: dict[str, Tensor] = {}
    for name, value in state.items():
        renamed = next((new + name[len(old) :] for old, new in prefixes if name.startswith(old)), name)
        out[renamed] = value
    return out


def _wraps(source: PygModel) -> bool:
    """Whether the PyG class's normalisations hold torch's as ``module`` (``norms.0.module.weight``): its
    ``BatchNorm``, not its ``LayerNorm``."""
    return source.args.get("norm") is not None and norm_kind(source.args["norm"]) == "batch"


def _wrapped_norms(names: Collection[str] | None, source: PygModel) -> bool:
    """Whether the user's normalisations (``source.norm_names``) are PyG's ``BatchNorm``, which holds torch's as
    ``module`` (``bn1.module.weight``), as their weights' ``names`` show; ``False``: ``torch.nn.BatchNorm1d``."""
    if not source.norm_names or names is None:
        return False
    return any(n.startswith(f"{source.norm_names[0]}.module.") for n in names)


def _own(name: str, source: PygModel, *, wrapped: bool = False) -> str:
    """A ``convs.i.…`` name as the user's module names it (``conv1.…`` with ``layer_names``; ``bn1.…`` with
    ``norm_names``, or ``bn1.module.…`` where ``wrapped``; ``lin.…`` as ``head_name`` says)."""
    if source.head_name and name.startswith("lin."):
        return f"{source.head_name}.{name[4:]}"
    norm = name.split(".", 3)
    if len(norm) == 3:  # a LayerNorm's: norms.i.weight
        norm = [*norm[:2], "module", norm[2]]
    if source.norm_names and len(norm) == 4 and norm[0] == "norms" and norm[2] == "module" and norm[1].isdigit():
        i = int(norm[1])
        if i < len(source.norm_names):
            return f"{source.norm_names[i]}.{'module.' if wrapped else ''}{norm[3]}"
    parts = name.split(".", 2)
    if source.layer_names and len(parts) == 3 and parts[0] == "convs" and parts[1].isdigit():
        i = int(parts[1])
        if i < len(source.layer_names):
            return f"{source.layer_names[i]}.{parts[2]}"
    return name


def weights_problem(
    names: Collection[str], source: PygModel, expected: Collection[str], per_channel: Collection[str] = ()
) -> str | None:
    """Why a PyG model's weights (their parameter ``names``) do not load as the described class's ``expected``
    names (``convs.0.lin.weight``, …), where that can be said in the user's terms: a module of their own whose
    convolutions have other names (what ``layer_names`` to give), or parameters that are no convolution's (a linear
    head, a normalisation). ``per_channel``: the names of one-dimensional ``weight`` tensors, a normalisation's scale
    (a linear layer's weight is a matrix). ``None``: something else (a shape; torch's own message says it)."""
    own = {_own(n, source, wrapped=_wrapped_norms(names, source)) for n in expected}
    given = set(names)
    if given == own:
        return None
    norms = _norms_problem(given - own, source, set(per_channel))
    if norms is not None:
        return norms
    rests = {n.split(".", 2)[2] for n in expected if n.count(".") >= 2}
    layers = int(source.args["num_layers"])
    layer_prefixes = [f"{n}." for n in source.layer_names or [f"convs.{i}" for i in range(layers)]]
    prefixes: dict[str, list[str]] = {}
    stray: list[str] = []
    foreign: list[str] = []
    for name in sorted(given - own):
        prefix = next((name[: -len(rest) - 1] for rest in rests if name.endswith(f".{rest}")), None)
        if any(name.startswith(p) for p in layer_prefixes):
            foreign.append(name)
        elif prefix is None or not prefix:
            stray.append(name)
        else:
            prefixes.setdefault(prefix, []).append(name)
    layout = f"{source.cls}(num_layers={layers})"
    if foreign:
        shown = _few(foreign)
        return (
            f"weights do not fit {layout}: {shown} {'is' if len(foreign) == 1 else 'are'} not a parameter of its "
            f"convolutions, which have {', '.join(sorted(rests))}: the weights of another class, or other arguments?"
        )
    if not stray and source.layer_names is None and len(prefixes) == layers and not given & own:
        order = sorted(prefixes, key=_natural)
        listed = ", ".join(json.dumps(p) for p in order)
        return (
            f"weights: the convolutions are named {', '.join(f'{p}.*' for p in order)} where {layout} names them "
            f'{", ".join(f"convs.{i}.*" for i in range(layers))}: for a module of your own, add "layer_names": '
            f"[{listed}] to the config, the attribute names of its convolutions in the order its forward applies "
            f"them ({act_words(source.args)} between them, nothing after the last but a log_softmax)"
        )
    stray = sorted(stray + [n for names_ in prefixes.values() for n in names_])
    linear = {n.rsplit(".", 1)[0] for n in stray}
    if len(linear) == 1 and {n.rsplit(".", 1)[1] for n in stray} == {"weight", "bias"} and "jk" not in source.args:
        head = linear.pop()
        named = "" if head == "lin" else f' and "head_name": "{head}"'
        return (
            f"weights: {', '.join(stray)} are no convolution's parameters in {layout}, whose logits are its last "
            f"convolution's output: if {head} is a linear classifier applied after the last convolution's "
            f'{act_words(source.args)}, add "jk": "last" to args{named}'
            + ("" if source.layer_names else "; a module of your own names its convolutions in layer_names")
        )
    if stray:
        shown = _few(stray)
        return (
            f"weights: {shown} {'is' if len(stray) == 1 else 'are'} no convolution's parameter{'s' * (len(stray) > 1)}"
            f" in {layout}, whose logits are its last convolution's output: a layer between the convolutions (a"
            " normalisation) is not part of the audited model; a linear classifier after the last convolution's"
            ' activation and dropout is, with "jk": "last" in args (and "head_name" where it is not named lin)'
            + ("" if source.layer_names else "; a module of your own names its convolutions in layer_names")
        )
    missing = sorted(own - given)
    if missing:
        shown = _few(missing)
        return f"weights: {shown} missing for {layout} (given: {', '.join(sorted(given)[:6])})"
    return None


def _norms_problem(unknown: set[str], source: PygModel, per_channel: set[str]) -> str | None:
    """Where weights the description does not name hold normalisations, what to give: batch normalisations (their
    running statistics) or layer normalisations (a scale of one value per channel, ``per_channel``, without them);
    ``None`` otherwise."""
    batch = {n.removesuffix(".running_mean").removesuffix(".module") for n in unknown if n.endswith(".running_mean")}
    layer = {n.removesuffix(".weight") for n in unknown & per_channel} - batch - {f"{p}.module" for p in batch}
    found = sorted(batch | layer, key=_natural)
    if not found:
        return None
    shown, listed = ", ".join(f"{p}.*" for p in found), ", ".join(map(json.dumps, found))
    if source.cls == "GIN":  # said here, not as what to add: a GIN's norm is refused (pyg._EXTRA)
        return (
            f"weights: {shown} {'is a normalisation' if len(found) == 1 else 'are normalisations'}, which a GIN "
            "audited here does not have: its layers' MLPs are read as PyG's GIN builds them without a norm (Linear, "
            "the activation, Linear); a normalisation inside them, or after them, is another model"
        )
    own = found != [f"norms.{i}" for i in range(len(found))]
    if source.args.get("norm") is None:
        named = (
            f' and "norm_names": [{listed}] to the config, the attribute names of its normalisations in the order its '
            "forward applies them (one after each convolution but the last)"
            if own
            else ""
        )
        if not batch:
            what = "is a layer normalisation" if len(found) == 1 else "are layer normalisations"
            return (
                f"weights: {shown} {what} (a scale of one value per channel, no running statistics) the config does "
                "not describe: where each normalises every node's row on its own (torch.nn.LayerNorm, or PyG's with "
                'mode="node"), add "norm": "layer_norm" and "norm_kwargs": {"mode": "node"} to args' + named
            )
        what = "is a batch normalisation" if len(found) == 1 else "are batch normalisations"
        return (
            f"weights: {shown} {what} (running_mean, running_var) the config does not describe: add "
            f'"norm": "batch_norm" to args{named}'
        )
    if own and source.norm_names is None:
        return (
            f"weights: the normalisations are named {shown} where {source.cls}(norm=...) names them norms.0.*, …: for "
            f'a module of your own, add "norm_names": [{listed}] to the config'
        )
    return None


def heads_problem(state: dict[str, Tensor], source: PygModel) -> str | None:
    """Where a GAT's last layer (its weights under the project's names, :func:`bind_state_dict`) has another number
    of heads than the description gives it, what ``last_heads`` to give; ``None`` otherwise."""
    if source.cls != "GAT":
        return None
    layers, out = int(source.args["num_layers"]), int(source.args["out_channels"])
    weight = state.get(f"convs.{layers - 1}.lin.weight")
    expected = source.last_heads or int(source.args.get("heads", 1))
    if weight is None or weight.ndim != 2 or weight.shape[0] % out or weight.shape[0] // out == expected:
        return None
    found = weight.shape[0] // out
    layer = source.layer_names[-1] if source.layer_names else f"convs.{layers - 1}"
    return (
        f"weights: the last layer ({layer}) has {found} head{'s' * (found > 1)} where the config gives it {expected} "
        f"({'last_heads' if source.last_heads else 'heads'}): a GAT whose last layer has its own number of heads, "
        f'averaged (GATConv(..., heads={found}, concat=False)), is described with "last_heads": {found}'
    )


def act_words(args: dict[str, object]) -> str:
    """What comes after a convolution in a PyG model's forward: ``"relu and dropout"``; ``"dropout"`` with no
    activation (``act`` null)."""
    act = args.get("act")
    return "dropout" if act is None else f"{act} and dropout"


def _few(names: list[str]) -> str:
    """Up to four names, and how many more."""
    return ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")


def _natural(name: str) -> list[tuple[int, str]]:
    """``conv2`` before ``conv10``."""
    return [(int(part), "") if part.isdigit() else (-1, part) for part in re.split(r"(\d+)", name)]
