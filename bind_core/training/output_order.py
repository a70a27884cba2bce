"""A supplied model's output columns against the label's classes: put in the graph's class order when the config says
which label value each output stands for (``classes``), and checked against the training labels when it does not.

The audit numbers a label's values in sorted order (``approved`` class 0, ``denied`` class 1). A model trained
elsewhere may have coded them otherwise (``approved`` as 1); read in the audit's order, its every prediction is the
other class, and every figure and the verdict are inverted. With ``classes`` the outputs are reordered exactly
(:func:`reorder_outputs`: the last layer's output rows permuted, or for one logit negated: the same function of the
inputs, its columns in another order). Without it, :func:`check_output_order` asks whether the model's scores on its
own labelled training nodes rank the classes *below* chance beyond doubt, which a model trained on those labels in
the order it is read does not do: for two classes a one-sided Mann-Whitney test of the AUC against 0.5, for more
classes a one-sided binomial test of the accuracy against the accuracy of predictions independent of the labels
(``Σ_k share_k · predicted share_k``). Either at ``p <`` :data:`ORDER_P` is reported as a warning and in the verdict.
"""

# ruff: noqa: RUF009  (key() and open_keys() return dataclasses.field(...): fields with metadata, not shared defaults)

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from scipy.optimize import linear_sum_assignment
from scipy.stats import binom, mannwhitneyu
from torch import Tensor, nn

from bind_core.codec import key, open_keys
from bind_core.data.graph import Graph
from bind_core.errors import ConfigError
from bind_core.models.gnn import GNN, ActivatedHead

ORDER_P = 1e-3
"""The one-sided p-value below which a model's training-node scores are taken to rank the classes below chance."""

REORDER_TOLERANCE = 1e-9
"""The largest difference (relative to ``max(1, |logit|)``) between the reordered model's logits and the original
ones in the new order that :func:`reorder_outputs` accepts (float64)."""


@dataclass(kw_only=True)
class OutputOrder:
    """A supplied model's scores on its labelled training nodes against chance (:func:`check_output_order`)."""

    statistic: str = key("string: auc (two classes: the AUC of the second class's probability) or accuracy")
    value: float | None = key("number: the statistic on the labelled training nodes", optional=True)
    chance: float | None = key(
        "number: its value by chance (0.5 for the AUC; for the accuracy, that of predictions independent of the "
        "labels)",
        optional=True,
    )
    p_value: float | None = key(
        "number: one-sided p-value of the statistic being this far below chance (Mann-Whitney for the AUC, "
        "binomial for the accuracy)",
        optional=True,
    )
    nodes: int = key("integer: labelled training nodes scored")
    below_chance: bool = key("boolean: below chance beyond doubt (p < 0.001): the outputs may be in another order")
    read_as: list[str] = key("strings: the label value each output is read as, output 0 first")
    likely: list[str] | None = key(
        "strings: with below_chance, the reading that fits the training labels best, output 0 first (the classes "
        "to give the model config if it is the right one)",
        optional=True,
    )
    advice: str | None = key("string: with below_chance, how the outputs are read and what to give", optional=True)
    text: str | None = key("string: with below_chance, the warning", optional=True)
    extra: dict[str, Any] = open_keys("other figures of the check")


def _last_layer(module: GNN) -> tuple[nn.Module, list[tuple[str, int, int]]]:
    """The layer that outputs the logits and, for each of its parameters that the outputs run along, its name, the
    axis the outputs run along, and how many output blocks (GAT's heads) that axis holds."""
    if isinstance(module.head, nn.Linear):
        return module.head, [("weight", 0, 1), ("bias", 0, 1)]
    if isinstance(module.head, ActivatedHead):
        return module.head.lin, [("weight", 0, 1), ("bias", 0, 1)]
    conv = module.convs[-1]
    arch = module.config.arch
    if arch == "gcn":
        return conv, [("lin.weight", 0, 1), ("bias", 0, 1)]
    if arch == "sage":
        return conv, [("lin_l.weight", 0, 1), ("lin_l.bias", 0, 1), ("lin_r.weight", 0, 1)]
    if arch == "gin":
        return conv, [("nn.2.weight", 0, 1), ("nn.2.bias", 0, 1)]
    heads = int(getattr(conv, "heads", module.config.heads))  # the last layer's own (last_heads)
    residual = [("res.weight", 0, 1)] if module.config.residual else []  # the heads' mean's width
    if module.config.v2:
        lins = ["lin_l"] if module.config.share_weights else ["lin_l", "lin_r"]
        mapped = [(f"{lin}.{p}", 0, heads) for lin in lins for p in ("weight", "bias")]
        return conv, [*mapped, ("att", -1, 1), ("bias", 0, 1), *residual]
    return conv, [("lin.weight", 0, heads), ("att_src", -1, 1), ("att_dst", -1, 1), ("bias", 0, 1), *residual]


@torch.no_grad()
def reorder_outputs(module: GNN, order: Sequence[int], graph: Graph) -> None:
    """Put ``module``'s outputs in another order, in place: output ``k`` becomes the former output ``order[k]``; for
    one logit (two classes) ``order == [1, 0]`` negates it. The same model, its columns reordered: checked on
    ``graph`` to :data:`REORDER_TOLERANCE`.

    Raises:
        ConfigError: the reordered model's logits are not the former ones reordered (never expected).
    """
    order = list(order)
    if order == sorted(order):
        return
    module.eval()
    before = module(module.prepare(graph)).double()
    layer, parameters = _last_layer(module)
    named = dict(layer.named_parameters())
    outputs = before.shape[1]
    if outputs == 1 and module.config.v2 and layer is module.convs[-1]:
        raise ConfigError(
            "classes: a GATv2 whose last layer outputs one logit cannot be read with its output the other way round "
            "(its attention scores go through a leaky ReLU of the logit's own features, so no change of its weights "
            "negates the logit); give classes in the label's sorted order, with the model trained to match"
        )
    index = torch.tensor(order)
    for name, axis, blocks in parameters:
        p = named[name]
        if outputs == 1:
            p.neg_()
            continue
        ax = axis % p.dim()
        shape = list(p.shape)
        view = p.data.reshape(*shape[:ax], blocks, shape[ax] // blocks, *shape[ax + 1 :])
        p.data.copy_(view.index_select(ax + 1, index.to(p.device)).reshape(shape))
    after = module(module.prepare(graph)).double()
    expected = -before if outputs == 1 else before[:, order]
    difference = float(((after - expected).abs() / expected.abs().clamp(min=1.0)).max())
    if not difference <= REORDER_TOLERANCE:
        raise ConfigError(f"classes: the model's outputs could not be reordered exactly (difference {difference:.2e})")


def check_output_order(
    proba: Tensor, graph: Graph, *, outputs: int, classes: Sequence[str] | None = None
) -> OutputOrder:
    """Whether a model's predicted probabilities (``[n, C]``, every node, in the graph's class order) rank the
    classes of its labelled training nodes below chance beyond doubt (see the module's docstring).

    Args:
        proba: the model's probabilities on every node.
        graph: the graph, with its labels and split.
        outputs: the model's logits (1: one logit for two classes).
        classes: the label value each of the model's own outputs stands for, as its config gave them (``proba``
            is then in the graph's order already); ``None``: not given, output ``k`` read as the graph's class
            ``k``.
    """
    train = graph.train_idx
    y = graph.y[train].long()
    scores = proba[train].double()
    names = list(graph.class_names or [str(c) for c in range(graph.num_classes)])
    count = int(train.numel())
    read_as = list(classes) if classes is not None else names
    k = scores.shape[1]
    if k == 2:
        positive, negative = scores[y == 1, 1].numpy(), scores[y == 0, 1].numpy()
        if len(positive) == 0 or len(negative) == 0:
            return OutputOrder(statistic="auc", nodes=count, below_chance=False, read_as=read_as)
        test = mannwhitneyu(positive, negative, alternative="less")
        value, chance, p_value = float(test.statistic) / (len(positive) * len(negative)), 0.5, float(test.pvalue)
        likely = names[::-1]
    else:
        predicted = scores.argmax(1)
        correct = int((predicted == y).sum())
        share = torch.bincount(y, minlength=k).double() / count
        predicted_share = torch.bincount(predicted, minlength=k).double() / count
        chance = float((share * predicted_share).sum())
        value = correct / count if count else float("nan")
        p_value = float(binom.cdf(correct, count, chance)) if count else 1.0
        confusion = torch.zeros(k, k)
        confusion.index_put_((predicted, y), torch.ones(count), accumulate=True)
        rows, columns = linear_sum_assignment(confusion.numpy(), maximize=True)
        matched = {int(r): int(c) for r, c in zip(rows, columns, strict=True)}
        likely = [names[matched[j]] for j in range(k)]
    below = value < chance and p_value < ORDER_P
    found = OutputOrder(
        statistic="auc" if k == 2 else "accuracy",
        value=value,
        chance=chance,
        p_value=p_value,
        nodes=count,
        below_chance=below,
        read_as=read_as,
    )
    if below:  # likely: in the graph's columns; said per output of the model as given
        found.likely = [likely[names.index(name)] for name in read_as]
        found.advice = _advice(graph.label_name, read_as, found.likely, outputs, classes is not None)
        found.text = _warning(found, graph.label_name)
    return found


def _advice(label: str, names: list[str], likely: list[str], outputs: int, classes_given: bool) -> str:
    """How the outputs are read, in the user's terms, and the ``classes`` that reads them the other way."""
    given = json.dumps({"classes": likely})[1:-1]
    if outputs == 1:
        reading = f"its logit read as the score of {label}={names[1]}"
        other = f"if it scores {label}={names[0]}, give the model config {given}"
    elif len(names) == 2:
        reading = f"output 1 read as {label}={names[1]} and output 0 as {label}={names[0]}"
        other = f"if output 1 means {label}={names[0]}, give the model config {given}"
    else:
        reading = "outputs " + ", ".join(f"{k} read as {label}={n}" for k, n in enumerate(names))
        other = f"if they mean {', '.join(likely)} (the reading that fits the training labels best), give {given}"
    source = (
        "as the config's classes say"
        if classes_given
        else "the label's values in sorted order, as no classes were given"
    )
    return f"{reading}, {source}; {other}"


def _warning(found: OutputOrder, label: str) -> str:
    """The warning of a model that ranks its training labels below chance."""
    what = "AUC" if found.statistic == "auc" else "accuracy"
    test = "one-sided Mann-Whitney" if found.statistic == "auc" else "one-sided binomial"
    return (
        f"the supplied model's outputs may be in another order than the label {label}'s classes: on its "
        f"{found.nodes} labelled training nodes its {what} is {found.value:.2f}, below chance ({found.chance:.2f}; "
        f"{test} p = {found.p_value:.1g}), where a model trained on these labels scores above it; so every figure "
        f"and the verdict may be inverted: {found.advice}"
    )
