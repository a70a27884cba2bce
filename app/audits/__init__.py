"""app.audits."""
