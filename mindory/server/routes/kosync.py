"""Routes for reading apps: kosync (docs/apps.md). Filled in by the reading-apps work."""

from fastapi import APIRouter

from mindory.server.params import ServerContext


def add_routes(api: APIRouter, ctx: ServerContext) -> None:
    """Add these routes to ``api``."""
    del api, ctx
