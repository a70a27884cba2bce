"""app.influence."""
