"""``bind-audit run --table FILE --edges FILE ...``: a user's own files audited in one command."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import quirk_files as q

from bind_core.cli import main
from bind_core.data.datasets import save_npz, synthetic

FAST = ["--epochs", "5", "--skip", "influence,debiasing,validation", "--bootstrap", "0", "--quiet"]


def _run(capsys: pytest.CaptureFixture[str], tmp_path: Path, *args: str) -> tuple[int, dict, str]:
    out = tmp_path / "audit.json"
    code = main([*args, *FAST, "--json", str(out)])
    captured = capsys.readouterr()
    return code, (json.loads(out.read_text()) if code == 0 else {}), captured.err


def _table_args(nodes: Path, edges: Path, *extra: str) -> list[str]:
    return ["--table", str(nodes), "--edges", str(edges), "--label", "good", "--sensitive", "gender",
            "--node-id", "id", *extra]  # fmt: skip


def test_a_benchmark_style_table_audits_in_one_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, doc, err = _run(capsys, tmp_path, *_table_args(*q.text_feature(tmp_path)))
    assert code == 0, err
    assert (doc["graph"]["name"], doc["graph"]["nodes"], doc["graph"]["edges"]) == ("people", q.N, q.N)
    assert doc["graph"]["features"] == 13 and doc["ingest"]["encoded"] == {"purpose": q.PURPOSES}
    assert "read: column 'purpose' one-hot encoded into 10 feature columns" in err
    assert doc["metrics"]["test"]["accuracy"] is not None


@pytest.mark.heavy  # 18 s here
def test_quirks_through_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("big", "sentinel", "dangling", "extra", "gz", "empty", "age", "dupes"):
        (tmp_path / name).mkdir()
    code, doc, err = _run(capsys, tmp_path, *_table_args(*q.big_ids(tmp_path / "big")))
    assert code == 0, err
    code, doc, err = _run(capsys, tmp_path, *_table_args(*q.sentinel_label(tmp_path / "sentinel"), "--unlabeled", "-1"))
    assert code == 0, err
    assert doc["graph"]["unlabeled"] == 8 and doc["graph"]["classes"] == 2 and doc["ingest"]["unlabeled"] == 8
    dangling = q.dangling_edges(tmp_path / "dangling")
    code, _, err = _run(capsys, tmp_path, *_table_args(*dangling))
    assert code == 2
    assert err.strip() == (
        "bind-audit run: error: --edges: edges.csv, column 'src/dst': node ids absent from the node table's column "
        "'id' in 2 row(s): row 3 ('9999'), row 5 ('8888'); to drop such edges, pass --on-unknown-nodes drop"
    )
    code, doc, err = _run(capsys, tmp_path, *_table_args(*dangling, "--on-unknown-nodes", "drop"))
    assert code == 0 and doc["ingest"]["dropped_edges"] == 2 and doc["ingest"]["unknown_ids"] == ["9999", "8888"]
    code, doc, err = _run(capsys, tmp_path, *_table_args(*q.extra_edge_columns(tmp_path / "extra")))
    assert code == 0 and doc["ingest"]["ignored_edge_columns"] == ["weight", "timestamp"]
    code, doc, err = _run(capsys, tmp_path, *_table_args(*q.gzipped(tmp_path / "gz")))
    assert code == 0 and doc["graph"]["edges"] == q.N
    empty = q.empty_edges(tmp_path / "empty")
    code, _, err = _run(capsys, tmp_path, *_table_args(*empty))
    assert code == 2 and "error: --edges: edges.csv: it holds no edges" in err and "Pass --allow-no-edges to" in err
    code, doc, err = _run(capsys, tmp_path, *_table_args(*empty, "--allow-no-edges"))
    assert code == 0 and doc["graph"]["edges"] == 0
    assert any("the graph has no edges" in w for w in doc["warnings"])
    age = q.continuous_sensitive(tmp_path / "age")
    code, _, err = _run(capsys, tmp_path, *_table_args(*age)[:-4], "--node-id", "id", "--sensitive", "age")
    assert code == 2 and "column 'age' is numeric with 40 distinct values" in err
    args = [*_table_args(*age)[:-4], "--node-id", "id", "--sensitive", "age", "--sensitive-bins", "age>=30"]
    code, doc, err = _run(capsys, tmp_path, *args)
    assert code == 0, err
    assert doc["graph"]["group_names"] == ["age<30", "age>=30"]
    code, doc, err = _run(capsys, tmp_path, *_table_args(*q.near_duplicate_groups(tmp_path / "dupes")))
    assert code == 0 and doc["graph"]["group_names"] == ["F", "F ", "M"]


def test_features_split_and_a_text_column_over_the_cap(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = q.people()
    table["part"] = np.where(np.arange(q.N) < 20, "train", np.where(np.arange(q.N) < 30, "val", "test"))
    nodes, edges = q.write(tmp_path, table, q.ring(table["id"].astype(str).tolist()))
    code, _, err = _run(capsys, tmp_path, *_table_args(nodes, edges, "--max-categories", "5"))
    assert code == 2 and "column 'purpose' holds text with 10 distinct values" in err
    args = _table_args(nodes, edges, "--features", "amount,married", "--split", "part", "--name", "mine")
    code, doc, err = _run(capsys, tmp_path, *args)
    assert code == 0, err
    assert (doc["graph"]["name"], doc["graph"]["features"], doc["graph"]["train"]) == ("mine", 2, 20)


def test_npz_and_option_checks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    save_npz(synthetic(200, seed=3), tmp_path / "g.npz")
    code, doc, err = _run(capsys, tmp_path, "--npz", str(tmp_path / "g.npz"))
    assert code == 0 and doc["graph"]["nodes"] == 200
    code, _, err = _run(capsys, tmp_path, "--synthetic", "--label", "y")
    assert code == 2 and "--label applies only to --table" in err
    code, _, err = _run(capsys, tmp_path, "--table", str(tmp_path / "people.csv"), "--label", "good")
    assert code == 2 and "--table needs --edges, --sensitive" in err


def test_nodes_is_a_deprecated_alias_of_synthetic_nodes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, doc, err = _run(capsys, tmp_path, "--synthetic", "--nodes", "150")
    assert code == 0 and doc["graph"]["nodes"] == 150
    assert "warning: --nodes is deprecated, use --synthetic-nodes" in err
    code, doc, err = _run(capsys, tmp_path, "--synthetic", "--synthetic-nodes", "160")
    assert code == 0 and doc["graph"]["nodes"] == 160 and "deprecated" not in err


def test_benchmark_layouts_audit_with_only_label_sensitive_and_node_id(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """German credit (text columns, a -1/1 label, savetxt row positions) and Pokec (user ids, a whitespace
    relationship file naming users absent from the table, -1 labels), each in one command."""
    rng = np.random.default_rng(1)
    n = 80
    german = pd.DataFrame(
        {
            "Gender": np.where(np.arange(n) % 2 == 0, "Female", "Male"),
            "PurposeOfLoan": rng.choice(["Business", "Education", "NewCar", "UsedCar", "Other"], n),
            "LoanAmount": rng.integers(500, 10_000, n),
            "GoodCustomer": np.where(np.arange(n) % 4 < 2, 1, -1),
        }
    )
    german.to_csv(tmp_path / "german.csv", index=False)
    np.savetxt(tmp_path / "german_edges.txt", np.array([(i, (i + 1) % n) for i in range(n)], dtype=np.float64))
    args = ["--table", str(tmp_path / "german.csv"), "--edges", str(tmp_path / "german_edges.txt")]
    code, doc, err = _run(capsys, tmp_path, *args, "--label", "GoodCustomer", "--sensitive", "Gender")
    assert code == 0, err
    assert (doc["graph"]["nodes"], doc["graph"]["edges"], doc["graph"]["classes"]) == (n, n, 2)

    users = 9_000_000_000 + np.arange(n) * 11
    pokec = pd.DataFrame(
        {
            "user_id": users,
            "region": np.arange(n) % 2,
            "completion_percentage": rng.integers(0, 100, n),
            "I_am_working_in_field": np.where(np.arange(n) % 10 == 9, -1, np.where(np.arange(n) % 4 < 2, 1, 0)),
        }
    )
    pokec.to_csv(tmp_path / "region_job.csv", index=False)
    pairs = [f"{users[i]}\t{users[(i + 1) % n]}" for i in range(n)] + [f"{users[0]}\t12345"]
    (tmp_path / "region_job_relationship.txt").write_text("\n".join(pairs) + "\n")
    args = ["--table", str(tmp_path / "region_job.csv"), "--edges", str(tmp_path / "region_job_relationship.txt")]
    args += ["--label", "I_am_working_in_field", "--sensitive", "region", "--node-id", "user_id"]
    code, _, err = _run(capsys, tmp_path, *args)
    assert code == 2 and "row 81 ('12345')" in err and "--on-unknown-nodes drop" in err
    code, doc, err = _run(capsys, tmp_path, *args, "--on-unknown-nodes", "drop")
    assert code == 0, err
    assert doc["graph"]["classes"] == 3 and "pass --unlabeled=-1" in err  # the hint, on the read: lines, in flags
    code, doc, err = _run(capsys, tmp_path, *args, "--on-unknown-nodes", "drop", "--unlabeled", "-1")
    assert code == 0, err
    assert (doc["graph"]["classes"], doc["graph"]["unlabeled"], doc["ingest"]["dropped_edges"]) == (2, 8, 1)
