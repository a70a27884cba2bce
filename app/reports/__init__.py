"""app.reports."""
