"""Retrieval pieces the library puts together: query terms, lexical search, fusion, matches.

Pure functions plus the SQL of lexical search; :meth:`mindory.library.Library.search`
runs them against the database and the vector index (docs/search.md has the whole
story).

**Terms.** A query is NFC-normalized and cut into *words* (runs of letters, digits and
marks of alphabetic scripts, lower-cased) and *CJK runs* (Han, kana, Hangul — scripts
written without spaces). English stop words are dropped while other words remain.

**Lexical search (SQLite).** The FTS5 table ``chunks_fts`` (trigram tokenizer) is
queried with ``"t1" OR "t2" OR …`` and ranked by ``bm25()``:

* a word of three or more characters is one phrase (its trigrams in a row, so it
  also matches inside longer words: *whale* finds *whales*);
* a CJK run of three or more characters gives its overlapping trigrams (so a question
  that shares only some characters with the text still finds it) and, when longer
  than three, the whole run as a phrase (a rare phrase weighs heavily, so exact
  quotes come first);
* a two-character CJK run (宝玉, 寶玉, 曹操) has no trigram of its own. It is
  expanded through the index's own vocabulary (``chunks_fts_vocab``) into every
  indexed trigram that *starts* with it; each chunk is indexed with a trailing
  newline, so every occurrence starts one. Up to :data:`MAX_EXPANSIONS`; a term
  with more continuations than that is too common to rank by;
* when nothing else is left (a one-character query, or only two-letter words), the
  chunks are scanned with ``instr`` (:func:`scan_search`).

**Other databases** have no FTS table; :func:`scan_search` ranks chunks that contain
the terms (``LIKE``) by how many, and how long, terms they contain.

**Fusion.** Reciprocal rank fusion: ``score = Σ_mode weight_mode / (k + rank_mode)``.

**Matches.** Where the query's words occur inside a hit they are found in the
chunk's *normalized* text and mapped to source through the offset map, so a reader
can highlight the words themselves (never a ``str.find`` over the source text).
"""

from __future__ import annotations

import functools
import math
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import regex
from sqlalchemy import bindparam, case, func, literal, or_, select, text
from sqlalchemy.engine import Connection

from mindory.store.models import FTS_TABLE, ChunkRow, DerivationRow

__all__ = [
    "CANDIDATES",
    "DEFAULT_WEIGHTS",
    "MODES",
    "RRF_K",
    "Fused",
    "Mode",
    "QueryTerms",
    "analyze",
    "find_matches",
    "fts_expression",
    "fts_quote",
    "lexical_search",
    "rrf",
    "scan_search",
    "capped_count",
    "short_term_expansions",
]

Mode = Literal["hybrid", "vector", "lexical"]
MODES: tuple[Mode, ...] = ("hybrid", "vector", "lexical")

# Set on the shipped eval sets (samples/queries, docs/search.md) with the built-in
# hashed embedder: lexical is the backbone, vectors break its ties and add what it
# misses. A heavier vector weight (0.5, k=60) lowered MRR in both languages.
DEFAULT_WEIGHTS: Mapping[str, float] = {"lexical": 1.0, "vector": 0.2}
RRF_K = 10
CANDIDATES = 50  # results taken from each mode before fusion
MAX_EXPANSIONS = 256  # trigrams a two-character term may expand into
MAX_FTS_TERMS = 64  # OR terms of one lexical query (longest first)
# A term held by this many chunks or more does not generate candidates when rarer
# terms exist (bm25() costs ~1 µs per matching chunk; docs/search.md). Libraries
# smaller than this use every term.
SELECTIVE_ROWS = 1000
# The rarest terms are used until the chunks they hold add up to this many; the best
# RERANK_DEPTH candidates are then re-scored with the other terms.
BM25_BUDGET = 4000
RERANK_DEPTH = 100

_CJK = r"\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}\u30fc\u3005-\u3007"
_TOKEN_RE = regex.compile(
    rf"(?P<cjk>[{_CJK}]+)|(?P<word>[[\p{{L}}\p{{N}}\p{{M}}]--[{_CJK}]]+)", regex.V1
)
_WORD_CHAR = r"[\p{L}\p{N}\p{M}]"
# Measured on the shipped eval sets (docs/search.md): stems lift English lexical MRR
# 0.800 -> 0.820; expanding every CJK bigram of longer runs lifts Chinese lexical MRR
# 0.783 -> 0.852 but costs a vocabulary scan per bigram (0.6-8.5 ms each at 100k
# chunks), so it is off and the vectors (CJK 1-2 gram features) cover that ground.
STEMS = True
CJK_BIGRAMS = False
WORD_PREFIX = 6
_SUFFIXES = ("ings", "ing", "edly", "ed", "ies", "es", "s", "ly")


def light_stem(word: str) -> str:
    """A crude English stem (swimming → swim, disappeared → disappear, lives → live)
    so that a query word also finds its other forms; the full word stays a term too."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            stem = word[: -len(suffix)]
            if suffix == "ies":
                stem += "y"
            elif len(stem) >= 4 and stem[-1] == stem[-2] and stem[-1] not in "aeiouls":
                stem = stem[:-1]  # swimm → swim, but keep "fall", "press"
            return stem
    return word


# Words too common to find anything by (they still count in a phrase-free query
# made only of them).
# fmt: off
STOPWORDS = frozenset((
    "a", "about", "above", "after", "again", "against", "all", "am", "an", "and", "any", "are",
    "as", "at", "be", "because", "been", "before", "being", "below", "between", "both", "but",
    "by", "can", "could", "did", "do", "does", "doing", "down", "during", "each", "few", "for",
    "from", "further", "had", "has", "have", "having", "he", "her", "here", "hers", "herself",
    "him", "himself", "his", "how", "i", "if", "in", "into", "is", "it", "its", "itself",
    "just", "me", "more", "most", "my", "myself", "no", "nor", "not", "now", "of", "off", "on",
    "once", "only", "or", "other", "our", "ours", "ourselves", "out", "over", "own", "same",
    "she", "should", "so", "some", "such", "than", "that", "the", "their", "theirs", "them",
    "themselves", "then", "there", "these", "they", "this", "those", "through", "to", "too",
    "under", "until", "up", "very", "was", "we", "were", "what", "when", "where", "which",
    "while", "who", "whom", "why", "will", "with", "would", "you", "your", "yours", "yourself",
    "yourselves", "upon", "shall", "may", "might", "must", "said", "says", "say", "thee",
    "thou", "thy", "one",
))
# fmt: on


# --------------------------------------------------------------------------- terms


@dataclass(frozen=True, slots=True)
class QueryTerms:
    """What a query is searched and highlighted by (see the module doc)."""

    query: str
    words: tuple[str, ...]  # lower-cased, in query order, no duplicates
    cjk_runs: tuple[str, ...]

    @property
    def content_words(self) -> tuple[str, ...]:
        """Words that are not stop words (all words if every one is a stop word)."""
        kept = tuple(w for w in self.words if w not in STOPWORDS)
        return kept or self.words

    def fts_terms(self) -> list[str]:
        """Phrases for the FTS query: words ≥ 3 characters (and their stems), CJK
        trigrams and whole runs."""
        out: list[str] = []
        for w in self.content_words:
            if len(w) >= 3:
                if WORD_PREFIX and len(w) > WORD_PREFIX:
                    # A long word by its first characters: fewer trigrams to intersect
                    # (each common one has a doclist as long as the library), and it
                    # finds the word's other endings too.
                    out.append(light_stem(w)[:WORD_PREFIX] if STEMS else w[:WORD_PREFIX])
                    continue
                out.append(w)
                if STEMS:
                    stem = light_stem(w)
                    if stem != w and len(stem) >= 4:
                        out.append(stem)
        for run in self.cjk_runs:
            if len(run) >= 3:
                out.extend(run[i : i + 3] for i in range(len(run) - 2))
                if len(run) > 3:
                    out.append(run)
        return _unique(out)

    def short_terms(self) -> list[str]:
        """CJK bigrams: two-character runs, and (CJK_BIGRAMS) every bigram of the
        longer runs — no trigram of their own (see the module doc)."""
        out = [r for r in self.cjk_runs if len(r) == 2]
        if CJK_BIGRAMS:
            for run in self.cjk_runs:
                if len(run) > 2:
                    out.extend(run[i : i + 2] for i in range(len(run) - 1))
        return _unique(out)

    def scan_terms(self) -> list[str]:
        """Terms for a plain scan: every content word and CJK run."""
        return _unique([*self.content_words, *self.cjk_runs])

    def highlight_words(self) -> tuple[str, ...]:
        return self.content_words

    @property
    def empty(self) -> bool:
        return not self.words and not self.cjk_runs

    def to_json(self) -> dict[str, Any]:
        return {"words": list(self.words), "cjk": list(self.cjk_runs)}


def _unique(items: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for item in items:
        if item and item not in seen:
            seen.add(item)
            out.append(item)
    return out


def analyze(query: str) -> QueryTerms:
    """Words and CJK runs of a query (NFC, words lower-cased)."""
    q = unicodedata.normalize("NFC", query)
    words: list[str] = []
    runs: list[str] = []
    for m in _TOKEN_RE.finditer(q):
        if m.group("cjk"):
            runs.append(m.group("cjk"))
        else:
            words.append(m.group("word").lower())
    return QueryTerms(query=q, words=tuple(_unique(words)), cjk_runs=tuple(_unique(runs)))


# --------------------------------------------------------------------------- lexical


def fts_quote(term: str) -> str:
    """An FTS5 string: double quotes around, inner quotes doubled."""
    return '"' + term.replace('"', '""') + '"'


def fts_expression(terms: Sequence[str], expansions: Sequence[str] = ()) -> str | None:
    """``"t1" OR "t2" OR …`` (longest terms first, at most MAX_FTS_TERMS), or None."""
    ordered = sorted(_unique(terms), key=lambda t: (-len(t), t))[:MAX_FTS_TERMS]
    phrases = [fts_quote(t) for t in ordered] + [fts_quote(t) for t in _unique(expansions)]
    return " OR ".join(phrases) if phrases else None


def short_term_expansions(conn: Connection, term: str) -> list[tuple[str, int]] | None:
    """Indexed trigrams starting with ``term`` (a two-character CJK run), with the
    number of chunks holding each. None when there are more than MAX_EXPANSIONS (too
    common a term to rank by)."""
    rows = conn.execute(
        text(f"SELECT term, doc FROM {FTS_TABLE}_vocab WHERE term >= :lo AND term < :hi LIMIT :n"),
        {"lo": term, "hi": term + "\U0010ffff", "n": MAX_EXPANSIONS + 1},
    ).all()
    found = [(str(t), int(d)) for t, d in rows]
    return None if len(found) > MAX_EXPANSIONS else found


_COUNT_SQL = text(
    f"SELECT count(*) FROM (SELECT rowid FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH :q LIMIT :n)"
)


def capped_count(conn: Connection, phrase: str, cap: int) -> int:
    """How many chunks hold ``phrase``, counting no further than ``cap`` (cheap)."""
    return int(conn.execute(_COUNT_SQL, {"q": fts_quote(phrase), "n": cap}).scalar() or 0)


@dataclass(frozen=True, slots=True)
class Filters:
    """Search restrictions: a book (its row id) and a section (its row id)."""

    book_id: int | None = None
    section_id: int | None = None


def lexical_search(
    conn: Connection,
    terms: QueryTerms,
    *,
    limit: int,
    filters: Filters | None = None,
    selective_rows: int = SELECTIVE_ROWS,
) -> list[tuple[int, float]]:
    """``(chunk row id, score)`` best first, over current derivations; SQLite FTS5.

    The score is ``-bm25()`` (higher is better). bm25() costs one to two microseconds
    per matching chunk, so the work is bounded: every term is counted cheaply (up to
    ``selective_rows``); a term held by that many chunks or more does not take part
    when rarer terms exist (like a stop word, it would add many candidates and little
    weight), and the rarer terms are taken rarest first until the chunks they hold
    reach :data:`BM25_BUDGET`. A query of common terms only asks for the chunks that
    hold both of its two longest terms (else the longest). Falls back to :func:`scan_search`
    when the query has nothing the trigram index can look up.
    """
    filters = filters or Filters()
    expansions: list[tuple[str, int]] = []
    unexpandable: list[str] = []
    for term in terms.short_terms():
        found = short_term_expansions(conn, term)
        if found is None:
            unexpandable.append(term)
        else:
            expansions.extend(found)
    phrases = sorted(_unique(terms.fts_terms()), key=lambda t: (-len(t), t))[:MAX_FTS_TERMS]
    if not phrases and not expansions:
        if terms.short_terms() and not unexpandable:
            return []  # a two-character term that occurs nowhere
        return scan_search(conn, terms, limit=limit, filters=filters)
    counts = {p: capped_count(conn, p, selective_rows) for p in phrases}
    selective = sorted((p for p in phrases if counts[p] < selective_rows), key=counts.__getitem__)
    if selective:
        # The rarest terms, until the chunks they hold reach the budget: bm25() then
        # ranks a few thousand chunks, not every chunk holding a common word. The
        # other terms still count: the best candidates are re-scored with them.
        chosen: list[str] = []
        rows = 0
        for p in selective:
            if chosen and rows + counts[p] > BM25_BUDGET:
                break
            chosen.append(p)
            rows += counts[p]
        rest = [p for p in phrases if p not in chosen and counts[p] > 0]
        rare = [t for t, doc in expansions if doc < selective_rows]
        expression = " OR ".join(map(fts_quote, chosen + rare))
        if not rest:
            return _bm25(conn, expression, limit, filters)
        depth = max(limit, RERANK_DEPTH)
        ranked = _bm25(conn, expression, depth, filters)
        return _rescore(conn, ranked, rest, counts)[:limit]
    if expansions:
        return _bm25(conn, " OR ".join(fts_quote(t) for t, _ in expansions), limit, filters)
    # Only common terms: the chunks holding both of the two longest (an intersection
    # is cheap to rank), else those holding the longest one.
    common = [p for p in phrases if counts[p] > 0]
    if not common:
        return []
    if len(common) >= 2:
        both = _bm25(conn, " AND ".join(map(fts_quote, common[:2])), limit, filters)
        if both:
            return both
    return _bm25(conn, fts_quote(common[0]), limit, filters)


_TEXTS_OF = select(ChunkRow.id, ChunkRow.text).where(
    ChunkRow.id.in_(bindparam("ids", expanding=True))
)
_MAX_ID = select(func.max(ChunkRow.id))
BM25_K1 = 1.2  # FTS5's bm25() constant (columnsize=0: no length normalization)


def _rescore(
    conn: Connection,
    ranked: Sequence[tuple[int, float]],
    phrases: Sequence[str],
    counts: Mapping[str, int],
) -> list[tuple[int, float]]:
    """Add to each candidate's bm25() score what ``phrases`` (left out of the FTS
    query) would have added: the same formula, with idf from their counted chunks
    (a common term's count stops at the cap, so its idf is a little high)."""
    if not ranked:
        return []
    n = int(conn.execute(_MAX_ID).scalar() or 0)  # >= the number of indexed chunks
    idf = {}
    for p in phrases:
        df = counts[p]
        idf[p] = max(1e-6, math.log((n - df + 0.5) / (df + 0.5))) if n > df else 1e-6
    texts = dict(conn.execute(_TEXTS_OF, {"ids": [i for i, _ in ranked]}).all())
    out: list[tuple[int, float]] = []
    for i, score in ranked:
        low = str(texts.get(i, "")).lower()
        for p in phrases:
            tf = low.count(p)
            if tf:
                score += idf[p] * tf * (BM25_K1 + 1) / (tf + BM25_K1)
        out.append((i, score))
    out.sort(key=lambda item: -item[1])
    return out


_CURRENT_OF = (
    select(ChunkRow.id)
    .join(DerivationRow, DerivationRow.id == ChunkRow.derivation_id)
    .where(ChunkRow.id.in_(bindparam("ids", expanding=True)), DerivationRow.is_current.is_(True))
)


def _bm25(
    conn: Connection, expression: str, limit: int, filters: Filters
) -> list[tuple[int, float]]:
    """The best ``limit`` chunks of current derivations for an FTS expression."""
    if filters.book_id is None and filters.section_id is None:
        # Rank in the FTS table alone (no join per matching row), then keep the
        # current chunks among the first few; join only if too few of them are.
        wide = 3 * limit
        ranked = [
            (int(i), -float(s))
            for i, s in conn.execute(
                text(
                    f"SELECT rowid, bm25({FTS_TABLE}) AS s FROM {FTS_TABLE} "
                    f"WHERE {FTS_TABLE} MATCH :q ORDER BY s LIMIT :n"
                ),
                {"q": expression, "n": wide},
            )
        ]
        current = set(conn.execute(_CURRENT_OF, {"ids": [i for i, _ in ranked]}).scalars())
        kept = [(i, s) for i, s in ranked if i in current]
        if len(kept) >= limit or len(ranked) < wide:
            return kept[:limit]
    where = ["d.is_current = 1"]
    params: dict[str, Any] = {"q": expression, "n": limit}
    if filters.book_id is not None:
        where.append("d.book_id = :book")
        params["book"] = filters.book_id
    if filters.section_id is not None:
        where.append("c.section_id = :section")
        params["section"] = filters.section_id
    sql = (
        f"SELECT f.rowid, bm25({FTS_TABLE}) AS s FROM {FTS_TABLE} AS f "
        "JOIN chunks AS c ON c.id = f.rowid "
        "JOIN derivations AS d ON d.id = c.derivation_id "
        f"WHERE {FTS_TABLE} MATCH :q AND {' AND '.join(where)} "
        "ORDER BY s LIMIT :n"
    )
    return [(int(i), -float(s)) for i, s in conn.execute(text(sql), params)]


def scan_search(
    conn: Connection, terms: QueryTerms, *, limit: int, filters: Filters | None = None
) -> list[tuple[int, float]]:
    """Chunks containing the query's terms, by a full scan (no FTS index needed).

    The score of a chunk is the summed length of the distinct terms it contains
    (longer terms are rarer), ties by row id. Case-insensitive for ASCII letters
    (``lower()``). Used on databases without FTS5, and on SQLite for queries the
    trigram index cannot answer (one-character terms).
    """
    filters = filters or Filters()
    scan = [t.lower() for t in terms.scan_terms()][:MAX_FTS_TERMS]
    if not scan:
        return []
    low = func.lower(ChunkRow.text)
    hits = [low.contains(t, autoescape=True) for t in scan]
    score = sum(
        (case((h, literal(len(t))), else_=literal(0)) for h, t in zip(hits, scan)), literal(0)
    )
    q = (
        select(ChunkRow.id, score.label("s"))
        .join(DerivationRow, DerivationRow.id == ChunkRow.derivation_id)
        .where(DerivationRow.is_current.is_(True), or_(*hits))
        .order_by(score.desc(), ChunkRow.id)
        .limit(limit)
    )
    if filters.book_id is not None:
        q = q.where(DerivationRow.book_id == filters.book_id)
    if filters.section_id is not None:
        q = q.where(ChunkRow.section_id == filters.section_id)
    return [(int(i), float(s)) for i, s in conn.execute(q)]


# --------------------------------------------------------------------------- fusion


@dataclass(frozen=True, slots=True)
class Fused:
    """One fused candidate: its RRF score and per-mode (rank from 1, raw score)."""

    id: int
    score: float
    ranks: Mapping[str, tuple[int, float]] = field(default_factory=dict)


def rrf(
    ranked: Mapping[str, Sequence[tuple[int, float]]],
    weights: Mapping[str, float] | None = None,
    k: int = RRF_K,
) -> list[Fused]:
    """Reciprocal rank fusion of ``{mode: [(id, raw score), …] best first}``.

    ``score = Σ weight / (k + rank)``; ties go to the better best rank, then the
    smaller id, so the order is deterministic.
    """
    weights = weights if weights is not None else DEFAULT_WEIGHTS
    scores: dict[int, float] = {}
    ranks: dict[int, dict[str, tuple[int, float]]] = {}
    for mode, items in ranked.items():
        w = float(weights.get(mode, 0.0))
        for r, (i, raw) in enumerate(items, start=1):
            if i in ranks and mode in ranks[i]:
                continue  # a duplicate id in one list counts once, at its best rank
            scores[i] = scores.get(i, 0.0) + w / (k + r)
            ranks.setdefault(i, {})[mode] = (r, raw)
    order = sorted(scores, key=lambda i: (-scores[i], min(r for r, _ in ranks[i].values()), i))
    return [Fused(i, scores[i], ranks[i]) for i in order]


# --------------------------------------------------------------------------- matches


@functools.lru_cache(maxsize=4096)
def _word_pattern(word: str) -> Any:
    # At a word start; a word of three or more letters may continue (whale → whales),
    # a shorter one must end there.
    tail = rf"{_WORD_CHAR}*" if len(word) >= 3 else rf"(?!{_WORD_CHAR})"
    return regex.compile(rf"(?<!{_WORD_CHAR}){regex.escape(word)}{tail}", regex.IGNORECASE)


def _cjk_pieces(run: str, haystack: str) -> list[str]:
    """Greedy longest pieces (≥ 2 characters, or the whole run if shorter) of a CJK run
    that occur in ``haystack``."""
    if len(run) < 2:
        return [run] if run in haystack else []
    pieces: list[str] = []
    i = 0
    while i < len(run) - 1:
        j = i + 2
        if run[i:j] not in haystack:
            i += 1
            continue
        while j < len(run) and run[i : j + 1] in haystack:
            j += 1
        pieces.append(run[i:j])
        i = j
    return pieces


def find_matches(
    normalized: str, start: int, end: int, terms: QueryTerms
) -> list[tuple[int, int, tuple[str, ...]]]:
    """Where the query's words occur in ``normalized[start:end]``: ``(a, b, terms)``
    in normalized positions, sorted, overlapping occurrences merged."""
    window = normalized[start:end]
    found: list[tuple[int, int, str]] = []
    for word in terms.highlight_words():
        for m in _word_pattern(word).finditer(window):
            found.append((start + m.start(), start + m.end(), word))
    for run in terms.cjk_runs:
        for piece in _cjk_pieces(run, window):
            pos = window.find(piece)
            while pos >= 0:
                found.append((start + pos, start + pos + len(piece), piece))
                pos = window.find(piece, pos + len(piece))
    found.sort()
    merged: list[tuple[int, int, tuple[str, ...]]] = []
    for a, b, t in found:
        if merged and a < merged[-1][1]:
            pa, pb, pt = merged[-1]
            merged[-1] = (pa, max(pb, b), pt if t in pt else (*pt, t))
        else:
            merged.append((a, b, (t,)))
    return merged


# --------------------------------------------------------------------------- results


@dataclass(frozen=True, slots=True)
class Match:
    """An occurrence of query words inside a hit: exact source span (code points and
    UTF-16, book source coordinates), the normalized span, and the source text."""

    terms: tuple[str, ...]
    text: str
    source_start: int
    source_end: int
    utf16_start: int
    utf16_end: int
    normalized_start: int
    normalized_end: int

    def to_json(self) -> dict[str, Any]:
        return {
            "terms": list(self.terms),
            "text": self.text,
            "source": {
                "start": self.source_start,
                "end": self.source_end,
                "utf16Start": self.utf16_start,
                "utf16End": self.utf16_end,
            },
            "normalized": {"start": self.normalized_start, "end": self.normalized_end},
        }


@dataclass(frozen=True, slots=True)
class ModeScore:
    """A hit's place in one mode's list: rank (from 1) and that mode's raw score
    (lexical: ``-bm25``, or the scan score; vector: cosine similarity)."""

    rank: int
    score: float

    def to_json(self) -> dict[str, Any]:
        return {"rank": self.rank, "score": round(self.score, 6)}


@dataclass(frozen=True, slots=True)
class Hit:
    """One search hit: a chunk, why it ranked where it did, and where it is."""

    rank: int
    score: float  # hybrid: the RRF score; lexical / vector: that mode's raw score
    scores: Mapping[str, ModeScore | None]
    chunk: str  # the stable chunk id
    book: str  # the book's SHA-256
    book_title: str
    section: int
    section_title: str
    locator: Any  # mindory.reading.locate.Locator
    matches: tuple[Match, ...] = ()
    row_id: int | None = None  # library-local, never exported

    def to_json(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "score": round(self.score, 6),
            "scores": {m: (s.to_json() if s else None) for m, s in self.scores.items()},
            "chunk": self.chunk,
            "book": {"id": self.book, "title": self.book_title},
            "section": {"ordinal": self.section, "title": self.section_title},
            "locator": self.locator.to_json(),
            "matches": [m.to_json() for m in self.matches],
        }


@dataclass(frozen=True, slots=True)
class SearchResult:
    query: str
    mode: str
    k: int
    hits: tuple[Hit, ...]
    terms: QueryTerms
    book: str | None = None
    section: int | None = None
    embedding: str | None = None  # the embedding's fingerprint (vector / hybrid)
    embedder_id: str | None = None
    warnings: tuple[str, ...] = ()
    timings: Mapping[str, float] = field(default_factory=dict)  # milliseconds

    def to_json(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "mode": self.mode,
            "k": self.k,
            "filters": {"book": self.book, "section": self.section},
            "terms": self.terms.to_json(),
            "embedding": (
                {"fingerprint": self.embedding, "embedder": self.embedder_id}
                if self.embedding
                else None
            ),
            "hits": [h.to_json() for h in self.hits],
            "warnings": list(self.warnings),
            "timings": {k: round(v, 3) for k, v in self.timings.items()},
        }
