"""The revisions, one file each (``0001_…``); Alembic skips this file."""
