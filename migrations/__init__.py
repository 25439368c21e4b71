"""Alembic revisions of the library schema, shipped inside the package as
``mindory.migrations`` (pyproject maps this folder there); run by
:func:`mindory.store.engine.upgrade`. Not imported as code: Alembic reads the files."""
