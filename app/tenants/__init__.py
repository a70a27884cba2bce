"""app.tenants."""
