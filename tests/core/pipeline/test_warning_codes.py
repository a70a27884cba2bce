"""Each of an audit's warnings has a stable code beside its sentence (``results.warning_codes``): what a machine acts
on, where the sentences may be reworded."""

from __future__ import annotations

import ast
import pickle
import re
from pathlib import Path

import pytest

from bind_core import AuditConfig, ModelConfig, TrainConfig, run_audit, synthetic
from bind_core.pipeline import WARNING_CODES, Caveat, codes_of

ROOT = Path(__file__).resolve().parents[3] / "bind_core"


def test_a_caveat_is_its_sentence_with_a_code() -> None:
    said = Caveat("the model does no better than a constant", "training_fit")
    assert said == "the model does no better than a constant" and isinstance(said, str)
    assert said.code == "training_fit"
    again = pickle.loads(pickle.dumps(said))  # a forked child's results come back pickled
    assert again == said and again.code == "training_fit"
    assert codes_of([said, "a sentence from elsewhere"]) == ["training_fit", "other"]
    with pytest.raises(ValueError, match="unknown warning code"):
        Caveat("x", "no_such_code")


def test_an_audit_codes_every_warning_in_order() -> None:
    graph = synthetic(300)  # one group has few positive test nodes
    config = AuditConfig(
        model=ModelConfig(
            layers=2, hidden=8, activation="relu"
        ),  # a multi-layer ReLU model: the proximal question, kinks
        training=TrainConfig(epochs=1000),
        bootstrap=100,  # few resamples
        stages=("training", "metrics", "influence"),
    )
    result = run_audit(graph, config)
    results = result.to_dict()
    warnings, codes = results["warnings"], results["warning_codes"]
    assert len(codes) == len(warnings) >= 3
    assert all(type(w) is str for w in warnings)  # plain sentences in the results, as ever
    assert "other" not in codes and set(codes) <= set(WARNING_CODES)
    assert {"few_positives", "few_resamples", "proximal_question"} <= set(codes)
    by_code = dict(zip(codes, warnings, strict=True))
    assert "positive test nodes" in by_code["few_positives"] and "bootstrap resamples" in by_code["few_resamples"]
    assert [w.code for w in result.warnings()] == codes


def test_every_listed_code_is_written_somewhere_and_every_written_code_is_listed() -> None:
    """A code in the table that no code path writes is a promise nobody keeps; a literal outside it fails at once."""
    written: set[str] = set()
    for path in ROOT.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) in {"Caveat", "coded", "_add"}:
                code = (
                    node.args[1] if len(node.args) > 1 else None
                )  # Caveat(text, code), coded(texts, code), _add(out, code, text)
                if isinstance(code, ast.Constant) and code.value in WARNING_CODES:
                    written.add(code.value)
    assert written == set(WARNING_CODES) - {"other"}, set(WARNING_CODES) - written


def test_the_api_docs_list_every_code() -> None:
    text = (ROOT.parent / "docs" / "API.md").read_text(encoding="utf-8")
    table = text[text.index("**Warning codes.**") : text.index("The table is `bind_core.pipeline.WARNING_CODES`")]
    assert set(re.findall(r"^\| `([a-z_]+)` \|", table, re.M)) == set(WARNING_CODES)
