"""app.datasets."""
