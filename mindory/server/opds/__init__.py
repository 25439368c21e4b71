"""OPDS catalogues for reading apps (docs/opds.md): OPDS 1.2 (Atom, :mod:`.atom`) and
OPDS 2.0 (JSON, :mod:`.v2`) drawn from the library's catalogue records
(:mod:`mindory.library.opds`), their URLs (:mod:`.urls`) and the OPDS 2 authentication
document (:mod:`.auth`). Pure drawing: the routes are in ``server/routes/opds.py``."""
