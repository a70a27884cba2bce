"""How the debiasing stage retrained (``AuditConfig.debias_retrain``, each debiasing row's and the edge debiasing's
``retrain``), in the words the report and its readers use: a before/after comparison means what it says only when
one knows whether the retrained models were polished to a stationary point or trained as a user trains them."""

from __future__ import annotations

from bind_core.debiasing.records import RetrainRecipe

__all__ = ["RETRAINING", "recipe_text", "retraining"]

RETRAINING = {
    "audit": "retrained as the audited model was trained",
    "adam": "retrained with Adam alone, stopping at the best validation epoch, as a user would train",
}
"""``retrain`` → the phrase for it."""


def retraining(kind: object) -> str | None:
    """The phrase for ``kind`` (a row's ``retrain``); ``None`` for an audit stored before the setting existed (it
    retrained as the audit trains, but the document does not say so) or an unknown value."""
    return RETRAINING.get(kind) if isinstance(kind, str) else None


def recipe_text(recipe: RetrainRecipe) -> str:
    """A retraining recipe in words: the optimizer, its settings and whether the polish followed (it does only where
    the recipe has it: a model the audit trains with one layer, not a deeper one or a supplied model)."""
    stop = f", early stopping after {recipe.patience} epochs" if recipe.patience else ""
    best = recipe.keep == "best_val" or recipe.patience > 0  # early stopping keeps the best epoch
    kept = "the best validation epoch's weights kept" if best else "the last epoch's weights kept"
    polish = "then the polish" if recipe.polish else "no polish"
    epochs = f"up to {recipe.epochs} epochs{stop}" if recipe.patience else f"{recipe.epochs} epochs"
    return f"{recipe.optimizer} lr {recipe.lr:g}, weight decay {recipe.weight_decay:g}, {epochs}, {kept}, {polish}"
