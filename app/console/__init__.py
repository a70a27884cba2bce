"""The console: server-rendered pages under ``/console`` for people who audit without writing requests."""
