"""Whether a supplied model fits its own training nodes better than a constant would, on the inputs the audit gives it.

A model trained on this graph's training nodes predicts their labels better than the constant that predicts every
node the training labels' shares: its mean cross-entropy there is below the entropy of those shares, its accuracy
above the commonest label's share. One that does neither is fed inputs other than those it was trained on (features
scaled otherwise than in training, other columns or another order), was trained on another split, or was never
trained well; in the first two cases every figure of its audit describes its predictions on inputs it never saw.
And whatever its accuracy, a model trained with cross-entropy on these nodes fits them at least as well as guessing
every class alike (``ln C``), which is what its zero weights predict: the minimum of cross-entropy plus weight decay
is no worse than the zero weights' ``ln C``, and training starts near it from small weights. A mean cross-entropy above
``ln C`` says the same as doing no better than a constant, except where the model classifies its training nodes
clearly better than the commonest label (by more than :data:`CLEAR_Z` standard errors on its node count): its outputs
then carry their labels, and its cross-entropy is high because some of its probabilities are extreme and wrong
(*overconfident*: stopped before its probabilities fit, early stopping on a validation loss that had started far
above the guess, typically with raw feature values of large scale). A user's PyG GraphSAGE trained on Income's raw
table values with early stopping: mean cross-entropy 0.959 against 0.693 for the guess, yet 66.3% of its 1000
balanced training nodes right (50.0% for the commonest label, 10 standard errors above it) and 77.4% of its test
nodes; it is fed exactly what it was trained on, so calling its inputs wrong and withholding its verdict misled.
Accuracy alone does not tell the two apart everywhere: the same kind of GraphSAGE trained on standardised features
and fed the [-1, 1] scaling an upload gives classifies 73.9% of those training nodes right with a cross-entropy of
1.06 (seven other mismatches of scaling tried, GCN and GraphSAGE, fell to 49.8–50.2%, the commonest label's share). So
the exception holds only where the features are as they were given (the graph's reader scaled nothing): there the
audit changed nothing the model reads, and a model fed other inputs would be the user's own table given wrongly.
:func:`check_training_fit` measures all three; the audit warns where the model does no better than the constant by
both measures, or fits worse than the guess without classifying clearly better than the constant (``suspect``:
the verdict is withheld), and says apart that an overconfident model's probabilities fit worse than the guess (its
verdict stands). (A user's PyG GCN trained on Income's features scaled to [0, 1] and
audited on the table's own values: mean cross-entropy 543 against 0.519 for the constant, training accuracy 21.4%
against 78.6% for the commonest label, every test node predicted the rarer class. The same kind of model read on the
[-1, 1] scaling an upload gives by default: 2.54 against 0.693 for the guess, accuracy 78.7% against 78.6%, so no
better than the constant by accuracy alone, and 16 of 80 sampled deletions carried its weights beyond a quarter of
their norm, none on the inputs it was trained on (docs/METHOD.md, "Deletions that move far"). On the values it was
trained on, 0.407 and 82.6%, no warning.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from bind_core.codec import key
from bind_core.data.graph import Graph


@dataclass(kw_only=True)
class TrainingFit:
    """A supplied model's mean cross-entropy on its labelled training nodes against a constant's
    (:func:`check_training_fit`)."""

    loss: float | None = key("number: the model's mean cross-entropy on its labelled training nodes", optional=True)
    constant: float | None = key(
        "number: the mean cross-entropy of predicting every training node the training labels' shares (their entropy)",
        optional=True,
    )
    accuracy: float | None = key("number: the model's accuracy on them", optional=True)
    majority: float | None = key("number: the accuracy of predicting every node the commonest label", optional=True)
    nodes: int = key("integer: labelled training nodes scored")
    no_better: bool = key(
        "boolean: the model's loss is at least the constant's and its accuracy at most the commonest label's share: "
        "it fits its training nodes no better than a constant (fed other inputs than it was trained on, or "
        "untrained)"
    )
    guess: float | None = key(
        "number: the mean cross-entropy of guessing every class alike, ln C (what zero weights predict); absent in "
        "audits stored before it was measured",
        optional=True,
    )
    worse_than_guess: bool | None = key(
        "boolean: the model's loss is above the guess's: no model trained with cross-entropy on these nodes and "
        "inputs fits them that badly (fed other inputs than it was trained on, or stopped before it fit them), "
        "whatever its accuracy; absent in audits stored before it was measured",
        optional=True,
    )
    overconfident: bool | None = key(
        "boolean: worse than the guess by cross-entropy, but classifying its training nodes clearly better than the "
        "commonest label (more than 3 standard errors above its share), on features as they were given (not scaled "
        "when the graph was read): its outputs carry the labels and some of its probabilities are extreme and wrong; "
        "not suspect; absent in audits stored before it was measured",
        optional=True,
    )
    inputs_confirmed: bool | None = key(
        "boolean: the owner's outputs on this graph were given and the model as read gives them (supplied_model."
        "outputs): it is fed here what its owner feeds it, so a poor fit is not doubted as other inputs and the "
        "verdict stands; absent where no outputs were given",
        optional=True,
    )
    text: str | None = key("string: with no_better, worse_than_guess or overconfident, the warning", optional=True)

    @property
    def suspect(self) -> bool:
        """Whether the audit warns that the model's inputs may not be those it was trained on (and withholds its
        verdict): no better than a constant by both measures, or worse than the guess without classifying its
        training nodes clearly better than the commonest label."""
        return self.poor and not self.inputs_confirmed

    @property
    def poor(self) -> bool:
        """Whether it fits its training nodes no better than a constant, or worse than the guess without being
        overconfident, whatever its inputs (:attr:`suspect` where they are not confirmed)."""
        return self.no_better or (bool(self.worse_than_guess) and not self.overconfident)

    def baseline(self) -> tuple[str, float | None]:
        """What the model's loss is set against when it is :attr:`suspect`.

        Returns:
            ``("a constant", constant)`` where it does no better than the constant by both measures, else
            ``("guessing every class alike", guess)``.
        """
        return ("a constant", self.constant) if self.no_better else ("guessing every class alike", self.guess)


def check_training_fit(proba: Tensor, graph: Graph, *, inputs_confirmed: bool = False) -> TrainingFit:
    """The model's mean cross-entropy on the labelled training nodes against the constant predictor's.

    Args:
        proba: the model's probabilities on every node (``[n, C]``, in the graph's class order).
        graph: the graph, with its labels and split.
        inputs_confirmed: the owner's outputs on this graph matched the model as read
            (:func:`~bind_core.training.outputs.compare_outputs`): its inputs are not in doubt, on features scaled
            when the graph was read too, and a poor fit is said without doubting them.

    Returns:
        The :class:`TrainingFit`; ``no_better`` where the model's loss is at least the constant's and its accuracy at
        most the commonest label's share, ``worse_than_guess`` where its loss is above ``ln C``; with either, the
        warning.
    """
    train = graph.train_idx
    y = graph.y[train].long()
    count = int(train.numel())
    if count == 0:
        return TrainingFit(nodes=0, no_better=False)
    chosen = proba[train].double().gather(1, y.unsqueeze(1)).squeeze(1)
    loss = float(-torch.log(chosen.clamp_min(1e-300)).mean())
    shares = torch.bincount(y, minlength=proba.shape[1]).double() / count
    constant = float(-(shares[shares > 0] * shares[shares > 0].log()).sum())
    accuracy = float((proba[train].argmax(1) == y).double().mean())
    majority = float(shares.max())
    no_better = (not loss < constant or not math.isfinite(loss)) and accuracy <= majority
    guess = math.log(proba.shape[1])
    worse = not loss <= guess or not math.isfinite(loss)
    as_given = inputs_confirmed or not graph.feature_ranges
    overconfident = worse and not no_better and clearly_above(accuracy, majority, count) and as_given
    text = None
    if overconfident:
        text = _overconfident(count, loss, guess, accuracy, majority) + (
            _CONFIRMED_OVERCONFIDENT if inputs_confirmed else _OVERCONFIDENT_INPUTS
        )
    elif no_better or worse:
        text = (
            _no_better(count, loss, constant, accuracy, majority)
            if no_better
            else _worse_than_guess(count, loss, guess, accuracy, majority)
        ) + (_CONFIRMED if inputs_confirmed else _ADVICE)
    return TrainingFit(
        loss=loss,
        constant=constant,
        accuracy=accuracy,
        majority=majority,
        nodes=count,
        no_better=no_better,
        guess=guess,
        worse_than_guess=worse,
        overconfident=overconfident,
        inputs_confirmed=True if inputs_confirmed else None,
        text=text,
    )


CLEAR_Z = 3.0
"""How many standard errors above the commonest label's share a model's training accuracy must be to classify its
training nodes clearly better than a constant (one-sided, about 1 in 700 by chance alone)."""


def clearly_above(accuracy: float, majority: float, count: int) -> bool:
    """Whether ``accuracy`` on ``count`` nodes is above the commonest label's share ``majority`` by more than
    :data:`CLEAR_Z` binomial standard errors of that share."""
    if count <= 0 or not majority < 1.0:
        return False
    return accuracy - majority > CLEAR_Z * math.sqrt(majority * (1.0 - majority) / count)


_ADVICE = (
    ". If it fit them when it was trained, it is fed other inputs here than it was trained on (features scaled "
    "otherwise, e.g. to [0, 1] or standardised, or the table's own values; other feature columns or another order) or "
    "it was trained on another split, and every figure here describes it on inputs it never saw: give it the values "
    "and columns it was trained on (a table read with scale off, features= in its order)"
)


def _no_better(count: int, loss: float, constant: float, accuracy: float, majority: float) -> str:
    return (
        f"the model fits its own {count} training nodes no better than a constant would: mean cross-entropy "
        f"{loss:.3g} against {constant:.3g}, accuracy {accuracy:.1%} against {majority:.1%} for predicting every node "
        "the commonest label"
    )


def _worse_than_guess(count: int, loss: float, guess: float, accuracy: float, majority: float) -> str:
    return (
        f"the model fits its own {count} training nodes worse than guessing every class alike: mean cross-entropy "
        f"{loss:.3g} against {guess:.3g} for the guess (accuracy {accuracy:.1%}, {majority:.1%} for predicting every "
        "node the commonest label), where a model trained with cross-entropy on these nodes and inputs fits them at "
        "least as well as the guess its zero weights make, unless its training stopped within its first epochs (early "
        "stopping on a validation split whose classes are balanced otherwise than the training split's can keep one)"
    )


def _overconfident(count: int, loss: float, guess: float, accuracy: float, majority: float) -> str:
    return (
        f"the model's probabilities fit its own {count} training nodes worse than guessing every class alike (mean "
        f"cross-entropy {loss:.3g} against {guess:.3g}), although it classifies them clearly better than the "
        f"commonest label ({accuracy:.1%} against {majority:.1%}): its outputs carry their labels, and some of its "
        "probabilities are extreme and wrong (overconfident: stopped before its probabilities fit, as early stopping "
        "on a validation loss that started far above the guess leaves a model fed raw values of large scale). Its "
        "predicted labels, ΔSP and ΔEO are as it gives them; PDD reads those probabilities as they are"
    )


_OVERCONFIDENT_INPUTS = (
    ". If it fit its training nodes when it was trained, it is fed other inputs here than it was trained on"
)

_CONFIRMED_OVERCONFIDENT = (
    ". Its outputs on this graph were given and the model as read gives them: it is fed what its owner feeds it"
)

_CONFIRMED = (
    ". Its outputs on this graph were given and the model as read gives them, so it is fed what its owner feeds it: "
    "it was trained on another split than this graph's, or never fit these nodes; the figures describe it as it is"
)
