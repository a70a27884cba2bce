"""Database: typed SQLAlchemy 2 models, engine and sessions, and the Alembic upgrade helper."""
