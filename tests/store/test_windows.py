"""Stored windows (``chunk_windows``) read back alike on SQLite and PostgreSQL: by chunk id,
by book and section, and asked for by rule."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mindory.library import Library
from mindory.store.windows import (
    has_windows,
    single_windows_in_scope,
    store_windows,
    stored_windows,
)
from tests.conftest import SAMPLES


def test_windows_read_back_by_scope_on_either_backend(db_url: str) -> None:
    with Library.open(db_url) as library:
        library.import_book(SAMPLES / "wasteland.epub", embed=False)
        library.import_book(SAMPLES / "news-from-nowhere.txt", embed=False)
        with library.state.engine.connect() as conn:
            rows = conn.exec_driver_sql(
                "SELECT c.id, d.book_id, c.section_id FROM chunks c "
                "JOIN derivations d ON d.id = c.derivation_id WHERE d.is_current ORDER BY c.id"
            ).all()
        rng = np.random.default_rng(7)
        made = {int(i): rng.standard_normal((int(i) % 3, 4)).astype(np.float16) for i, _, _ in rows}
        with library.state.writer.begin() as conn:
            assert not has_windows(conn)
            store_windows(conn, "model-1/across-e5", made)
        book_id, section_id = int(rows[-1][1]), int(rows[-1][2])
        with library.state.engine.connect() as conn:
            assert has_windows(conn, rule="across-e5")
            assert not has_windows(conn, rule="e5")  # the whole tail, not a suffix of it
            assert has_windows(conn, "model-1/across-e5")
            by_id = stored_windows(conn, "model-1/across-e5", [i for i, _, _ in rows])
            scopes = {
                "all": single_windows_in_scope(conn, "model-1/across-e5"),
                "book": single_windows_in_scope(conn, "model-1/across-e5", book_id=book_id),
                "section": single_windows_in_scope(
                    conn, "model-1/across-e5", book_id=book_id, section_id=section_id
                ),
            }
            nothing = single_windows_in_scope(conn, "model-2/across-e5")
    assert sorted(by_id) == sorted(made)
    for i, rows_made in made.items():
        assert by_id[i].tobytes() == rows_made.tobytes() and by_id[i].shape == rows_made.shape
    one = [int(i) for i, _, _ in rows if made[int(i)].shape[0] == 1]  # a single window
    wanted = {
        "all": one,
        "book": [i for i, b, _ in rows if i in one and b == book_id],
        "section": [i for i, b, s in rows if i in one and b == book_id and s == section_id],
    }
    for name, (ids, matrix) in scopes.items():
        assert ids.tolist() == wanted[name], name
        assert matrix.tobytes() == b"".join(made[i].tobytes() for i in wanted[name])
    assert len(nothing[0]) == 0


def test_the_library_remembers_a_scope_until_its_windows_change(tmp_path: Path) -> None:
    with Library.open(tmp_path / "lib.sqlite") as library:
        library.import_book(SAMPLES / "wasteland.epub", embed=False)
        st = library.state
        with st.engine.connect() as conn:
            ids = [int(i) for i in conn.exec_driver_sql("SELECT id FROM chunks").scalars()]
        one = {i: np.full((1, 4), 0.5, dtype=np.float16) for i in ids[:3]}
        with st.writer.begin() as conn:
            store_windows(conn, "m/across-e5", one)
        with st.engine.connect() as conn:
            first = st.single_windows(conn, "m/across-e5", None, None)
            again = st.single_windows(conn, "m/across-e5", None, None)
        assert again[1] is first[1]  # remembered
        assert first[0].tolist() == ids[:3] and first[1].dtype == np.float32
        assert not first[1].flags.writeable
        with st.writer.begin() as conn:
            store_windows(conn, "m/across-e5", {ids[3]: np.ones((1, 4), dtype=np.float16)})
        with st.engine.connect() as conn:
            later = st.single_windows(conn, "m/across-e5", None, None)
        assert later[0].tolist() == ids[:4]  # the new row is seen at once
        assert later[1][3].tolist() == [1.0] * 4 and later[1][0].tolist() == [0.5] * 4
