"""How the debiasing stage retrained (``AuditConfig.debias_retrain``, each debiasing row's and the edge debiasing's
``retrain``), in the words the report and its readers use: a before/after comparison means what it says only when
one knows whether the retrained models were polished to a stationary point or trained as a user trains them."""

from __future__ import annotations

__all__ = ["RETRAINING", "retraining"]

RETRAINING = {
    "audit": "retrained as the audit trains (Adam, then the polish)",
    "adam": "retrained with Adam alone, stopping at the best validation epoch, as a user would train",
}
"""``retrain`` → the phrase for it."""


def retraining(kind: object) -> str | None:
    """The phrase for ``kind`` (a row's ``retrain``); ``None`` for an audit stored before the setting existed (it
    retrained as the audit trains, but the document does not say so) or an unknown value."""
    return RETRAINING.get(kind) if isinstance(kind, str) else None
