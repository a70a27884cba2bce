"""Ingestion errors say which parameter is at fault, the bad value apart, close column names, every bad cell of
a numeric column at once, and the options that fix them as :class:`~bind_core.errors.Option` s."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import quirk_files as q

from bind_core.data.datasets import ingest_files
from bind_core.data.datasets.features import LISTED
from bind_core.data.records import Imputation
from bind_core.errors import GraphValidationError, Message, Option

BASE = {"label": "good", "sensitive": "gender", "node_id": "id"}
ROWS = "(rows as a spreadsheet shows them, counted from 1 with the header as row 1)"


def _error(nodes: Path, edges: Path, **options: object) -> GraphValidationError:
    with pytest.raises(GraphValidationError) as info:
        ingest_files(nodes, edges, **(BASE | options))  # type: ignore[arg-type]
    return info.value


@pytest.mark.parametrize(
    ("options", "field", "value", "close"),
    [
        ({"label": "godo"}, "label", "godo", ("good",)),
        ({"sensitive": "Gender"}, "sensitive", "Gender", ("gender",)),
        ({"features": ["amount", "purpse"]}, "features", "purpse", ("purpose",)),
        ({"node_id": "ids"}, "node_id", "ids", ("id",)),
        ({"label": "outcome"}, "label", "outcome", ()),
    ],
)
def test_a_misspelled_column_names_the_option_its_value_and_the_close_columns(
    tmp_path: Path, options: dict[str, object], field: str, value: str, close: tuple[str, ...]
) -> None:
    err = _error(*q.text_feature(tmp_path), **options)
    assert (err.field, err.value, err.suggestions, err.file) == (field, value, close, "people.csv")
    guess = f"; did you mean {close[0]!r}?" if close else ""
    columns = "(columns: id, amount, purpose, married, gender, good)"
    assert str(err) == f"{field}: no column {value!r} in people.csv{guess} {columns}"
    assert err.details() == {"value": value, "file": "people.csv"} | ({"suggestions": list(close)} if close else {})


def test_a_numeric_column_with_stray_text_lists_every_bad_cell_at_once(tmp_path: Path) -> None:
    err = _error(*q.stray_text(tmp_path))
    assert str(err) == (
        "nodes: people.csv, column 'income' holds numbers but for 4 cell(s): row 5 ('unknown', missing), "
        f"row 9 ('', empty or NA), row 22 ('?', missing), row 32 ('12,5') {ROWS}; 3 missing (empty, or a "
        "missing-value token such as NA, n/a, null, -, ?, unknown), 1 stray text; correct the stray text, or leave "
        "the column out with features= (impute_missing=True treats the missing cells as missing: the column's "
        "median)"
    )
    assert (err.field, err.column, err.rows, err.values, err.count) == (
        "nodes", "income", (5, 9, 22, 32), ("unknown", "", "?", "12,5"), 4,
    )  # fmt: skip
    assert err.message.options() == (Option("features"), Option("impute_missing", True))


def test_impute_missing_reads_the_tokens_as_missing_but_not_the_stray_text(tmp_path: Path) -> None:
    nodes, edges = q.stray_text(tmp_path)
    err = _error(nodes, edges, impute_missing=True)
    assert (err.rows, err.values, err.count) == ((32,), ("12,5",), 1)
    assert "1 stray text" in str(err) and "missing" not in str(err).split("; ")[-1]
    (tmp_path / "clean").mkdir()
    nodes, edges = q.stray_text(tmp_path / "clean", stray=False)
    err = _error(nodes, edges)
    assert err.count == 3 and err.message.options() == (Option("features"), Option("impute_missing", True))
    ingested = ingest_files(nodes, edges, **BASE, impute_missing=True, scale=False)
    income = ingested.graph.x[:, ingested.graph.feature_names.index("income")].double()
    median = float(np.median([20000 + 250 * k for k in range(q.N) if k not in (3, 7, 20)]))
    assert income[[3, 7, 20]].tolist() == [median] * 3 and income[4].item() == 21000.0
    assert ingested.report.imputed["income"] == Imputation(
        rule="median", count=3, value=median, read_as_missing=["?", "unknown"]
    )
    assert any("(read as missing: '?', 'unknown')" in note for note in ingested.report.notes())


def test_the_listing_is_capped_and_counts_every_cell(tmp_path: Path) -> None:
    table = q.people()
    table["income"] = [str(20000 + 250 * k) if k % 8 == 0 else "unknown" for k in range(q.N)]
    paths = q.write(tmp_path, table, q.ring(table["id"].astype(str).tolist()))
    err = _error(*paths, features=["amount", "income"], max_categories=3)
    assert err.count == 35 and len(err.rows) == LISTED and err.rows[:2] == (3, 4)
    assert f"and {35 - LISTED} more" in str(err)


def test_a_few_numbers_and_a_token_under_the_cap_stay_categories(tmp_path: Path) -> None:
    """Under ``max_categories`` a text column is one-hot encoded as before, ``unknown`` a category of its own."""
    table = q.people()
    table["children"] = [str(k % 3) if k % 5 else "unknown" for k in range(q.N)]
    ingested = ingest_files(*q.write(tmp_path, table, q.ring(table["id"].astype(str).tolist())), **BASE)
    assert ingested.report.encoded["children"] == ["0", "1", "2", "unknown"]


def test_every_column_s_problems_come_in_one_error(tmp_path: Path) -> None:
    table = q.people()
    table["income"] = [str(20000 + 250 * k) if k != 6 else "unknown" for k in range(q.N)]
    table.loc[[2, 9], "amount"] = np.nan
    table["purpose"] = [f"p{k}" for k in range(q.N)]
    err = _error(*q.write(tmp_path, table, q.ring(table["id"].astype(str).tolist())))
    assert [(p.field, p.column, p.rows) for p in err.problems] == [
        ("nodes", "amount", (4, 11)), ("features", "purpose", ()), ("nodes", "income", (8,)),
    ]  # fmt: skip
    assert str(err).startswith("nodes: 3 problems: (1) people.csv, column 'amount': missing values in 2 row(s)")
    assert "; (2) people.csv, column 'purpose' holds text with 40 distinct values" in str(err)
    assert "; (3) people.csv, column 'income' holds numbers but for 1 cell(s): row 8 ('unknown', missing)" in str(err)


def test_a_label_with_three_classes_says_what_the_parity_metrics_mean(tmp_path: Path) -> None:
    table = q.people()
    table["good"] = np.array(["no", "maybe", "yes", "yes"])[np.arange(q.N) % 4]
    ingested = ingest_files(*q.write(tmp_path, table, q.ring(table["id"].astype(str).tolist())), **BASE)
    assert ingested.graph.num_classes == 3
    assert ingested.report.notes()[-1] == (
        "label column 'good' has 3 classes ('maybe', 'no', 'yes'): the audit treats it as a 3-class problem, where "
        "ΔSP is the mean over the classes c of the gap between groups in P(ŷ=c) and ΔEO the mean over c of the gap "
        "in P(ŷ=c | y=c) (each class's true-positive rate); if the question is yes or no, map the values to two "
        "classes first"
    )
    assert not any("classes (" in note for note in ingest_files(*q.text_feature(tmp_path), **BASE).report.notes())


def test_a_message_names_its_options_in_each_caller_s_terms() -> None:
    message = Message.of("pass ", Option("on_unknown_nodes", "drop"), " or ", Option("allow_no_edges", True))
    err = GraphValidationError("edges", Message.of("edges.csv {x}: ", message), file="edges.csv")
    assert str(err) == "edges: edges.csv {x}: pass on_unknown_nodes='drop' or allow_no_edges=True"
    assert err.text(lambda o: f"<{o.name}>") == "edges.csv {x}: pass <on_unknown_nodes> or <allow_no_edges>"
    assert GraphValidationError("label", "plain").text() == "plain"


def test_a_binning_rule_for_a_misspelled_column_gets_did_you_mean(tmp_path: Path) -> None:
    err = _error(*q.continuous_sensitive(tmp_path), sensitive="age", sensitive_bins="agee>=30")
    assert (err.field, err.value, err.suggestions) == ("sensitive_bins", "agee", ("age",))
    assert (
        str(err)
        == "sensitive_bins: binning rule(s) for ['agee'], which are not sensitive columns ['age']; did you mean 'age'?"
    )


def test_a_sensitive_column_s_bad_cells_come_with_the_features_problems(tmp_path: Path) -> None:
    table = q.people()
    table.loc[4, "gender"] = None
    table.loc[[2, 9], "amount"] = np.nan
    err = _error(*q.write(tmp_path, table, q.ring(table["id"].astype(str).tolist())))
    assert [(p.field, p.column, p.rows) for p in err.problems] == [
        ("nodes", "gender", (6,)),
        ("nodes", "amount", (4, 11)),
    ]
    table.loc[[2, 9], "amount"] = 1.0
    (tmp_path / "one").mkdir()
    err = _error(*q.write(tmp_path / "one", table, q.ring(table["id"].astype(str).tolist())))
    assert (err.problems, err.column, err.rows) == ((), "gender", (6,))
