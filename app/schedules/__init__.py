"""app.schedules."""
