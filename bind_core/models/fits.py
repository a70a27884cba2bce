"""Whether a model fits a graph: its input features and its outputs against the graph's features and the label's
classes. One check for every path that takes a model it did not train (``run_audit(model=...)``, ``bind-audit run
--model-weights``, the service's model upload), so that a model that cannot be run on the graph is refused with the
same sentence everywhere, before any forward pass fails deep inside torch.
"""

from __future__ import annotations

from collections.abc import Sequence

from bind_core.errors import ModelDoesNotFitError


def features_problem(in_dim: int, features: int) -> str | None:
    """Why a model taking ``in_dim`` input features cannot run on a graph of ``features``; ``None`` when it can.

    The likely cause is named: a model trained elsewhere usually took fewer columns than the table holds, most often
    because the sensitive column is kept as a feature unless the feature columns are chosen.
    """
    if in_dim == features:
        return None
    text = f"the model takes {in_dim} input features but the graph has {features}"
    if features > in_dim:
        more = features - in_dim
        kept = (
            "columns than the model was trained on are kept as features"
            if more > 1
            else ("column than the model was trained on is kept as a feature")
        )
        cause = f"{more} more {kept} (the sensitive column is one unless the feature columns are chosen)"
    else:
        cause = "the graph lacks columns the model was trained on"
    advice = (
        "choose the feature columns the model was trained on, in its order, with features= (bind-audit run "
        "--features, the API's features)"
    )
    return f"{text}: {cause}; {advice}"


def classes_problem(
    outputs: int, num_classes: int, classes: int, *, label: str | None = None, names: Sequence[str] = ()
) -> str | None:
    """Why a model with ``outputs`` logits for ``num_classes`` classes cannot be audited on a label of ``classes``;
    ``None`` when it can.

    Args:
        outputs: the model's logits (1 for two classes read through a sigmoid).
        num_classes: the classes they stand for.
        classes: the label's classes on the graph.
        label: the label column's name, where known.
        names: the label's values, where known.
    """
    if num_classes == classes:
        return None
    column = f"the label {label}" if label else "the label"
    values = f" ({', '.join(names)})" if names else ""
    logits = f"{outputs} output{'s' if outputs != 1 else ''}" + (" (one logit: 2 classes)" if outputs == 1 else "")
    return (
        f"the model has {logits} but {column} has {classes} classes{values}: it can only be audited on a label of "
        f"{num_classes}"
    )


def fit_problems(
    in_dim: int,
    outputs: int,
    num_classes: int,
    features: int,
    classes: int,
    *,
    label: str | None = None,
    names: Sequence[str] = (),
) -> list[tuple[str, str]]:
    """Every way a model does not fit a graph, as ``(field, message)``: ``in_dim`` (features) and ``num_classes``.

    Args:
        in_dim: the model's input features.
        outputs: its logits.
        num_classes: the classes its logits stand for.
        features: the graph's feature columns.
        classes: the label's classes.
        label: the label column's name, where known.
        names: the label's values, where known.

    Returns:
        The problems; empty when the model fits.
    """
    found = [
        ("in_dim", features_problem(in_dim, features)),
        ("num_classes", classes_problem(outputs, num_classes, classes, label=label, names=names)),
    ]
    return [(field, message) for field, message in found if message is not None]


def require_fit(
    in_dim: int,
    outputs: int,
    num_classes: int,
    features: int,
    classes: int,
    *,
    label: str | None = None,
    names: Sequence[str] = (),
) -> None:
    """Refuse a model that does not fit the graph (:func:`fit_problems`).

    Raises:
        ModelDoesNotFitError: naming the model's features or outputs and the graph's.
    """
    problems = fit_problems(in_dim, outputs, num_classes, features, classes, label=label, names=names)
    if problems:
        raise ModelDoesNotFitError(problems)


def read_classes(value: object, count: int) -> tuple[tuple[str, ...] | None, str | None]:
    """A model config's ``classes`` (the label value each output stands for, output 0 first), checked for its form:
    ``(classes, None)``, or ``(None, why not)``; ``(None, None)`` when none is given.

    Args:
        value: the config's ``classes``: a list of the label's values (strings; whole numbers are read as text).
        count: the classes the model's outputs stand for (2 for one logit).
    """
    if value is None:
        return None, None
    if not isinstance(value, list | tuple) or not all(
        (isinstance(v, str) and v != "") or (isinstance(v, int) and not isinstance(v, bool)) for v in value
    ):
        return None, "must be a list of the label's values, one per output (output 0 first)"
    names = tuple(str(v) for v in value)
    if len(set(names)) != len(names):
        return None, f"{list(names)} names a value twice"
    if len(names) != count:
        return None, f"{list(names)} names {len(names)} values but the model's outputs stand for {count} classes"
    return names, None


def class_order(classes: Sequence[str], names: Sequence[str], label: str | None = None) -> list[int]:
    """Where each of the graph's classes is among a model's outputs: ``order[k]`` is the output that stands for the
    graph's class ``k`` (the graph numbers a label's values in sorted order).

    Args:
        classes: the label value of each output, output 0 first (the model config's ``classes``).
        names: the graph's class names, class 0 first.
        label: the label column's name, for the message.

    Raises:
        ModelDoesNotFitError: a name is not one of the label's values, or the label has a value no output stands for.
    """
    column = f"the label {label}" if label else "the label"
    unknown = [c for c in classes if c not in names]
    if unknown:
        shown = ", ".join(repr(c) for c in unknown)
        raise ModelDoesNotFitError(
            [
                (
                    "classes",
                    f"{shown} {'is not a value' if len(unknown) == 1 else 'are not values'} of {column} "
                    f"({', '.join(names)})",
                )
            ]
        )
    missing = [n for n in names if n not in classes]
    if missing:
        raise ModelDoesNotFitError(
            [("classes", f"{list(classes)} leaves out {', '.join(repr(n) for n in missing)} of {column}")]
        )
    return [list(classes).index(n) for n in names]
