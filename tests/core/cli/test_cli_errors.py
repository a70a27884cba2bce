"""``bind-audit run`` ends every :class:`~bind_core.errors.BindError` as one line on stderr and exit status 2, never a
traceback (issue 32): each class by real bad input where that is cheap, and every class (found by walking
``bind_core``, so a new one is covered without editing this file) raised where the command loads the graph,
prepares a supplied model, audits and writes its outputs."""

from __future__ import annotations

import importlib
import json
import math
import pkgutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

import bind_core
from bind_core import cli
from bind_core.cli import main
from bind_core.data import datasets
from bind_core.data.datasets import synthetic
from bind_core.errors import (
    BindError,
    ConfigError,
    DatasetNotFoundError,
    GraphValidationError,
    ModelDoesNotFitError,
    NonFiniteError,
)
from bind_core.models.gnn import GNN, ModelConfig
from bind_core.models.pyg import UnsupportedModelError
from bind_core.training.fit import TrainConfig
from bind_core.training.outputs import OutputsDifferError

PREFIX = "bind-audit run: error: "
GRAPH = ["--synthetic", "--synthetic-nodes", "60"]
FAST = ["--epochs", "5", "--skip", "influence,debiasing,validation", "--bootstrap", "0", "--quiet"]
SUPPLIED_FAST = FAST[2:]  # a supplied model has its own recipe: --epochs is refused beside --model-weights
INFO = ("torch threads: ", "warning: ")
"""What ``bind-audit run`` prints on stderr before or during the audit (tests/core/cli/test_run_threads.py; the
warnings known once the model and its metrics are in): information, not part of an error."""


def _subclasses(cls: type[BindError]) -> Iterator[type[BindError]]:
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def bind_errors() -> list[type[BindError]]:
    """:class:`BindError` and every subclass of it defined anywhere in ``bind_core`` (every module imported first,
    so that none is missed for not being imported yet), in a stable order."""
    for module in pkgutil.walk_packages(bind_core.__path__, "bind_core."):
        importlib.import_module(module.name)
    found: set[type[BindError]] = {BindError, *_subclasses(BindError)}
    return sorted(found, key=lambda c: (c.__module__, c.__qualname__))


ERRORS = bind_errors()


def _instance(cls: type[BindError], message: str) -> BindError:
    """An instance of ``cls`` whose message is ``message``, whatever arguments its constructor wants."""
    try:
        exc = cls(message)
    except (TypeError, ValueError):  # a constructor of its own (GraphValidationError's field, ...)
        exc = cls.__new__(cls)
        BindError.__init__(exc, message)
    return exc


def _error_line(err: str) -> str:
    """The one line of the error on ``err`` (stderr), checked to be the only one and in argparse's style."""
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith(INFO)]
    assert len(lines) == 1, err
    assert lines[0].startswith(PREFIX) and len(lines[0]) > len(PREFIX), err
    return lines[0]


def _fails(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, argv: list[str]
) -> tuple[type[BaseException], str]:
    """Run the command, expect exit status 2 and one error line; the class of the error reported, and the line."""
    seen: list[BaseException] = []
    one_line = cli.one_line

    def spy(exc: BaseException) -> str:
        seen.append(exc)
        return one_line(exc)

    monkeypatch.setattr(cli, "one_line", spy)
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert len(seen) == 1, err
    line = _error_line(err)
    assert line == PREFIX + one_line(seen[0])
    return type(seen[0]), line


# ---------------------------------------------------------------------------------------------- real bad input


def _bind_model_files(
    tmp_path: Path, *, weights: Callable[[torch.Tensor], torch.Tensor] | None, in_dim: int | None = None
) -> list[str]:
    """``--model-weights``/``--model-config`` of an untrained model of the synthetic graph (bind's own config
    form), its weights mapped through ``weights`` (``None``: a file that is not safetensors); ``in_dim``: a model
    built for that many features instead of the graph's."""
    graph = synthetic(60, seed=10)
    model_config = ModelConfig()
    in_dim = graph.num_features if in_dim is None else in_dim
    config = {
        "format": "bind-audit/model@1", "model": model_config.to_dict(), "training": TrainConfig().to_dict(),
        "in_dim": in_dim, "num_classes": 2, "dtype": "float64", "history": {}, "stationarity": {},
    }  # fmt: skip
    (tmp_path / "model.json").write_text(json.dumps(config))
    if weights is None:
        (tmp_path / "model.safetensors").write_bytes(b"not a safetensors file")
    else:
        torch.manual_seed(0)
        module = GNN(model_config, in_dim, 2).double()
        state = {k: weights(v.detach()).contiguous() for k, v in module.state_dict().items()}
        save_file(state, tmp_path / "model.safetensors")
    return ["--model-weights", str(tmp_path / "model.safetensors"), "--model-config", str(tmp_path / "model.json")]


def _table(tmp_path: Path, nodes: str, *extra: str) -> list[str]:
    (tmp_path / "nodes.csv").write_text(nodes)
    (tmp_path / "edges.csv").write_text("0,1\n")
    return ["--table", str(tmp_path / "nodes.csv"), "--edges", str(tmp_path / "edges.csv"), "--node-id", "id",
            "--sensitive", "gender", *extra]  # fmt: skip


def _pyg_config(tmp_path: Path) -> list[str]:
    config = {"format": "torch_geometric", "class": "NoSuchModel", "args": {}, "training": {"weight_decay": 0.0}}
    (tmp_path / "pyg.json").write_text(json.dumps(config))
    (tmp_path / "pyg.safetensors").write_bytes(b"")
    return ["--model-weights", str(tmp_path / "pyg.safetensors"), "--model-config", str(tmp_path / "pyg.json")]


def _outputs(tmp_path: Path) -> str:
    """An ``.npy`` of outputs sure of class 0 on every node of ``GRAPH``, which an untrained model does not give."""
    np.save(tmp_path / "outputs.npy", np.tile([10.0, -10.0], (60, 1)))
    return str(tmp_path / "outputs.npy")


BAD_INPUT: dict[str, tuple[type[BindError], Callable[[Path], list[str]], str]] = {
    "unknown dataset": (DatasetNotFoundError, lambda p: ["--dataset", "nope"], "unknown dataset 'nope'"),
    "data root nowhere": (
        DatasetNotFoundError,
        lambda p: ["--dataset", "income", "--data-root", str(p / "nowhere")],
        "missing file",
    ),
    "ragged csv": (
        GraphValidationError,
        lambda p: _table(p, "id,gender,good\n0,a,1\n1,b,0,7\n", "--label", "good"),
        "row 3",
    ),
    "missing label column": (
        GraphValidationError,
        lambda p: _table(p, "id,gender,good\n0,a,1\n", "--label", "nope"),
        "no column 'nope'",
    ),
    "missing node table": (
        GraphValidationError,
        lambda p: ["--table", str(p / "absent.csv"), "--edges", str(p / "e.csv"), "--label", "y", "--sensitive", "s"],
        "no such file",
    ),
    "not an npz": (GraphValidationError, lambda p: ["--npz", str(p / "g.npz")], "not a valid .npz"),
    "table option without --table": (ConfigError, lambda p: [*GRAPH, "--label", "y"], "applies only to --table"),
    "table options without --table": (
        ConfigError,
        lambda p: [*GRAPH, "--label", "y", "--sensitive", "s"],
        "--label, --sensitive apply only to --table",
    ),
    "bad config value": (ConfigError, lambda p: [*GRAPH, "--layers", "0"], "layers: 0"),
    "bad budgets": (ConfigError, lambda p: [*GRAPH, "--budgets", "0.1,x"], "--budgets: '0.1,x'"),
    "bad seeds": (ConfigError, lambda p: [*GRAPH, "--debias-seeds", "1.5"], "--debias-seeds"),
    "weights without config": (ConfigError, lambda p: [*GRAPH, "--model-weights", str(p / "w")], "go together"),
    "config not json": (
        ConfigError,
        lambda p: [*GRAPH, "--model-weights", str(p / "w"), "--model-config", str(p / "g.npz")],
        "--model-config",
    ),
    "weights file missing": (
        ConfigError,
        lambda p: [*GRAPH, *_bind_model_files(p, weights=None)[2:], "--model-weights", str(p / "w")],
        "--model-weights",
    ),
    "weights not safetensors": (
        ConfigError,
        lambda p: [*GRAPH, *_bind_model_files(p, weights=None)],
        "not a valid safetensors file",
    ),
    "unsupported pyg model": (UnsupportedModelError, lambda p: [*GRAPH, *_pyg_config(p)], "NoSuchModel"),
    "weights predicting nan": (
        NonFiniteError,
        lambda p: [*GRAPH, *_bind_model_files(p, weights=lambda v: torch.full_like(v, math.nan))],
        "not finite",
    ),
    "model built for other features": (
        ModelDoesNotFitError,
        lambda p: [*GRAPH, *_bind_model_files(p, weights=lambda v: v, in_dim=3)],
        "the model takes 3 input features but the graph has",
    ),
    "outputs the model does not give": (
        OutputsDifferError,
        lambda p: [*GRAPH, *_bind_model_files(p, weights=lambda v: v), "--model-outputs", _outputs(p)],
        "does not give your outputs",
    ),
    "json not writable": (
        ConfigError,
        lambda p: [*GRAPH, "--json", str(p / "no" / "such" / "dir" / "a.json")],
        "--json: cannot write",
    ),
}


@pytest.mark.parametrize("case", BAD_INPUT, ids=list(BAD_INPUT))
def test_bad_input_is_one_error_line_and_status_2(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    expected, argv, text = BAD_INPUT[case]
    (tmp_path / "g.npz").write_text("not a zip archive\n")
    args = argv(tmp_path)
    kind, line = _fails(capsys, monkeypatch, [*args, *(SUPPLIED_FAST if "--model-weights" in args else FAST)])
    assert kind is expected, line
    assert text in line


def test_every_concrete_class_has_real_input_but_the_ones_only_raised_deep_inside() -> None:
    """The classes a user's bad input reaches cheaply are triggered by it above; the rest only by monkeypatching
    below (the result codec's, which `bind-audit run` never decodes, the metrics' inputs, which the command forms from
    the model itself, and the base class)."""
    by_input = {expected for expected, _, _ in BAD_INPUT.values()}
    only_patched = {c for c in ERRORS if c not in by_input}
    allowed = {"BindError", "ResultFormatError", "ModelNotStationaryError", "MetricInputError"}
    assert {c.__name__ for c in only_patched} <= allowed


# ----------------------------------------------------------------------- every class, wherever it is raised


def _raiser(exc: BaseException) -> Callable[..., NoReturn]:
    def raise_it(*args: Any, **kwargs: Any) -> NoReturn:
        raise exc

    return raise_it


def _patch_where(where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, exc: BaseException) -> list[str]:
    """Make the step ``where`` of ``bind-audit run`` raise ``exc``; the arguments that reach it."""
    if where == "loading":
        monkeypatch.setattr(datasets, "synthetic", _raiser(exc))  # as bind_core.cli calls it
        return [*GRAPH, *FAST]
    if where == "prepare_for_audit":
        monkeypatch.setattr(cli, "prepare_for_audit", _raiser(exc))
        (tmp_path / "w.safetensors").write_bytes(b"")
        (tmp_path / "c.json").write_text("{}")
        return [*GRAPH, *SUPPLIED_FAST, "--model-weights", str(tmp_path / "w.safetensors"), "--model-config",
                str(tmp_path / "c.json")]  # fmt: skip
    if where == "run_audit":
        monkeypatch.setattr(cli, "run_audit", _raiser(exc))
        return [*GRAPH, *FAST]
    assert where == "writing"
    monkeypatch.setattr(cli, "json_safe", _raiser(exc))
    return [*GRAPH, *FAST, "--json", str(tmp_path / "audit.json")]


WHERE = ("loading", "prepare_for_audit", "run_audit", "writing")


@pytest.mark.parametrize("where", WHERE)
@pytest.mark.parametrize("cls", ERRORS, ids=lambda c: c.__name__)
def test_every_bind_error_anywhere_is_one_line_and_status_2(
    cls: type[BindError], where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    exc = _instance(cls, f"{cls.__name__} raised\n  while {where}:\n\nsecond line ")
    argv = _patch_where(where, tmp_path, monkeypatch, exc)
    kind, line = _fails(capsys, monkeypatch, argv)
    assert kind is cls
    assert line == f"{PREFIX}{cls.__name__} raised while {where}: second line"  # its lines joined


def test_the_classes_are_found_wherever_they_are_defined() -> None:
    """The list the tests above run over holds the classes of errors.py and those defined elsewhere, and a new
    subclass joins it without any edit here."""
    from bind_core import errors

    in_errors_py = {v for v in vars(errors).values() if isinstance(v, type) and issubclass(v, BindError)}
    assert in_errors_py <= set(ERRORS)
    assert {c.__name__ for c in ERRORS} >= {"BindError", "ConfigError", "UnsupportedModelError", "ResultFormatError"}

    class BrandNewError(GraphValidationError):
        pass

    assert BrandNewError in bind_errors()


def test_a_new_subclass_goes_through_the_command_as_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    class BrandNewError(ConfigError):
        def __init__(self, *, code: int) -> None:  # a constructor unlike any other
            super().__init__(f"code {code}\nis wrong")

    argv = _patch_where("run_audit", tmp_path, monkeypatch, BrandNewError(code=7))
    assert _fails(capsys, monkeypatch, argv) == (BrandNewError, f"{PREFIX}code 7 is wrong")


def test_an_error_without_a_message_names_its_class(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    argv = _patch_where("run_audit", tmp_path, monkeypatch, NonFiniteError())
    assert _fails(capsys, monkeypatch, argv) == (NonFiniteError, f"{PREFIX}NonFiniteError")


def test_the_progress_bar_ends_before_the_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def fail(*args: Any, progress: Callable[[str, float], None], **kwargs: Any) -> NoReturn:
        progress("training", 0.5)
        raise ConfigError("late")

    monkeypatch.setattr(cli, "run_audit", fail)
    assert main([*GRAPH, "--epochs", "5", "--bootstrap", "0"]) == 2  # no --quiet: the bar is drawn
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.endswith(f"\n{PREFIX}late\n"), err


def test_through_the_console_script(capsys: pytest.CaptureFixture[str]) -> None:
    """``bind-audit run`` (app.cli:entry's main) returns the status of bind_core's command."""
    from app.cli import main as app_main

    assert app_main(["run", "--dataset", "nope", "--quiet"]) == 2
    assert _error_line(capsys.readouterr().err).startswith(f"{PREFIX}unknown dataset 'nope'")


def test_usage_errors_stay_argparse_s(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--synthetic", "--arch", "nope"])
    assert exit_.value.code == 2
    assert "bind-audit run: error: argument --arch: invalid choice" in capsys.readouterr().err


def test_ctrl_c_is_status_130_without_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    argv = _patch_where("run_audit", tmp_path, monkeypatch, KeyboardInterrupt())
    assert main(argv) == 130
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.endswith("\nbind-audit run: interrupted\n"), err


def test_other_exceptions_are_bugs_and_keep_their_traceback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    argv = _patch_where("run_audit", tmp_path, monkeypatch, RuntimeError("a bug"))
    with pytest.raises(RuntimeError, match="a bug"):
        main(argv)


def test_an_unwritable_json_path_is_refused_before_the_audit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--json`` into a missing folder (or onto a folder) exits 2 before the graph is read or the audit runs."""

    def never(*_: Any, **__: Any) -> NoReturn:
        raise AssertionError("the audit ran before the output path was checked")

    monkeypatch.setattr(cli, "_load", never)
    monkeypatch.setattr(cli, "run_audit", never)
    assert main([*GRAPH, *FAST, "--json", str(tmp_path / "missing" / "x.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(PREFIX + "--json: cannot write ")
    assert f"the folder {tmp_path / 'missing'} does not exist" in err
    assert main([*GRAPH, *FAST, "--json", str(tmp_path)]) == 2
    assert f"{tmp_path} is a folder" in capsys.readouterr().err
