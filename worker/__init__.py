"""The Celery side of bind-audit: runs audits queued by the API through `bind_core`.

Arrows: ``worker -> app -> bind_core``. The worker reuses the app's settings and database models; `app`
never imports `worker` (the API only sends tasks by name), and `bind_core` imports neither.
"""
