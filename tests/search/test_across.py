"""Questions across languages (issue 26): a Chinese question about an English book is found
by e5's stored reading of its chunks, and the hit keeps the chunk's exact place."""

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
from mindory.search.across import ACROSS_RULE, across_list, across_reader
from mindory.search.rerank import whole_window
from tests.conftest import SAMPLES

# Five scenes, one topic each, each longer than a chunk's overlap: a question about one
# of them has one right answer.
SCENES = [
    "The storm came up at night. The waves rose over the deck of the little ship, the "
    "mast cracked in the wind, and the sailors tied themselves to the rail with ropes so "
    "that the sea would not carry them away. The captain stood at the wheel until dawn, "
    "soaked through, shouting orders that nobody could hear over the thunder. ",
    "Every morning the baker woke at three o'clock. He lit the oven, mixed flour, water, "
    "salt and yeast in the great wooden trough, and kneaded the dough until his arms "
    "ached. By six the loaves were golden and the whole street smelled of warm bread, "
    "and the children stopped at his window on their way to school. ",
    "The two old men played chess in the park every afternoon. The one in the grey coat "
    "always opened with the king's pawn; the other thought for a long time before every "
    "move and never once resigned, even when he had lost his queen and both his rooks. ",
    "At the wedding the bride wore her grandmother's white dress. The village band played "
    "until midnight, the groom's uncle made a long speech nobody understood, and the "
    "guests danced in the barn under lanterns hung from the beams. ",
    "In the horse race the grey mare started last. She passed the others one by one on "
    "the long bend, and at the finishing post she won by a head, while the favourite, a "
    "tall black stallion, stumbled and threw his rider into the mud. ",
]
STORY = "\n\n".join((scene * 3).strip() for scene in SCENES) + "\n"
QUESTION = "面包师傅每天早上几点起床烤面包"  # when does the baker get up to bake his bread


def _stacked(rows: dict[int, list[float]]) -> tuple[np.ndarray, np.ndarray]:
    ids = sorted(rows)
    return np.asarray(ids, dtype=np.int64), np.asarray([rows[i] for i in ids], dtype=np.float16)


def test_across_list_ranks_by_cosine_then_row_id() -> None:
    q = np.array([1.0, 0.0], dtype=np.float32)
    ids, rows = _stacked(
        {7: [0.6, 0.8], 3: [0.6, 0.8], 5: [1.0, 0.0], 2: [0.8, 0.6]}  # 3 and 7 tie
    )
    found = across_list(q * 3, ids, rows, 10)
    assert [i for i, _ in found] == [5, 2, 3, 7]  # the tie: the smaller row id first
    assert found[0][1] == pytest.approx(1.0)
    assert found[1][1] == pytest.approx(0.8, abs=1e-3)
    assert across_list(q, ids, rows, 2) == found[:2]
    assert across_list(np.zeros(2, dtype=np.float32), ids, rows, 10) == []
    assert across_list(q, *_stacked({}), 10) == []


@given(
    st.lists(
        st.tuples(st.integers(0, 50), st.floats(-1, 1), st.floats(-1, 1)),
        max_size=30,
        unique_by=lambda t: t[0],
    ),
    st.integers(1, 40),
)
def test_across_list_is_the_sorted_brute_force(
    rows: list[tuple[int, float, float]], n: int
) -> None:
    ids, matrix = _stacked({i: [x, y] for i, x, y in rows})
    q = np.array([0.3, 0.7], dtype=np.float32)
    cosine = {
        int(i): float(v.astype(np.float32) @ q) / float(np.linalg.norm(q))
        for i, v in zip(ids, matrix, strict=True)
    }
    expected = sorted(cosine, key=lambda i: (-cosine[i], i))[:n]
    assert [i for i, _ in across_list(q, ids, matrix, n)] == expected


@given(st.text(alphabet=st.sampled_from(list("ab \n\t.") + ["\u3000", "宋"]), max_size=40))
def test_the_whole_window_is_the_text_stripped(text: str) -> None:
    spans = whole_window(text)
    if not text.strip():
        assert spans == []
    else:
        ((a, b),) = spans
        assert text[a:b] == text.strip()


@pytest.fixture(scope="module")
def story_lib(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Library]:
    root = tmp_path_factory.mktemp("across")
    book = root / "scenes.txt"
    book.write_text(STORY, encoding="utf-8")
    with Library.open(root / "lib.sqlite") as library:
        assert library.import_book(book).status == "created"
        library.embed("minilm+e5")
        yield library


def test_a_chinese_question_about_an_english_book_is_answered_by_its_vector(
    story_lib: Library,
) -> None:
    book = story_lib.books()[0].id
    before = story_lib.search(QUESTION, book=book, k=3)
    assert any("embed --cross-language" in w for w in before.warnings)
    assert "vector" not in before.timings  # no vector part: words only
    done = story_lib.embed(cross_language=True)
    assert done.windows is not None
    reader = across_reader(story_lib.embedder())
    assert reader is not None and done.windows.windows_keys == (reader.key,)
    assert reader.key.endswith("/" + ACROSS_RULE)
    found = story_lib.search(QUESTION, book=book, k=3)
    assert not found.warnings
    top = found.hits[0]
    assert "baker woke at three" in str(top.locator.highlight)
    assert top.scores.get("vector") is not None
    # The hit is the chunk an English question finds, at the same exact place.
    english = story_lib.search("when does the baker wake up to bake bread", book=book, k=3)
    same = next(h for h in english.hits if h.chunk == top.chunk)
    assert same.locator == top.locator
    # The same question in Traditional script finds the same chunk first.
    traditional = story_lib.search("麵包師傅每天早上幾點起床烤麵包", book=book, k=3)
    assert traditional.hits[0].chunk == top.chunk
    # The second stage does not apply, and says why.
    reranked = story_lib.search(QUESTION, book=book, k=3, rerank=True)
    assert any("across languages" in w for w in reranked.warnings)
    assert [h.chunk for h in reranked.hits] == [h.chunk for h in found.hits]


def test_a_library_that_reads_across_keeps_it_for_new_books(tmp_path: Path) -> None:
    path = tmp_path / "grow.sqlite"
    (tmp_path / "scenes.txt").write_text(STORY, encoding="utf-8")
    with Library.open(path) as library:
        library.import_book(tmp_path / "scenes.txt", embed=False)
        library.embed("minilm+e5", cross_language=True)
        added = library.import_book(SAMPLES / "qiaoshi-yanyi.txt")
        assert added.status == "created"
        with library.state.engine.connect() as conn:
            rows = conn.exec_driver_sql(
                "SELECT d.book_id, sum(w.count), count(*) FROM chunk_windows w "
                "JOIN chunks c ON c.id = w.chunk_id JOIN derivations d ON d.id = c.derivation_id "
                "GROUP BY d.book_id ORDER BY d.book_id"
            ).all()
        # Both books' chunks have a row; the Chinese book's are empty (its vectors are
        # e5's already), the English one's hold one reading each.
        assert len(rows) == 2
        english, chinese = rows
        assert english[1] == english[2] > 0
        assert chinese[1] == 0 and chinese[2] > 0


def test_an_embedder_without_a_multilingual_half_says_so(tmp_path: Path) -> None:
    with Library.open(tmp_path / "hashed.sqlite") as library:
        library.import_book(SAMPLES / "news-from-nowhere.txt", embed=False)
        # Refused before anything is written: no embedding, no vector.
        with pytest.raises(MindoryError, match="nothing was embedded"):
            library.embed("hashed", cross_language=True)
        assert library.embeddings() == []
        library.embed("hashed")
        with pytest.raises(MindoryError, match="across languages"):
            library.embed(cross_language=True)
        found = library.search("老人说了什么", book=library.books()[0].id)
        assert any("reads no language across scripts" in w for w in found.warnings)


def test_cli_embeds_across_when_asked(tmp_path: Path) -> None:
    path = tmp_path / "cli.sqlite"
    (tmp_path / "scenes.txt").write_text(STORY, encoding="utf-8")
    with Library.open(path) as library:
        library.import_book(tmp_path / "scenes.txt", embed=False)
    out = CliRunner().invoke(
        main, ["--db", str(path), "embed", "--embedder", "minilm+e5", "--cross-language", "--json"]
    )
    assert out.exit_code == 0, out.output
    windows = json.loads(out.stdout)["windows"]
    assert windows["windows_keys"][0].endswith("/" + ACROSS_RULE)
    assert windows["windows"] == windows["chunks"] > 0
