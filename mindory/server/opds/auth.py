"""The OPDS 2 authentication document (OPDS Authentication 1.0): how an app signs in.

mindory's readers sign in with HTTP Basic (a reader's name and password; the server's
``Guard`` checks it). A client that gets a 401 on ``/opds/v2/*`` reads this document
(``GET /opds/v2/auth.json``, public) to learn that, and shows the labels.
"""

from __future__ import annotations

from typing import Any

from mindory.server.opds.urls import OPDS2, OPDS2_AUTH

__all__ = ["BASIC", "authentication_document"]

BASIC = "http://opds-spec.org/auth/basic"


def authentication_document(base_url: str) -> dict[str, Any]:
    """The document for the server at ``base_url`` (scheme://host[:port][root path]);
    its ``id`` is where it is served."""
    base = base_url.rstrip("/")
    return {
        "id": f"{base}/opds/v2/auth.json",
        "title": "mindory",
        "description": "Sign in with your mindory reader name and password.",
        "links": [
            {"rel": "self", "href": f"{base}/opds/v2/auth.json", "type": OPDS2_AUTH},
            {"rel": "start", "href": f"{base}/opds/v2", "type": OPDS2, "title": "Catalogue"},
        ],
        "authentication": [
            {"type": BASIC, "labels": {"login": "Reader", "password": "Password"}},
        ],
    }
