"""Presenting an audit: the HTML report and schedule history pages, their figures, exports (CSV, Parquet, model card)
and MLflow logging.
"""
