"""A debiasing budget that is a count is at most the training set: more is refused naming ``budgets`` (it was cut to
the training set, so ``1e20`` ran as "delete every training node"), by the library before training and by the
command line as its one-line error."""

from __future__ import annotations

import pytest

from bind_core.cli import main
from bind_core.data.datasets import synthetic
from bind_core.debiasing.nodesets import resolve_budget
from bind_core.errors import ConfigError
from bind_core.pipeline.audit import run_audit
from bind_core.pipeline.config import AuditConfig


def test_a_count_over_the_training_set_is_refused() -> None:
    assert resolve_budget(149, 149) == 149 and resolve_budget(0.1, 149) == 15
    with pytest.raises(ConfigError, match=r"budgets: 1e\+20 is more than the 149 training nodes"):
        resolve_budget(1e20, 149)


def test_the_audit_refuses_it_before_training() -> None:
    seen: list[str] = []
    with pytest.raises(ConfigError, match="budgets: 1e\\+06 is more than the"):
        run_audit(synthetic(60, seed=0), AuditConfig(budgets=(0.1, 1e6)), progress=lambda s, f: seen.append(s))
    assert seen == []  # nothing ran
    skipped = AuditConfig(budgets=(1e6,), stages=("training", "metrics"), bootstrap=0)
    assert run_audit(synthetic(60, seed=0), skipped).debiasing is None  # no debiasing stage: the budgets are not read


def test_the_command_says_it_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--synthetic", "--synthetic-nodes", "60", "--budgets", "1e20", "--quiet"]) == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith("bind-audit run: error: budgets: 1e+20 is more than the") and "training nodes" in line
