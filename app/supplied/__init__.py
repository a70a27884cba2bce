"""app.supplied."""
