"""KOReader's document keys of stored books: written at import, filled in for books
imported before (revision 0009), carried to a new edition as aliases, and found by
KOReader's key once the old file is gone."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import delete

from mindory.importers.document_keys import filename_md5, partial_md5
from mindory.library import Library
from mindory.library.kosync import book_sha_for_key
from mindory.store.document_keys import keys_of
from mindory.store.models import DocumentKeyRow
from tests.conftest import SAMPLES


def _edition(tmp_path: Path, name: str, preface: str) -> Path:
    """The sample with a preface: a change KOReader's partial MD5 sees (it samples the
    file's first bytes; an edition that changes only its end keeps the same key)."""
    text = (SAMPLES / "news-from-nowhere.txt").read_text(encoding="utf-8")
    path = tmp_path / name
    path.write_text(preface + text, encoding="utf-8", newline="")
    return path


def test_keys_at_import_aliases_on_a_new_edition(tmp_path: Path) -> None:
    old = _edition(tmp_path, "news.txt", "")
    new = _edition(tmp_path, "news-2nd.txt", "A corrected edition.\n\n")
    with Library.open(tmp_path / "lib.sqlite") as lib:
        first = lib.import_book(old, embed=False).book
        with lib.state.read() as s:
            own = {(k.method, k.key, k.alias) for k in keys_of(s, first)}
        assert own == {
            ("binary", partial_md5(old.read_bytes()), False),
            ("filename", filename_md5("news.txt"), False),
        }
        second = lib.import_book(new, embed=False, replaces=first).book
        with lib.state.read() as s:
            got = {(k.method, k.key, k.alias) for k in keys_of(s, second)}
        assert ("binary", partial_md5(old.read_bytes()), True) in got
        assert ("binary", partial_md5(new.read_bytes()), False) in got
        old_key = partial_md5(old.read_bytes())
        # while the old book is in the library, its own key names it
        assert book_sha_for_key(lib.state, old_key) == first
        lib.delete_book(first)
        # once it is gone, KOReader holding the old file syncs with the new edition
        assert book_sha_for_key(lib.state, old_key) == second
        assert book_sha_for_key(lib.state, old_key.upper()) == second


def test_books_imported_before_get_their_keys_on_first_need(tmp_path: Path) -> None:
    with Library.open(tmp_path / "lib.sqlite") as lib:
        sha = lib.import_book(SAMPLES / "wasteland.epub", embed=False).book
        with lib.state.write() as w:
            w.execute(delete(DocumentKeyRow))  # as a library from before revision 0009
        key = partial_md5((SAMPLES / "wasteland.epub").read_bytes())
        assert book_sha_for_key(lib.state, key) == sha
        with lib.state.read() as s:
            assert len(keys_of(s, sha)) == 2
