"""``bind-audit run`` says bind_core's errors and notes in its own terms: the flag at fault leads the message,
and every option it advises is a flag the command accepts, one that fixes the input when followed."""

from __future__ import annotations

import inspect
import re
import shlex
from pathlib import Path

import pytest
import quirk_files as q
from advised_options import advised_options

from bind_core import cli
from bind_core.cli import build_parser, main
from bind_core.cli_errors import FLAGS, flag
from bind_core.data.datasets import ingest_files
from bind_core.errors import Option

PREFIX = "bind-audit run: error: "
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z-]*")
API_TERMS = re.compile(
    r"\b(on_unknown_nodes|allow_no_edges|impute_missing|max_categories|sensitive_bins|node_id)\b|=True"
)


def _accepted() -> set[str]:
    return {s for action in build_parser()._actions for s in action.option_strings}


def _table_args(nodes: Path, edges: Path, *extra: str) -> list[str]:
    return ["--table", str(nodes), "--edges", str(edges), "--label", "good", "--sensitive", "gender", "--node-id",
            "id", *extra]  # fmt: skip


def test_every_advised_option_has_a_flag_the_command_accepts() -> None:
    parameters = set(inspect.signature(ingest_files).parameters)
    assert advised_options() <= set(FLAGS)
    assert set(FLAGS) <= parameters | {"npz"}
    assert set(FLAGS.values()) <= _accepted()


@pytest.mark.parametrize(
    ("option", "said"),
    [
        (Option("on_unknown_nodes", "drop"), "--on-unknown-nodes drop"),
        (Option("impute_missing", True), "--impute-missing"),
        (Option("features"), "--features"),
        (Option("unlabeled", "-1"), "--unlabeled=-1"),
        (Option("sensitive_bins", "age>=39.5"), "--sensitive-bins 'age>=39.5'"),
        (Option("scale", False), "--scale off"),
        (Option("max_sensitive_values", "20"), "max_sensitive_values='20'"),  # no flag: bind_core's own name
    ],
)
def test_an_option_said_as_a_flag(option: Option, said: str) -> None:
    assert flag(option) == said


CASES = {
    "dangling": (q.dangling_edges, (), "--edges", ["--on-unknown-nodes", "drop"]),
    "empty": (q.empty_edges, (), "--edges", ["--allow-no-edges"]),
    "tokens": (lambda p: q.stray_text(p, stray=False), (), "--table", ["--impute-missing"]),
    "stray": (q.stray_text, (), "--table", ["--features", "amount,purpose,married,gender"]),
    "cap": (q.text_feature, ("--max-categories", "5"), "--features", ["--max-categories", "10"]),
    "label": (q.text_feature, ("--label", "godo"), "--label", ["--label", "good"]),
    "age": (q.continuous_sensitive, ("--sensitive", "age"), "--sensitive", ["--sensitive-bins", "age>=39.5"]),
}


@pytest.mark.parametrize("case", CASES)
def test_an_error_names_flags_the_command_accepts_and_following_them_works(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    quirk, extra, lead, advice = CASES[case]
    argv = _table_args(*quirk(tmp_path), *extra)
    assert main([*argv, "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"{PREFIX}{lead}: "), err
    named = FLAG.findall(err)
    assert named and set(named) <= _accepted(), err
    assert API_TERMS.search(err) is None, err
    assert advice[0] in named, err
    if case in ("dangling", "age"):  # the advice gives the value too
        assert " ".join(advice[:1] + [shlex.quote(a) for a in advice[1:]]) in err, err
    graph, _ = cli._load(build_parser().parse_args([*argv, *advice]))  # the advice followed: the graph loads
    assert graph.num_nodes == q.N


def test_the_misspelled_label_gets_did_you_mean(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*_table_args(*q.text_feature(tmp_path), "--label", "godo"), "--quiet"]) == 2
    assert capsys.readouterr().err.strip() == (
        f"{PREFIX}--label: no column 'godo' in people.csv; did you mean 'good'? (columns: id, amount, purpose, "
        "married, gender, good)"
    )


def test_the_read_notes_name_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = build_parser().parse_args(_table_args(*q.sentinel_label(tmp_path)))
    _, report = cli._load(args)
    assert report is not None
    notes = report.notes(flag)
    assert notes[-2].endswith("if -1 marks unlabeled nodes, pass --unlabeled=-1")
    assert "has 3 classes" in notes[-1]
