"""The append-only audit trail: who did what to which resource, and how it ended (``trail_events``)."""
