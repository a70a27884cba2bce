"""``bind-audit run``: audit a graph locally (no service): train, measure, attribute, debias, validate."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from tqdm import tqdm

from bind_core.cli_carry import add_carry_options, carry_to_trained, check_carry_options
from bind_core.cli_errors import cli_text, flag
from bind_core.cli_errors import unwritable as unwritable  # re-exported: app.cli checks --junit with it
from bind_core.cli_threads import add_thread_options, set_threads
from bind_core.codec import encode, json_safe
from bind_core.data import datasets
from bind_core.data.datasets.features import MAX_CATEGORIES
from bind_core.data.datasets.ingest_report import IngestReport
from bind_core.data.datasets.split import PAPER_SPLIT_SEED
from bind_core.data.records import CarriedInputs
from bind_core.errors import BindError, ConfigError
from bind_core.influence import SOLVERS
from bind_core.models.gnn import ACTIVATIONS, ARCHS, ModelConfig
from bind_core.pipeline.audit import STAGES, AuditConfig, AuditResult, run_audit
from bind_core.pipeline.config import DEBIAS_RETRAIN
from bind_core.pipeline.reference import prepare_for_audit
from bind_core.pipeline.results import SuppliedModel
from bind_core.reporting.mlflow_log import log_audit
from bind_core.reporting.text import render, render_supplied
from bind_core.training.fit import TrainConfig, TrainedModel
from bind_core.training.outputs import read_outputs
from bind_core.training.settings import MAX_EPOCHS
from bind_core.training.supplied import REFERENCES

N = TypeVar("N", int, float)


class _DeprecatedNodes(argparse.Action):
    """``--nodes N``: the old name of ``--synthetic-nodes`` (it read like a node table)."""

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option: Any = None
    ) -> None:
        print("warning: --nodes is deprecated, use --synthetic-nodes (a node table is --table)", file=sys.stderr)
        namespace.synthetic_nodes = values


DEFAULT_CHANCE_SECONDS = 60.0
"""``bind-audit run`` checks debiasing against chance by default when that costs at most this (``chance_seconds``)."""


def build_parser() -> argparse.ArgumentParser:
    """The options of ``bind-audit run``, by group: the graph, the model and its training, the estimate and the
    checks, debiasing, edges, and the output."""
    p = argparse.ArgumentParser(prog="bind-audit run", description=__doc__)
    _add_graph_options(p)
    _add_model_options(p)
    _add_estimate_options(p)
    _add_debias_options(p)
    _add_output_options(p)
    return p


def _add_graph_options(p: argparse.ArgumentParser) -> None:
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--dataset", help="income, recidivism (bail), pokec_z, pokec_n")
    src.add_argument("--synthetic", action="store_true", help="a seeded synthetic biased graph")
    src.add_argument("--table", type=Path, help="your node table (.csv, .tsv, .parquet; .gz/.zst), with --edges")
    src.add_argument("--npz", type=Path, help="your graph as one .npz archive")
    p.add_argument("--data-root", default="../shared/datasets", help="folder holding the datasets")
    p.add_argument("--synthetic-nodes", type=int, default=2000, help="synthetic graph size")
    p.add_argument("--nodes", type=int, action=_DeprecatedNodes, help=argparse.SUPPRESS)
    _add_file_options(p)


_TRAINED_DEFAULTS: dict[str, object] = {
    "arch": "gcn",
    "layers": 1,
    "hidden": 16,
    "dropout": 0.5,
    "activation": "gelu",
    "epochs": 1000,
    "lr": 1e-3,
    "weight_decay": 1e-4,
    "polish": "auto",
}
"""The options that describe a model the audit trains, with their defaults: a supplied model has its own."""


def _refuse_trained_options(args: argparse.Namespace) -> None:
    """With ``--model-weights``, refuse the options of a model the audit trains that were given other values: the
    supplied model's architecture and recipe are its ``--model-config``'s, and taking them silently would describe a
    model nobody audited (``--seed`` stays: it seeds the audit's samples)."""
    if args.model_weights is None:
        return
    given = [f"--{k.replace('_', '-')}" for k, v in _TRAINED_DEFAULTS.items() if getattr(args, k) != v]
    if given:
        raise ConfigError(
            f"{', '.join(given)} {'describes' if len(given) == 1 else 'describe'} a model the audit trains: a supplied "
            "model is audited with its own architecture and training recipe, its --model-config's; leave "
            f"{'it' if len(given) == 1 else 'them'} out"
        )


def _add_model_options(p: argparse.ArgumentParser) -> None:
    d = _TRAINED_DEFAULTS
    p.add_argument("--arch", choices=ARCHS, default=d["arch"])
    p.add_argument("--layers", type=int, default=d["layers"])
    p.add_argument("--hidden", type=int, default=d["hidden"])
    p.add_argument("--dropout", type=float, default=d["dropout"])
    p.add_argument(
        "--activation", choices=ACTIVATIONS, default=d["activation"], help="between layers (relu: see METHOD.md)"
    )
    p.add_argument(
        "--model-weights",
        type=Path,
        metavar="FILE",
        help="audit this model (a safetensors state_dict) instead of training one; needs --model-config",
    )
    p.add_argument(
        "--model-config",
        type=Path,
        metavar="FILE",
        help="the model's JSON config: TrainedModel.config_dict()'s form or a torch_geometric.nn.models one "
        "(docs/API.md, Supplied models)",
    )
    p.add_argument(
        "--model-outputs",
        type=Path,
        metavar="FILE",
        help="with --model-weights: the model's own outputs on the graph's nodes, as your code computes them (an .npy "
        "of every node in the graph's order, or a .csv of node ids and outputs; with --trained-on, on this table as "
        "the deployed model is fed it); compared with the model as read, which must give them (exit 2 where it does "
        "not, with what most likely differs)",
    )
    p.add_argument(
        "--reference",
        choices=REFERENCES,
        default="as_given",
        help="with a supplied model: as_given (default) audits its weights as they are; polished audits a copy "
        "polished to a stationary point first and prints both models' metrics side by side",
    )
    p.add_argument(
        "--epochs",
        type=int,
        default=d["epochs"],
        help=f"Adam epochs, 0 to {MAX_EPOCHS} (0: none, the polish alone trains the model from its initial weights; "
        "refused where the polish does not run)",
    )
    p.add_argument("--lr", type=float, default=d["lr"])
    p.add_argument("--weight-decay", type=float, default=d["weight_decay"])
    p.add_argument("--seed", type=int, default=10)
    p.add_argument(
        "--polish",
        choices=("auto", "on", "off"),
        default=d["polish"],
        help="finish training at a stationary point (float64 L-BFGS, then Newton): auto (default) where the estimate "
        "is the paper's influence function (one-layer GCN, GIN, SAGE), not for deeper models or GAT (their step "
        "estimate is defined at any weights: they are audited as Adam leaves them)",
    )


def _add_estimate_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--lam", type=float, default=0.5, help="Γ = lam·Γ_SP + (1−lam)·Γ_EO")
    p.add_argument("--solver", choices=SOLVERS, default="auto")
    p.add_argument("--no-non-iid", action="store_true", help="drop BIND's non-i.i.d. term")
    p.add_argument("--validation-sample", type=int, default=50, help="nodes checked against re-optimisation")
    p.add_argument("--skip", default="", help=f"stages to skip, comma-separated, from {', '.join(STAGES[2:])}")
    p.add_argument("--bootstrap", type=int, default=1000, help="resamples for confidence intervals (0: none)")
    p.add_argument("--min-group-size", type=int, default=0, help="groups with fewer test nodes are kept out")
    p.add_argument("--stability-seeds", default="", help="retrain with these seeds (e.g. 1,10,100): top-k overlap")
    p.add_argument("--stability-k", type=int, default=10, help="k of the top-k harmful sets compared across seeds")
    p.add_argument("--mlflow", metavar="URI", help="log the audit to this MLflow tracking URI (extra: mlflow)")
    p.add_argument(
        "--refine-steps", type=int, default=0, help="refine every estimate with up to N steps (0: off; e.g. GIN: 300)"
    )
    p.add_argument(
        "--estimator",
        choices=("auto", "linear", "step"),
        default="auto",
        help="linear: the influence function; step: damped Newton steps per node, Γ exact (proximal response); "
        "auto: step for multi-layer and attention models and for one-layer ones not at a stationary point",
    )


def _add_debias_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--budgets",
        default="0.01,0.1",
        help="debiasing budgets, comma-separated: fractions of the training set (0 < b < 1) or whole counts from 1 to "
        "the number of training nodes",
    )
    p.add_argument(
        "--debias-utility", action="store_true", help="debias only with nodes whose deletion keeps validation loss"
    )
    p.add_argument(
        "--debias-seeds",
        default="",
        help="comma-separated training seeds (3+): check each budget against deleting random nodes",
    )
    p.add_argument(
        "--chance-seconds",
        type=float,
        default=DEFAULT_CHANCE_SECONDS,
        help="without --debias-seeds, run that check anyway (seeds 1,10,100) when its retrainings times the model's "
        f"training time come to at most this many seconds (default {DEFAULT_CHANCE_SECONDS:g}; 0: never)",
    )
    p.add_argument(
        "--debias-retrain",
        choices=DEBIAS_RETRAIN,
        default="audit",
        help="how the debiasing stage retrains: audit (as the audited model was trained: its recipe, with the polish "
        "where the recipe has it) or adam (Adam alone, as a user trains; minutes faster and less seed noise for "
        "multi-layer models)",
    )
    p.add_argument(
        "--edge-attribution",
        action="store_true",
        help="also attribute the bias to every edge (one-layer GCN, GIN, SAGE; costs about 1-10x the node estimate)",
    )
    p.add_argument(
        "--edge-budgets",
        default="0.0025,0.01",
        help="comma-separated fractions in (0, 1] of the edges that change anything: with --edge-attribution and "
        "--debias-seeds, delete the most harmful edges and check against random edges",
    )
    p.add_argument(
        "--edge-validation-sample",
        type=int,
        default=30,
        help="with --edge-attribution and the validation stage: edges checked against deleting the edge and "
        "re-optimising (0: none)",
    )


def _add_output_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--top", type=int, default=10, help="harmful/helpful nodes (and edges) to print")
    add_thread_options(p)
    p.add_argument("--json", type=Path, help="write all figures (and every node's influence) to this file")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def _add_file_options(p: argparse.ArgumentParser) -> None:
    """The options of ``--table`` (the same as the form fields of ``POST /v1/graphs``; docs/DATASETS.md)."""
    t = p.add_argument_group("your own graph (--table)")
    t.add_argument("--edges", type=Path, help="edge list: two node columns (more are ignored); .gz/.zst too")
    t.add_argument("--label", help="label column")
    t.add_argument("--sensitive", help="sensitive column, or several comma-separated (intersectional groups)")
    t.add_argument("--node-id", help="column of node ids the edge list uses (default: 0-based row positions)")
    t.add_argument("--features", help="feature columns, comma-separated (default: all but label, split, node id)")
    t.add_argument("--split", help="column of train/val/test (default: the paper split of the labeled nodes)")
    t.add_argument("--unlabeled", help="the label value that marks an unlabeled node (e.g. -1); empty cells too")
    t.add_argument(
        "--on-unknown-nodes",
        choices=("error", "drop"),
        default="error",
        help="an edge naming a node absent from the table: refuse (default) or drop it",
    )
    t.add_argument("--allow-no-edges", action="store_true", help="accept an edge list without edges")
    t.add_argument(
        "--impute-missing",
        action="store_true",
        help="fill missing feature values (numbers: the column median; text: no category)",
    )
    t.add_argument(
        "--max-categories",
        type=int,
        default=MAX_CATEGORIES,
        help="most values of a text feature column that is one-hot encoded",
    )
    t.add_argument("--sensitive-bins", help="groups from a numeric sensitive column: 'age>=25' or 'age:25,60'")
    t.add_argument(
        "--scale",
        choices=("auto", "on", "off"),
        default="auto",
        help="min-max scale the feature columns to [-1, 1], as BIND's code does: auto (default) scales them unless "
        "--model-weights audits a model trained on them, which sees the table's own values",
    )
    t.add_argument("--name", help="the graph's name (default: the table's file name)")
    t.add_argument("--split-seed", type=int, default=PAPER_SPLIT_SEED, help="seed of the paper split")
    add_carry_options(t)


def main(argv: Sequence[str] | None = None) -> int:
    """``bind-audit run``: the exit status. 0: done; 1: the audit is done but ``--mlflow`` logging failed; 2: a
    usage error (argparse's, with the usage) or bad input, any :class:`~bind_core.errors.BindError` raised while
    loading the graph, preparing a supplied model, auditing or writing the outputs, reported as one line
    ``bind-audit run: error: <message>`` on stderr and no traceback; 130: interrupted (Ctrl-C), one line too.
    Any other exception is a bug and keeps its traceback."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return _run(args)
    except BindError as exc:
        print(f"{parser.prog}: error: {one_line(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{parser.prog}: interrupted", file=sys.stderr)
        return 130


def one_line(exc: BaseException) -> str:
    """``exc``'s message on one line (its lines joined by spaces), in the command's terms (:func:`cli_text`), or
    its class name when it has none."""
    return " ".join(line.strip() for line in cli_text(exc).splitlines() if line.strip()) or type(exc).__name__


def _run(args: argparse.Namespace) -> int:
    """The audit of ``args``, printed (and written); every error on bad input is a :class:`BindError`."""
    if args.json is not None and (why := unwritable(args.json)) is not None:  # before the audit, not after it
        raise ConfigError(f"--json: cannot write {args.json}: {why}")
    _refuse_trained_options(args)
    check_carry_options(args)
    graph, report = _load(args)
    graph, carried = carry_to_trained(args, graph, lambda earlier: _read_earlier(args, earlier))
    deletion_threads = set_threads(args, graph.num_nodes)
    for note in report.notes(flag) if report is not None else []:
        print(f"read: {note}", file=sys.stderr)
    config = _audit_config(args)
    supplied, record = _supplied(args, graph, config, carried)  # run_audit describes it: architecture, recipe
    bar = None
    if not args.quiet:
        tqdm.monitor_interval = 0  # no monitor thread: a second thread keeps the deletions off forked processes
        bar = tqdm(total=100, file=sys.stderr, mininterval=0.5, bar_format="{desc} {bar} {percentage:3.0f}%")
    try:
        result = run_audit(
            graph,
            config,
            progress=_bar_progress(bar, config),
            model=supplied,
            deletion_threads=deletion_threads,
            on_warnings=_early_warnings(bar),
        )
    finally:  # ends the bar's line, so that an error is a line of its own
        if bar is not None:
            bar.close()
    if record is not None:
        print(render_supplied(record))
    print(render(result, top=args.top))
    if args.json:
        _write_json(args.json, result, report)
    return _log_mlflow(args.mlflow, result) if args.mlflow else 0


def _audit_config(args: argparse.Namespace) -> AuditConfig:
    """The :class:`AuditConfig` the options ask for; a bad list of numbers names its option."""
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    model_config = ModelConfig(args.arch, args.layers, args.hidden, args.dropout, activation=args.activation)
    return AuditConfig(
        model=model_config,
        training=TrainConfig(
            args.epochs,
            args.lr,
            args.weight_decay,
            args.seed,
            polish={"auto": None, "on": True, "off": False}[args.polish],
        ),
        lam=args.lam,
        solver=args.solver,
        non_iid=not args.no_non_iid,
        budgets=_numbers(args.budgets, "--budgets", float),
        validation_sample=args.validation_sample,
        stages=tuple(s for s in STAGES if s not in skip),
        bootstrap=args.bootstrap,
        min_group_size=args.min_group_size,
        stability_seeds=_numbers(args.stability_seeds, "--stability-seeds", int),
        stability_k=args.stability_k,
        refine_steps=args.refine_steps,
        debias_utility=args.debias_utility,
        estimator=args.estimator,
        debias_seeds=_numbers(args.debias_seeds, "--debias-seeds", int),
        chance_seconds=args.chance_seconds,
        debias_retrain=args.debias_retrain,
        edges=args.edge_attribution,
        edge_budgets=_numbers(args.edge_budgets, "--edge-budgets", float),
        edge_validation_sample=args.edge_validation_sample,
        reference=args.reference,
    )


def _bar_progress(bar: Any, config: AuditConfig) -> Callable[[str, float], None]:
    """The audit's progress drawn on ``bar`` (``None``: nothing drawn), each stage an equal share."""
    stages = [s for s in STAGES if s in config.stages]

    def progress(stage: str, frac: float) -> None:
        if bar is None or stage not in stages:
            return
        done = int(100 * (stages.index(stage) + min(frac, 1.0)) / len(stages))
        if done > bar.n:
            bar.set_description(f"{stage:<10}", refresh=False)
            bar.update(done - bar.n)

    return progress


def _early_warnings(bar: Any) -> Callable[[Sequence[str]], None]:
    """The warnings known once the model and its metrics are in, printed on stderr as they come (above ``bar``, the
    progress bar, where there is one): a model fed inputs it never saw is told before the estimate's minutes, in
    time to stop it (Ctrl-C). The printed results repeat them."""

    def warn(warnings: Sequence[str]) -> None:
        for text in warnings:
            line = f"warning: {text}"
            if bar is None:
                print(line, file=sys.stderr)
            else:
                tqdm.write(line, file=sys.stderr)

    return warn


def _write_json(path: Path, result: AuditResult, report: IngestReport | None) -> None:
    # the config the audit ran with: the recipe's polish decided (training.polish true or false); a supplied model's
    # record is the results' supplied_model
    doc = result.to_dict() | {
        "config": result.config.to_dict(),
        "influence": [encode(r) for r in result.influence_rows()],
    }
    if report is not None:
        doc["ingest"] = encode(report.summary(flag))
    text = json.dumps(json_safe(doc), indent=2, default=float)
    try:
        path.write_text(text)
    except OSError as exc:
        raise ConfigError(f"--json: cannot write {path} ({exc.strerror or exc})") from exc
    print(f"\nwrote {path}")


def _log_mlflow(uri: str, result: AuditResult) -> int:
    try:
        run_id = log_audit(uri, result.config.to_dict(), result.to_dict(), result.influence_rows())
    except Exception as exc:  # the audit itself succeeded; say why logging did not
        print(f"warning: MLflow logging failed ({type(exc).__name__}: {exc})", file=sys.stderr)
        return 1
    print(f"logged MLflow run {run_id} to {uri}")
    return 0


def _numbers(value: str, option: str, kind: type[N]) -> tuple[N, ...]:
    """The comma-separated numbers of ``option`` (empty items skipped); :class:`ConfigError` names a bad one."""
    items = [v.strip() for v in value.split(",") if v.strip()]
    try:
        return tuple(kind(v) for v in items)
    except ValueError as exc:
        what = "whole numbers" if kind is int else "numbers"
        raise ConfigError(f"{option}: {value!r} is not a comma-separated list of {what}") from exc


def _supplied(
    args: argparse.Namespace, graph: Any, config: AuditConfig, carried: CarriedInputs | None
) -> tuple[TrainedModel | None, SuppliedModel | None]:
    """The model of ``--model-weights``/``--model-config``, ready to audit with ``config`` (as given, or polished with
    ``--reference polished``: :func:`prepare_for_audit`), and its record (with what ``--trained-on`` carried); or
    none."""
    if args.model_weights is None and args.model_config is None:
        if args.model_outputs is not None:
            raise ConfigError("--model-outputs: goes with --model-weights and --model-config (a supplied model's)")
        return None, None
    if args.model_weights is None or args.model_config is None:
        raise ConfigError("--model-weights and --model-config go together")
    try:
        model_config = json.loads(args.model_config.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"--model-config: {exc}") from exc
    if not isinstance(model_config, dict):
        raise ConfigError("--model-config: must hold a JSON object")
    try:
        weights = args.model_weights.read_bytes()
    except OSError as exc:
        raise ConfigError(f"--model-weights: {exc}") from exc
    outputs = None
    if args.model_outputs is not None:  # with --trained-on: on --table, compared with the model on its carried inputs
        try:
            data = args.model_outputs.read_bytes()
        except OSError as exc:
            raise ConfigError(f"--model-outputs: {exc}") from exc
        outputs = read_outputs(data, args.model_outputs.name, graph)
    return prepare_for_audit(weights, model_config, graph, config, carried=carried, outputs=outputs)


_TABLE_ONLY = ("edges", "label", "sensitive", "node_id", "features", "split", "unlabeled", "sensitive_bins")


def _load(args: argparse.Namespace) -> tuple[Any, IngestReport | None]:
    """The graph to audit, and for ``--table`` the report of what reading it did."""
    given = [f"--{k.replace('_', '-')}" for k in _TABLE_ONLY if getattr(args, k) is not None]
    given += ["--scale"] if args.scale != "auto" else []
    if args.table is None and given:
        raise ConfigError(f"{', '.join(given)} {'applies' if len(given) == 1 else 'apply'} only to --table")
    if args.synthetic:
        return datasets.synthetic(args.synthetic_nodes, seed=args.seed), None
    if args.npz is not None:
        return datasets.from_files(args.npz, name=args.name, split_seed=args.split_seed), None
    if args.table is not None:
        missing = [f"--{k}" for k in ("edges", "label", "sensitive") if getattr(args, k) is None]
        if missing and not (missing == ["--edges"] and args.allow_no_edges):
            raise ConfigError(f"--table needs {', '.join(missing)}")
        ingested = _read_table(args, args.table, args.edges)
        return ingested.graph, ingested.report
    return datasets.load(args.dataset, args.data_root), None


def _read_earlier(args: argparse.Namespace, earlier: Path) -> Any:
    """``--trained-on``'s graph, read as the audited one is: an archive as ``--npz``, else a table with the options of
    ``--table`` (its edges not needed)."""
    if args.npz is not None:
        return datasets.from_files(earlier, name=args.name, split_seed=args.split_seed)
    return _read_table(args, earlier, None).graph


def _read_table(args: argparse.Namespace, table: Path, edges: Path | None) -> datasets.Ingested:
    """``table`` (and ``edges``; none: a table read for its columns alone, ``--trained-on``'s) read with the
    options of ``--table``."""
    return datasets.ingest_files(
        table,
        edges,
        label=args.label,
        sensitive=args.sensitive,
        node_id=args.node_id,
        features=_names(args.features),
        split=args.split,
        unlabeled=args.unlabeled,
        on_unknown_nodes=args.on_unknown_nodes,
        allow_no_edges=args.allow_no_edges or edges is None,
        impute_missing=args.impute_missing,
        max_categories=args.max_categories,
        sensitive_bins=args.sensitive_bins,
        name=args.name,
        split_seed=args.split_seed,
        scale=args.scale == "on" or (args.scale == "auto" and args.model_weights is None),
    )


def _names(value: str | None) -> list[str] | None:
    return None if value is None else [c.strip() for c in value.split(",") if c.strip()]


if __name__ == "__main__":
    raise SystemExit(main())
