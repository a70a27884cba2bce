"""``epochs``: 0 to ``MAX_EPOCHS`` in the command line, the library and the service alike; 0 (no Adam epoch) trains
with the polish alone, and is refused where the polish does not run (the model would be audited untrained)."""

from __future__ import annotations

import pytest

from bind_core.cli import main
from bind_core.data.datasets import synthetic
from bind_core.errors import ConfigError
from bind_core.models.gnn import ModelConfig
from bind_core.pipeline.config import AuditConfig
from bind_core.training.fit import TrainConfig, train
from bind_core.training.settings import MAX_EPOCHS, UNTRAINED

PREFIX = "bind-audit run: error: "
FAST = ["--synthetic", "--synthetic-nodes", "60", "--skip", "influence,debiasing,validation", "--bootstrap", "0"]


def test_zero_epochs_trains_with_the_polish_alone() -> None:
    trained = train(synthetic(60, seed=0), TrainConfig(epochs=0))  # a one-layer GCN: polished by default
    assert trained.history is not None and trained.history.epochs == 0
    assert trained.stationarity is not None and trained.stationarity.polished


def test_zero_epochs_without_the_polish_is_refused() -> None:
    with pytest.raises(ConfigError, match="untrained"):
        TrainConfig(epochs=0, polish=False)
    with pytest.raises(ConfigError, match="untrained"):  # a two-layer GCN is not polished unless asked
        train(synthetic(60, seed=0), TrainConfig(epochs=0), ModelConfig(layers=2))


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--epochs", "0", "--polish", "off"], UNTRAINED),  # ran and exited 0 auditing untrained weights
        (["--epochs", "0", "--layers", "2"], UNTRAINED),
        (["--epochs", str(MAX_EPOCHS + 1)], f"epochs: {MAX_EPOCHS + 1} must be between 0 (the polish alone) and"),
    ],
)
def test_the_command_refuses_what_the_service_refuses(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*FAST, "--quiet", *argv]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith(PREFIX + message)


def test_the_help_says_what_zero_means(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "0: none, the polish alone trains the model" in " ".join(capsys.readouterr().out.split())


def test_zero_epochs_has_no_adam_retraining_either() -> None:
    with pytest.raises(ConfigError, match="debias_retrain: adam"):  # failed in the debiasing stage, after training
        AuditConfig.from_dict({"training": {"epochs": 0}, "debias_retrain": "adam"})
