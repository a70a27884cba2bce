"""Presenting an audit: the HTML report and schedule history pages, their figures, exports (CSV, Parquet, model card)
and MLflow logging.

The names below are what a service renders with; the modules hold the rest.
"""

from bind_core.debiasing.debias import said
from bind_core.reporting.debiasing_view import budget_text
from bind_core.reporting.exports import (
    EDGE_COLUMNS,
    INFLUENCE_COLUMNS,
    edges_csv,
    edges_parquet,
    influence_csv,
    influence_parquet,
    model_card,
)
from bind_core.reporting.history import render_history
from bind_core.reporting.mlflow_log import log_audit
from bind_core.reporting.page import environment, fmt
from bind_core.reporting.report import CSP, render_report

__all__ = [
    "CSP",
    "EDGE_COLUMNS",
    "INFLUENCE_COLUMNS",
    "budget_text",
    "edges_csv",
    "edges_parquet",
    "environment",
    "fmt",
    "influence_csv",
    "influence_parquet",
    "log_audit",
    "model_card",
    "render_history",
    "render_report",
    "said",
]
