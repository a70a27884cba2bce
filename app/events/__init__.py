"""``/v1/events``: the audit trail (``app/trail``) as the API serves it, to admin keys."""
