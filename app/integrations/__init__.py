"""Optional integrations with tools outside the service (MLflow)."""
