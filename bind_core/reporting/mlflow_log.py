"""Logging an audit to MLflow (the optional ``mlflow`` extra): settings as params, metrics with their
interval bounds as metrics, and the HTML report and the influence table as artifacts.

Pure: the tracking URI is an argument (the service reads ``BIND_MLFLOW_TRACKING_URI``; the CLI takes
``--mlflow``). MLflow 3 refuses a file-based store (``file:`` URI or a folder) unless
``MLFLOW_ALLOW_FILE_STORE=true`` is set in the environment.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bind_core.reporting.exports import influence_csv
from bind_core.reporting.report import render_report

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


def audit_metrics(results: Mapping[str, Any]) -> dict[str, float]:
    """The test metrics, their interval bounds (``<metric>_low``/``_high``), worst pairs, stability, validation and
    the edges (:func:`edge_metrics`)."""
    metrics = results.get("metrics") or {}
    test = metrics.get("test") or {}
    out: dict[str, float] = {k: float(test[k]) for k in METRIC_KEYS if isinstance(test.get(k), int | float)}
    for name, interval in (metrics.get("intervals") or {}).items():
        if isinstance(interval, Mapping):
            for end in ("low", "high"):
                if isinstance(interval.get(end), int | float):  # None: undefined, or not resampled
                    out[f"{name}_{end}"] = float(interval[end])
    for name, worst in (test.get("worst_pairs") or {}).items():
        if worst:
            out[f"{name}_worst_pair"] = float(worst["value"])
    stability = results.get("stability")
    if stability:
        out["stability_topk_jaccard"] = float(stability["all"]["jaccard"])
        out["stability_topk_mean_pairwise_jaccard"] = float(stability["mean_pairwise_jaccard"])
    validation = results.get("validation")
    if validation and validation.get("pearson") is not None:
        out["validation_pearson"] = float(validation["pearson"])
        out["validation_spearman"] = float(validation["spearman"])
    out.update(edge_metrics(results.get("edges")))
    return {k: v for k, v in out.items() if math.isfinite(v)}


def edge_metrics(edges: Mapping[str, Any] | None) -> dict[str, float]:
    """The ``edges`` section's numbers, when the edges were attributed: ``edges_attributed``, ``edges_affecting``,
    ``edges_cross_group_edge_share``, ``edges_cross_group_harm_share``, ``edges_top_harmful_delta`` (the most
    harmful edge's ΔΓ), ``edges_seconds``; per edge budget ``b`` (as written in the config, e.g. ``0.01``)
    ``edges_debiasing_<b>_selected_delta`` (the selected edges' mean ΔΓ) and ``edges_debiasing_<b>_advantage``.
    A null number is left out."""
    if not edges or not edges.get("computed"):
        return {}
    cross = edges.get("cross_group") or {}
    top = edges.get("top_harmful") or []
    found = {
        "edges_attributed": edges.get("edges"),
        "edges_affecting": edges.get("affecting"),
        "edges_cross_group_edge_share": cross.get("edge_share"),
        "edges_cross_group_harm_share": cross.get("harm_share"),
        "edges_top_harmful_delta": top[0]["delta"] if top else None,
        "edges_seconds": edges.get("seconds"),
    }
    for row in (edges.get("debiasing") or {}).get("budgets") or []:
        name = f"edges_debiasing_{float(row['budget']):g}"
        found[f"{name}_selected_delta"] = (row.get("selected") or {}).get("mean")
        found[f"{name}_advantage"] = row.get("advantage")
    return {k: float(v) for k, v in found.items() if isinstance(v, int | float) and not isinstance(v, bool)}


def log_audit(
    tracking_uri: str,
    config: Mapping[str, Any],
    results: Mapping[str, Any],
    influence_rows: list[dict[str, Any]] | None = None,
    *,
    experiment: str = EXPERIMENT,
    run_name: str | None = None,
    tags: Mapping[str, str] | None = None,
) -> str:
    """Log one audit as an MLflow run and return its run id.

    Args:
        tracking_uri: the MLflow tracking URI.
        config: ``AuditConfig.to_dict()``; results: ``AuditResult.to_dict()``; influence_rows: every training
            node's row (``AuditResult.influence_rows()``), written as ``influence.csv`` when given.
        experiment: the MLflow experiment (created when missing).

    Raises:
        ImportError: MLflow is not installed (``pip install 'bind-audit[mlflow]'``); MLflow's own errors pass.
    """
    # MLflow is optional (the ``mlflow`` extra): imported only when an audit is logged, so the rest works without it
    from mlflow.entities import Metric, Param, RunTag
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri)
    found = client.get_experiment_by_name(experiment)
    experiment_id = found.experiment_id if found is not None else client.create_experiment(experiment)
    run = client.create_run(experiment_id, run_name=run_name, tags=dict(tags or {}))
    run_id: str = run.info.run_id
    try:
        params = [Param(k, v) for k, v in audit_params(config).items()]
        metrics = [Metric(k, v, 0, 0) for k, v in audit_metrics(results).items()]
        for start in range(0, max(len(params), len(metrics)), 100):
            client.log_batch(run_id, metrics=metrics[start : start + 100], params=params[start : start + 100])
        client.log_batch(run_id, tags=[RunTag("bind.sign_convention", str(results.get("sign_convention", "")))])
        with tempfile.TemporaryDirectory(prefix="bind-mlflow-") as tmp:
            report = Path(tmp) / "report.html"
            report.write_text(render_report(results, influence_rows), encoding="utf-8")
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
