"""Logging an audit to MLflow (the optional ``mlflow`` extra): settings as params, metrics with their
interval bounds as metrics, and the HTML report and the influence table as artifacts.

Pure: the tracking URI is an argument (the service reads ``BIND_MLFLOW_TRACKING_URI``; the CLI takes
``--mlflow``). MLflow 3 refuses a file-based store (``file:`` URI or a folder) unless
``MLFLOW_ALLOW_FILE_STORE=true`` is set in the environment.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

from bind_core.fairness.records import Interval, Intervals
from bind_core.pipeline.results import AuditResults, InfluenceRow
from bind_core.pipeline.results_edges import EdgeAttribution
from bind_core.reporting.exports import influence_csv
from bind_core.reporting.report import render_report
from bind_core.reporting.views import typed_results

EXPERIMENT = "bind-audit"
METRIC_KEYS = ("accuracy", "auc", "f1", "delta_sp", "delta_eo", "gamma_sp", "gamma_eo", "gamma")


def _flatten(prefix: str, value: Any, out: dict[str, str]) -> None:
    if isinstance(value, Mapping):
        for k, v in value.items():
            _flatten(f"{prefix}.{k}" if prefix else str(k), v, out)
    elif isinstance(value, list | tuple):
        out[prefix] = ",".join(str(v) for v in value)
    else:
        out[prefix] = str(value)


def audit_params(config: Mapping[str, Any]) -> dict[str, str]:
    """``AuditConfig.to_dict()`` flattened to MLflow params (``model.arch``, ``training.epochs``, ...)."""
    out: dict[str, str] = {}
    _flatten("", config, out)
    return {k: v[:6000] for k, v in out.items()}


def audit_metrics(results: AuditResults | Mapping[str, Any]) -> dict[str, float]:
    """The audit's numbers for MLflow.

    Args:
        results: :class:`AuditResults`, or ``AuditResult.to_dict()``.

    Returns:
        The test metrics, their interval bounds (``<metric>_low``/``_high``), worst pairs, stability, validation and
        the edges (:func:`edge_metrics`), the finite ones only.
    """
    typed = typed_results(results)
    test, intervals = typed.metrics.test, typed.metrics.intervals
    found: dict[str, float | None] = {k: getattr(test, k) for k in METRIC_KEYS}
    for f in fields(Intervals) if intervals is not None else ():
        interval = getattr(intervals, f.name)
        if isinstance(interval, Interval):  # an end of None: undefined, or not resampled
            found |= {f"{f.name}_low": interval.low, f"{f.name}_high": interval.high}
    found |= {f"{name}_worst_pair": worst.value for name, worst in test.worst_pairs.items() if worst}
    if typed.stability is not None:
        found["stability_topk_jaccard"] = typed.stability.all.jaccard
        found["stability_topk_mean_pairwise_jaccard"] = typed.stability.mean_pairwise_jaccard
    validation = typed.validation
    if validation is not None and validation.pearson is not None:
        found |= {"validation_pearson": validation.pearson, "validation_spearman": validation.spearman}
    out = _numbers(found) | edge_metrics(typed.edges)
    return {k: v for k, v in out.items() if math.isfinite(v)}


def _numbers(found: Mapping[str, object]) -> dict[str, float]:
    return {k: float(v) for k, v in found.items() if isinstance(v, int | float) and not isinstance(v, bool)}


def edge_metrics(edges: EdgeAttribution | None) -> dict[str, float]:
    """The ``edges`` section's numbers, when the edges were attributed.

    Args:
        edges: the audit's edge attribution (``None`` when it did not ask for edges).

    Returns:
        ``edges_attributed``, ``edges_affecting``, ``edges_cross_group_edge_share``, ``edges_cross_group_harm_share``,
        ``edges_top_harmful_delta`` (the most harmful edge's ΔΓ), ``edges_seconds``; per edge budget ``b`` (as
        written in the config, e.g. ``0.01``) ``edges_debiasing_<b>_selected_delta`` (the selected edges' mean ΔΓ)
        and ``edges_debiasing_<b>_advantage``. A null number is left out.
    """
    if edges is None or not edges.computed:
        return {}
    cross, top = edges.cross_group, edges.top_harmful or []
    found: dict[str, float | None] = {
        "edges_attributed": edges.edges,
        "edges_affecting": edges.affecting,
        "edges_cross_group_edge_share": cross.edge_share if cross else None,
        "edges_cross_group_harm_share": cross.harm_share if cross else None,
        "edges_top_harmful_delta": top[0].delta if top else None,
        "edges_seconds": edges.seconds,
    }
    for row in edges.debiasing.budgets if edges.debiasing else []:
        name = f"edges_debiasing_{float(row.budget):g}"
        found[f"{name}_selected_delta"] = row.selected.mean if row.selected else None
        found[f"{name}_advantage"] = row.advantage
    return _numbers(found)


def log_audit(
    tracking_uri: str,
    config: Mapping[str, Any],
    results: AuditResults | Mapping[str, Any],
    influence_rows: Sequence[InfluenceRow] | None = None,
    *,
    experiment: str = EXPERIMENT,
    run_name: str | None = None,
    tags: Mapping[str, str] | None = None,
) -> str:
    """Log one audit as an MLflow run.

    Args:
        tracking_uri: the MLflow tracking URI.
        config: ``AuditConfig.to_dict()``.
        results: :class:`AuditResults`, or ``AuditResult.to_dict()``.
        influence_rows: every training node's row (``AuditResult.influence_rows()``), written as ``influence.csv``
            (and drawn in the report) when given.
        experiment: the MLflow experiment (created when missing).
        run_name: the run's name.
        tags: the run's tags.

    Returns:
        The run's id.

    Raises:
        ImportError: MLflow is not installed (``pip install 'bind-audit[mlflow]'``); MLflow's own errors pass.
    """
    # MLflow is optional (the ``mlflow`` extra): imported only when an audit is logged, so the rest works without it
    from mlflow.entities import Metric, Param, RunTag
    from mlflow.tracking import MlflowClient

    typed = typed_results(results)  # decoded once, before a run is created
    client = MlflowClient(tracking_uri=tracking_uri)
    found = client.get_experiment_by_name(experiment)
    experiment_id = found.experiment_id if found is not None else client.create_experiment(experiment)
    run = client.create_run(experiment_id, run_name=run_name, tags=dict(tags or {}))
    run_id: str = run.info.run_id
    try:
        params = [Param(k, v) for k, v in audit_params(config).items()]
        metrics = [Metric(k, v, 0, 0) for k, v in audit_metrics(typed).items()]
        for start in range(0, max(len(params), len(metrics)), 100):
            client.log_batch(run_id, metrics=metrics[start : start + 100], params=params[start : start + 100])
        client.log_batch(run_id, tags=[RunTag("bind.sign_convention", typed.sign_convention)])
        with tempfile.TemporaryDirectory(prefix="bind-mlflow-") as tmp:
            report = Path(tmp) / "report.html"
            report.write_text(render_report(typed, influence_rows), encoding="utf-8")
            client.log_artifact(run_id, str(report))
            if influence_rows:
                table = Path(tmp) / "influence.csv"
                table.write_bytes(influence_csv(influence_rows))
                client.log_artifact(run_id, str(table))
    except BaseException:
        client.set_terminated(run_id, status="FAILED")
        raise
    client.set_terminated(run_id)
    return run_id
