"""app.graphs."""
