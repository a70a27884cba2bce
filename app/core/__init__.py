"""app.core."""
