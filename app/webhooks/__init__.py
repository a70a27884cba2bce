"""app.webhooks."""
