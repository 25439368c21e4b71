"""The second stage (issue 26): sentence windows cut exactly, the re-ordering keeps quotes
and apparatus in place, and a re-ranked hit keeps the exact place of its chunk."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from mindory.cli import main
from mindory.errors import MindoryError
from mindory.library import Library
from mindory.search.minilm import MiniLMEmbedder
from mindory.search.rerank import (
    RERANK_DEPTH,
    best_cosines,
    rerank_order,
    sentence_windows,
    sentences,
    window_readers,
    window_scores,
    window_vectors,
)
from tests.conftest import SAMPLES
from tests.pg import PgServer

_TEXT = st.text(
    alphabet=st.sampled_from(
        list("ab .!?;:\"'”)\n\t") + ["宋", "。", "！", "」", "）", "é", "𠀀", "\u3000"]
    ),
    max_size=120,
)


@given(_TEXT, st.booleans())
def test_sentences_are_stripped_spans_in_order(text: str, cjk: bool) -> None:
    spans = sentences(text, cjk=cjk)
    last = 0
    for a, b in spans:
        assert last <= a < b <= len(text)
        assert not text[a].isspace() and not text[b - 1].isspace()
        last = b
    # Nothing but white space is left out.
    covered = set().union(*(range(a, b) for a, b in spans)) if spans else set()
    assert all(text[i].isspace() for i in range(len(text)) if i not in covered)


@given(_TEXT, st.integers(min_value=1, max_value=200), st.booleans())
def test_windows_start_and_end_at_sentences_and_cover_them_all(
    text: str, width: int, cjk: bool
) -> None:
    spans = sentences(text, cjk=cjk)
    windows = sentence_windows(text, width, cjk=cjk)
    starts = {a for a, _ in spans}
    ends = {b for _, b in spans}
    for a, b in windows:
        assert a in starts and b in ends
        inside = [s for s in spans if a <= s[0] and s[1] <= b]
        assert len(inside) == 1 or b - a < width  # grows only while within the width
    for a, b in spans:
        assert any(wa <= a and b <= wb for wa, wb in windows)
    assert (windows == []) == (text.strip() == "")


def test_windows_of_a_chunk_are_its_own_characters() -> None:
    text = 'He waited.  "Why?" she asked; he said:\nthirty days had passed!  The end'
    windows = sentence_windows(text, 30)
    # One window from each sentence, grown by whole sentences while under 30 characters.
    assert [text[a:b] for a, b in windows] == [
        'He waited.  "Why?" she asked;',
        '"Why?" she asked; he said:',
        "she asked; he said:",
        "he said:",
        "thirty days had passed!",
        "The end",
    ]
    assert [text[a:b] for a, b in sentence_windows(text, 1)] == [
        "He waited.",
        '"Why?"',
        "she asked;",
        "he said:",
        "thirty days had passed!",
        "The end",
    ]
    assert [text[a:b] for a, b in sentence_windows(text, 1000)] == [text.strip()]


@given(
    st.lists(st.floats(min_value=-1, max_value=1), min_size=0, max_size=15),
    st.data(),
)
def test_rerank_order_is_a_permutation_that_keeps_fixed_places(
    scores: list[float], data: st.DataObject
) -> None:
    movable = data.draw(st.lists(st.booleans(), min_size=len(scores), max_size=len(scores)))
    order = list(range(100, 100 + len(scores)))
    out = rerank_order(order, movable, scores)
    assert sorted(out) == order
    for i, m in enumerate(movable):
        if not m:
            assert out[i] == order[i]
    assert rerank_order(order, movable, scores, weight=0.0) == order


def test_rerank_order_moves_by_score_against_the_prior() -> None:
    order = [10, 11, 12, 13]
    # The last has the best window by far: it rises to the top.
    assert rerank_order(order, [True] * 4, [0.1, 0.2, 0.1, 0.9]) == [13, 10, 11, 12]
    # The first is nearly as good: the prior keeps it first, the last passes the middle.
    assert rerank_order(order, [True] * 4, [0.5, 0.2, 0.1, 0.6]) == [10, 13, 11, 12]
    # A quote (not movable) stays first whatever the scores.
    assert rerank_order(order, [False, True, True, True], [0.0, 0.1, 0.1, 0.9])[0] == 10
    # Equal scores: the first stage's order.
    assert rerank_order(order, [True] * 4, [0.5] * 4) == order
    with pytest.raises(ValueError):
        rerank_order(order, [True], [0.1])


def test_window_scores_take_each_text_s_best_window() -> None:
    def embed(windows: list[str]) -> np.ndarray:
        return np.array([[1.0, 0.0] if "whale" in w else [0.0, 1.0] for w in windows])

    q = np.array([2.0, 0.0])
    texts = ["A ship. A whale rose.", "Only a ship.", "   "]
    assert window_scores(q, texts, embed) == [1.0, 0.0, 0.0]
    assert window_scores(np.zeros(2), texts, embed) == [0.0, 0.0, 0.0]


def test_minilm_finds_the_answering_sentence_inside_a_long_chunk() -> None:
    minilm = MiniLMEmbedder()
    filler = " ".join(f"The harvest of year {n} was stored in the barn." for n in range(12))
    answer = "The rabbi kept the crown until the thirty days were over, then returned it."
    diluted = f"{filler} {answer} {filler}"
    other = " ".join(f"A carriage went by on road number {n}." for n in range(20))
    question = minilm.embed(["why did the rabbi wait before giving back the crown"])[0]
    best = window_scores(question, [diluted, other], minilm.embed)
    whole = minilm.embed([diluted])[0] @ question
    assert best[0] > best[1]
    assert best[0] > whole + 0.1  # the sentence answers more nearly than the whole chunk


# --------------------------------------------------------------------------- a library


@pytest.fixture(scope="module")
def lib_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The samples, embedded with the test embedder (hashed vectors)."""
    path = tmp_path_factory.mktemp("rerank") / "lib.sqlite"
    with Library.open(path) as library:
        for r in library.import_many([SAMPLES]):
            assert r.status == "created", r
        library.embed()
    return path


@pytest.fixture(scope="module")
def lib(lib_path: Path) -> Iterator[Library]:
    with Library.open(lib_path) as library:
        yield library


QUESTION = "what did the old man say about the river and the houses by the water"


def test_a_reranked_hit_keeps_its_chunk_s_exact_place(lib: Library) -> None:
    first = lib.search(QUESTION, k=RERANK_DEPTH)
    second = lib.search(QUESTION, k=RERANK_DEPTH, rerank=True)
    assert "rerank" in second.timings
    # No windows stored: the stage embeds them now, and says how to store them once.
    assert [w for w in second.warnings if "mindory embed --windows" in w] == list(
        second.warnings
    ) and len(second.warnings) == 1
    assert [h.chunk for h in second.hits] != [h.chunk for h in first.hits]  # it moved some
    # The same chunks, re-ordered; each with the same Locator and word matches.
    assert sorted(h.chunk for h in second.hits) == sorted(h.chunk for h in first.hits)
    before = {h.chunk: h for h in first.hits}
    for h in second.hits:
        assert h.locator == before[h.chunk].locator
        assert h.matches == before[h.chunk].matches
    assert [h.rank for h in second.hits] == list(range(1, len(second.hits) + 1))
    # Same question, same order: the second stage is deterministic.
    again = lib.search(QUESTION, k=RERANK_DEPTH, rerank=True)
    assert [h.chunk for h in again.hits] == [h.chunk for h in second.hits]


def test_fewer_hits_than_the_depth_are_the_first_of_the_reranked(lib: Library) -> None:
    full = lib.search(QUESTION, k=RERANK_DEPTH, rerank=True)
    three = lib.search(QUESTION, k=3, rerank=True)
    assert [h.chunk for h in three.hits] == [h.chunk for h in full.hits[:3]]


def test_rerank_says_when_it_does_not_apply(lib: Library) -> None:
    chinese = lib.search("清兵入關", rerank=True)  # the hashed embedder has no e5 half
    assert "rerank" not in chinese.timings
    assert any("no Chinese and Japanese model" in w for w in chinese.warnings)
    vector = lib.search(QUESTION, mode="vector", rerank=True)
    assert any("rerank not applied" in w for w in vector.warnings)
    plain = lib.search("清兵入關")
    assert [h.chunk for h in chinese.hits] == [h.chunk for h in plain.hits]


def test_cli_and_http_doors_pass_rerank(lib_path: Path) -> None:
    from fastapi.testclient import TestClient

    from mindory.server.app import create_app

    out = CliRunner().invoke(
        main, ["--db", str(lib_path), "search", QUESTION, "--rerank", "--json"]
    )
    assert out.exit_code == 0, out.output
    cli = json.loads(out.output)
    assert "rerank" in cli["timings"]
    with TestClient(create_app(lib_path), base_url="http://127.0.0.1") as client:
        r = client.get("/search", params={"q": QUESTION, "rerank": "true"})
        assert r.status_code == 200, r.text
        body = r.json()
        assert "rerank" in body["timings"]
        assert [h["chunk"] for h in body["hits"]] == [h["chunk"] for h in cli["hits"]]
        assert client.get("/search", params={"q": QUESTION, "rerank": "maybe"}).status_code == 422


# ------------------------------------------------------------ windows embedded once


def test_window_vectors_are_unit_float16_rows_without_the_unread() -> None:
    def embed(windows: list[str]) -> np.ndarray:
        return np.array([[0.0, 0.0] if "宋" in w else [3.0, 4.0] for w in windows])

    long = f"{'a' * 199}.\n{'宋' * 199}。\n{'b' * 199}."  # three windows, one unread
    per = window_vectors([long, "宋。", "  "], embed)
    assert [v.shape for v in per] == [(2, 2), (0, 2), (0, 2)]
    assert per[0].dtype == np.float16
    assert np.allclose(per[0].astype(np.float32), [[0.6, 0.8], [0.6, 0.8]], atol=1e-3)
    assert best_cosines(np.array([3.0, 4.0]), per)[1:] == [0.0, 0.0]


def test_stored_windows_score_as_windows_made_at_question_time(
    lib_path: Path, tmp_path: Path
) -> None:
    path = tmp_path / "windows.sqlite"
    path.write_bytes(lib_path.read_bytes())
    with Library.open(path) as library:
        before = library.search(QUESTION, k=RERANK_DEPTH, rerank=True)
        done = library.embed(windows=True)
        assert done.embedded == 0 and done.windows is not None
        assert done.windows.chunks == done.total  # every current chunk, once
        stored = library.search(QUESTION, k=RERANK_DEPTH, rerank=True)
        # Read back, not embedded: no warning; the same order, to the bit.
        assert not stored.warnings
        assert [h.chunk for h in stored.hits] == [h.chunk for h in before.hits]
        assert [h.locator for h in stored.hits] == [h.locator for h in before.hits]
        again = library.embed()  # a library that keeps windows stores only new ones
        assert again.windows is not None and again.windows.chunks == 0
        # What is stored is what the model makes of the chunk's text now.
        from mindory.store.windows import stored_windows

        reader = window_readers(library.embedder())["latin"]
        with library.state.engine.connect() as conn:
            rows = conn.exec_driver_sql("SELECT id, text FROM chunks ORDER BY id LIMIT 5").all()
            got = stored_windows(conn, reader.key, [r[0] for r in rows])
        made = window_vectors([r[1] for r in rows], reader.embed)
        for (chunk_row, _), want in zip(rows, made, strict=True):
            assert got[chunk_row].tobytes() == want.tobytes()


def test_a_library_that_keeps_windows_stores_them_for_each_new_book(tmp_path: Path) -> None:
    path = tmp_path / "grow.sqlite"
    with Library.open(path) as library:
        assert [r.status for r in library.import_many([SAMPLES / "wasteland.epub"])] == ["created"]
        library.embed(windows=True)
        added = library.import_book(SAMPLES / "news-from-nowhere.txt")
        assert added.status == "created"
        with library.state.engine.connect() as conn:
            missing = conn.exec_driver_sql(
                "SELECT count(*) FROM chunks c JOIN derivations d ON d.id = c.derivation_id "
                "WHERE d.is_current AND c.id NOT IN (SELECT chunk_id FROM chunk_windows)"
            ).scalar()
            assert missing == 0
        library.delete_book(added.book)
        with library.state.engine.connect() as conn:
            orphans = conn.exec_driver_sql(
                "SELECT count(*) FROM chunk_windows WHERE chunk_id NOT IN (SELECT id FROM chunks)"
            ).scalar()
            assert orphans == 0  # deleted with their chunks


def test_cli_embeds_windows_when_asked(lib_path: Path, tmp_path: Path) -> None:
    path = tmp_path / "cli.sqlite"
    path.write_bytes(lib_path.read_bytes())
    out = CliRunner().invoke(main, ["--db", str(path), "embed", "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["windows"] is None  # not asked, not kept
    out = CliRunner().invoke(main, ["--db", str(path), "embed", "--windows", "--json"])
    assert out.exit_code == 0, out.output
    windows = json.loads(out.stdout)["windows"]
    assert windows["chunks"] > 0 and windows["windows"] >= windows["chunks"] // 2


def test_postgresql_keeps_and_reads_windows_as_sqlite_does(
    tmp_path: Path, pg_server: PgServer, pg_template: str
) -> None:
    url = pg_server.create_database("rerank_windows", template=pg_template)
    where = {"sqlite": str(tmp_path / "lib.sqlite"), "postgresql": url}
    orders = {}
    try:
        for name, target in where.items():
            with Library.open(target) as library:
                library.import_book(SAMPLES / "wasteland.epub", embed=False)
                library.embed("hashed", windows=True)
                found = library.search(QUESTION, k=RERANK_DEPTH, rerank=True)
                assert not found.warnings, (name, found.warnings)
                orders[name] = [(h.chunk, h.locator) for h in found.hits]
    finally:
        pg_server.drop_database("rerank_windows")
    assert orders["postgresql"] == orders["sqlite"]


def test_damaged_windows_are_named_not_scored(lib_path: Path, tmp_path: Path) -> None:
    path = tmp_path / "damaged.sqlite"
    path.write_bytes(lib_path.read_bytes())
    with Library.open(path) as library:
        library.embed(windows=True)
        first = library.search(QUESTION, k=RERANK_DEPTH)
        with library.state.writer.begin() as conn:
            conn.exec_driver_sql(
                "UPDATE chunk_windows SET vectors = substr(vectors, 1, 6) "
                "WHERE count > 0 AND chunk_id = (SELECT id FROM chunks WHERE chunk_id = ?)",
                (first.hits[0].chunk,),
            )
        report = library.verify()
        assert any("sentence windows" in p and "1 chunk(s)" in p for p in report.problems)
        with pytest.raises(MindoryError, match="wrong length.*mindory verify"):
            library.search(QUESTION, k=RERANK_DEPTH, rerank=True)


# ------------------------------------------------- Chinese and Japanese: e5's windows

# Three short paragraphs written for this test; the second answers the question.
CHINESE = (
    "第一回\n\n"
    + "村口有一棵老槐樹，夏天的時候大家都在樹下乘涼。" * 6
    + "\n\n"
    + "那年冬天，王婆把家裡的一匹白馬賣給了城裡的商人，換了三十兩銀子。" * 1
    + "她用這筆錢替兒子娶了媳婦。\n\n"
    + "河邊的水車日夜轉個不停，磨坊裡的麥子堆得像小山一樣。" * 6
    + "\n"
)


def test_cjk_sentences_end_at_chinese_stops_and_keep_their_quotes() -> None:
    text = "他說：「走吧。」我們就走了！\n第二天  下雨了"
    assert [text[a:b] for a, b in sentences(text, cjk=True)] == [
        "他說：「走吧。」",
        "我們就走了！",
        "第二天  下雨了",
    ]
    assert sentence_windows(text, cjk=True) == [(0, len(text))]  # all within 100


def test_a_chinese_question_is_re_read_by_e5_windows_stored_or_not(tmp_path: Path) -> None:
    book = tmp_path / "cun.txt"
    book.write_text(CHINESE, encoding="utf-8")
    question = "王婆的白馬賣了多少錢"
    with Library.open(tmp_path / "zh.sqlite") as library:
        assert library.import_book(book).status == "created"
        library.embed("minilm+e5")
        made = library.search(question, k=RERANK_DEPTH, rerank=True)
        assert "rerank" in made.timings
        assert [w for w in made.warnings if "embed --windows" in w] == list(made.warnings)
        readers = window_readers(library.embedder())
        assert set(readers) == {"latin", "cjk"}
        done = library.embed(windows=True)
        assert done.windows is not None
        assert done.windows.windows_keys == (readers["cjk"].key, readers["latin"].key)
        stored = library.search(question, k=RERANK_DEPTH, rerank=True)
        assert not stored.warnings
        assert [(h.chunk, h.locator) for h in stored.hits] == [
            (h.chunk, h.locator) for h in made.hits
        ]
        assert "三十兩銀子" in str(stored.hits[0].locator.highlight)
        # The same question in Simplified re-reads to the same order.
        simplified = library.search("王婆的白马卖了多少钱", k=RERANK_DEPTH, rerank=True)
        assert [h.chunk for h in simplified.hits] == [h.chunk for h in stored.hits]
        with library.state.engine.connect() as conn:
            counts = dict(
                conn.exec_driver_sql(
                    "SELECT windows_key, sum(count) FROM chunk_windows GROUP BY windows_key"
                ).all()
            )
        # e5 read the Chinese windows; MiniLM read none of them (and ran on nothing).
        assert counts[readers["cjk"].key] > 0 and counts[readers["latin"].key] == 0
