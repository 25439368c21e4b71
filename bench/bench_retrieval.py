"""Retrieval on reader questions: mindory's lists and fusion beside BM25 peers, same chunks.

For every query of the sets (default: ``samples/queries/reader-questions.jsonl``) the
library's ranked lists are taken once — the word index, the trigram index, each
embedder's vectors — and scored alone and fused, beside two peers that rank the very
same chunks with ``bm25s``:

* **bm25s (textbook)**: Snowball English stems for Latin words, jieba words for Chinese
  (no Simplified/Traditional folding), Sudachi surface forms for Japanese, no stop words —
  the peer of issue 12's table;
* **bm25s (same analysis)**: mindory's own analysed terms (:mod:`mindory.search.words`).

The ``mindory hybrid (…)`` rows fuse those lists the way the pipeline does (to compare
fusions on one set of lists); the ``mindory hybrid (Library.search)`` row is the search
itself, as a user gets it, with the library's current embedding.

A chunk is relevant when it covers at least half of the answer's source span (the rule
of :mod:`mindory.search.evaluation`). Reported: MRR@10, R@1, R@10 overall, per kind and
per language, for the whole library and within the answer's book; indexing time of the
peers and the query latency of each list.

    .venv/bin/python bench/bench_retrieval.py --db LIB.sqlite [--queries Q.jsonl ...]
        [--embedders hashed,minilm] [--json OUT]

The library must hold the books of the query sets (``mindory import ../shared/corpus``)
and, for each embedder named, its vectors (``mindory embed --embedder SPEC``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import select

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mindory.library import Library  # noqa: E402
from mindory.search import words  # noqa: E402
from mindory.search.analysis import analyze  # noqa: E402
from mindory.search.evaluation import EvalQuery, load_queries, locate_answer  # noqa: E402
from mindory.search.pipeline import trigram_list, vector_search  # noqa: E402
from mindory.search.structure import Candidate, arrange  # noqa: E402
from mindory.store.fts import Filters  # noqa: E402
from mindory.store.models import BookRow, ChunkRow, DerivationRow, SectionRow  # noqa: E402
from mindory.store.reads import candidate_rows  # noqa: E402
from mindory.store.vectors import EmbeddingState  # noqa: E402
from mindory.store.words_fts import words_search  # noqa: E402

DEPTH = 100  # candidates taken from each list
K = 10
Ranked = list[tuple[int, float]]


# --------------------------------------------------------------------------- metrics


def first_rank(ids: Sequence[int], relevant: set[int]) -> int | None:
    for r, i in enumerate(ids, start=1):
        if i in relevant:
            return r
    return None


def metrics(ranks: Sequence[int | None]) -> dict[str, float]:
    n = len(ranks) or 1
    return {
        "n": len(ranks),
        "MRR": round(sum(1 / r for r in ranks if r is not None and r <= K) / n, 4),
        "R@1": round(sum(1 for r in ranks if r == 1) / n, 4),
        "R@10": round(sum(1 for r in ranks if r is not None and r <= K) / n, 4),
    }


def grouped(queries: Sequence[EvalQuery], ranks: Sequence[int | None]) -> dict[str, Any]:
    groups: dict[str, list[int | None]] = defaultdict(list)
    for q, r in zip(queries, ranks, strict=True):
        groups["all"].append(r)
        groups[f"kind:{q.kind}"].append(r)
        lang = "zh" if (q.lang or "").startswith("zh") else (q.lang or "?")
        groups[f"lang:{lang}"].append(r)
        if q.lang != lang:  # zh-Hans, zh-Hant beside zh (en counted once)
            groups[f"lang:{q.lang}"].append(r)
        if q.pair is not None:
            # The same question in both scripts: each side of the pairs on its own.
            groups[f"pair:{q.lang}"].append(r)
    return {name: metrics(rs) for name, rs in sorted(groups.items())}


# --------------------------------------------------------------------------- fusion


def rrf(lists: Mapping[str, Ranked], weights: Mapping[str, float], k: int = 10) -> list[int]:
    scores: dict[int, float] = defaultdict(float)
    best: dict[int, int] = {}
    for name, items in lists.items():
        w = weights.get(name, 0.0)
        if not w:
            continue
        for r, (i, _s) in enumerate(items, start=1):
            scores[i] += w / (k + r)
            best[i] = min(best.get(i, r), r)
    return sorted(scores, key=lambda i: (-scores[i], best[i], i))


def scored(lists: Mapping[str, Ranked], weights: Mapping[str, float]) -> list[int]:
    """Convex combination of max-normalized scores (a list's best is 1, its missing 0)."""
    scores: dict[int, float] = defaultdict(float)
    for name, items in lists.items():
        w = weights.get(name, 0.0)
        if not w or not items:
            continue
        top = max(s for _, s in items) or 1.0
        low = min(s for _, s in items)
        span = (top - low) or 1.0
        for i, s in items:
            scores[i] += w * (s - low) / span
    return sorted(scores, key=lambda i: (-scores[i], i))


# --------------------------------------------------------------------------- peers


def textbook_tokens(text: str, language: str) -> list[str]:
    """Snowball English for Latin words, jieba words for Han, Sudachi surfaces for kana."""
    import rjieba
    import Stemmer

    stem = Stemmer.Stemmer("english").stemWords
    runs, latin = words._split(words._normal(text))
    out = stem(latin)
    for run in runs:
        if language == "ja" or words._KANA.search(run):
            tok = words._japanese_tokenizer()
            out.extend(m.surface() for m in tok.tokenize(run))
        else:
            out.extend(w for w in rjieba.cut_for_search(run, False) if w.strip())
    return out


def bigram_tokens(text: str, language: str, with_words: bool) -> list[str]:
    """mindory's terms for alphabetic runs; for Han runs character bigrams (Simplified),
    with (``with_words``) or without jieba's words beside them."""
    runs, latin = words._split(words._normal(text))
    out = words._latin_terms(latin, language)
    for run in runs:
        if language == "ja" or words._KANA.search(run):
            out.extend(words._japanese_terms(run))
            continue
        simple = words.to_simplified(run)
        out.extend(simple[i : i + 2] for i in range(len(simple) - 1))
        if with_words:
            out.extend(words._chinese_terms(run))
    return out


class Peer:
    """bm25s over a tokenizer, indexed once over every current chunk."""

    def __init__(self, name: str, ids: Sequence[int], docs: Sequence[list[str]]) -> None:
        import bm25s

        self.name = name
        self.ids = np.asarray(ids)
        t = time.perf_counter()
        self.retriever = bm25s.BM25()
        self.retriever.index(list(docs), show_progress=False)
        self.index_seconds = time.perf_counter() - t

    def search(self, tokens: list[str], allowed: np.ndarray | None = None) -> Ranked:
        if not tokens:
            return []
        scores = self.retriever.get_scores(tokens)
        if allowed is not None:
            scores = np.where(allowed, scores, -np.inf)
        top = np.argsort(-scores, kind="stable")[:DEPTH]
        return [(int(self.ids[j]), float(scores[j])) for j in top if scores[j] > 0]


# --------------------------------------------------------------------------- the run


def relevant_ids(lib: Library, q: EvalQuery, cache: dict[str, Any]) -> tuple[str, set[int]]:
    from mindory.search.evaluation import _book_for

    book = _book_for(lib, q.book, q.book_sha256)
    if book not in cache:
        cache[book] = (
            [lib.section(book, s.ordinal) for s in lib.sections(book)],
            lib.chunks(book),
        )
    sections, chunks = cache[book]
    places = locate_answer(lib, q, sections)
    found = {
        int(c.row_id)
        for c in chunks
        for p in places
        if c.row_id is not None and p.covered_by(c.section, c.source_start, c.source_end)
    }
    return book, found


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", required=True)
    ap.add_argument(
        "--queries", nargs="+", default=[str(ROOT / "samples/queries/reader-questions.jsonl")]
    )
    ap.add_argument("--embedders", default="", help="Comma-separated embedder specs with vectors.")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--within", action="store_true", help="Also within each answer's book.")
    ap.add_argument("--dump", type=Path, help="Pickle every query's lists here (for study).")
    args = ap.parse_args()
    queries = [q for path in args.queries for q in load_queries(path)]
    specs = [s for s in args.embedders.split(",") if s]
    out: dict[str, Any] = {"queries": len(queries), "sets": args.queries}
    with Library.open(args.db) as lib:
        st = lib.state
        sv = st.services()
        with st.engine.connect() as conn:
            rows = conn.execute(
                select(ChunkRow.id, ChunkRow.text, BookRow.language, BookRow.sha256)
                .join(DerivationRow, DerivationRow.id == ChunkRow.derivation_id)
                .join(BookRow, BookRow.id == DerivationRow.book_id)
                .where(DerivationRow.is_current.is_(True))
                .order_by(ChunkRow.id)
            ).all()
            first = {
                sha: text
                for sha, text in conn.execute(
                    select(BookRow.sha256, SectionRow.source_text)
                    .join(SectionRow, SectionRow.book_id == BookRow.id)
                    .where(SectionRow.ordinal == 0)
                )
            }
            lang_of = {sha: words.language_of(tag, first.get(sha, "")) for _, _, tag, sha in rows}
            book_of = np.asarray([sha for *_, sha in rows])
            ids = [int(r[0]) for r in rows]
            out["chunks"] = len(ids)
            t = time.perf_counter()
            same_docs = [words.text_terms(text, lang_of[sha]) for _, text, _, sha in rows]
            analysis_s = time.perf_counter() - t
            textbook_docs = [textbook_tokens(text, lang_of[sha]) for _, text, _, sha in rows]
            peers = {
                "bm25s-textbook": Peer("bm25s-textbook", ids, textbook_docs),
                "bm25s-same-analysis": Peer("bm25s-same-analysis", ids, same_docs),
                "bm25s-bigrams": Peer(
                    "bm25s-bigrams",
                    ids,
                    [bigram_tokens(t, lang_of[sha], False) for _, t, _, sha in rows],
                ),
                "bm25s-words+bigrams": Peer(
                    "bm25s-words+bigrams",
                    ids,
                    [bigram_tokens(t, lang_of[sha], True) for _, t, _, sha in rows],
                ),
            }
            out["indexing_s"] = {name: round(p.index_seconds, 2) for name, p in peers.items()}
            out["analysis_s_all_chunks"] = round(analysis_s, 2)
            embeddings: dict[str, EmbeddingState] = {}
            for spec in specs:
                from sqlalchemy.orm import Session

                from mindory.store.models import EmbeddingRow

                with Session(bind=conn) as s:
                    row = s.scalars(
                        select(EmbeddingRow)
                        .where(EmbeddingRow.spec == spec)
                        .order_by(EmbeddingRow.is_current.desc(), EmbeddingRow.id.desc())
                    ).first()  # the current one (an earlier text rule may be stored too)
                if row is None:
                    raise SystemExit(f"no vectors of {spec!r}: run mindory embed --embedder {spec}")
                embeddings[spec] = EmbeddingState(
                    int(row.id),
                    row.fingerprint,
                    row.embedder_id,
                    row.spec,
                    int(row.dim),
                    bool(row.context_header),
                    int(row.version),
                )
            cache: dict[str, Any] = {}
            per_query: list[dict[str, Any]] = []
            latency: dict[str, list[float]] = defaultdict(list)
            languages = sorted(set(lang_of.values()))
            for q in queries:
                book, relevant = relevant_ids(lib, q, cache)
                entry: dict[str, Any] = {"q": q, "book": book, "relevant": relevant, "lists": {}}
                for scope in ("library", "book") if args.within else ("library",):
                    filters = Filters()
                    allowed = None
                    if scope == "book":
                        book_row = conn.execute(
                            select(BookRow.id).where(BookRow.sha256 == book)
                        ).scalar_one()
                        filters = Filters(book_id=int(book_row))
                        allowed = book_of == book
                    langs = [lang_of[book]] if scope == "book" else languages
                    lists: dict[str, Ranked] = {}
                    t = time.perf_counter()
                    lists["words"] = words_search(
                        conn, words.query_terms(q.query, langs), limit=DEPTH, filters=filters
                    )
                    latency["words"].append(time.perf_counter() - t)
                    t = time.perf_counter()
                    # As the search asks it: a Chinese question in both scripts.
                    chinese = q.lang is not None and q.lang.startswith("zh")
                    lists["trigram"] = trigram_list(
                        conn, analyze(q.query), DEPTH, filters, chinese=chinese
                    )
                    latency["trigram"].append(time.perf_counter() - t)
                    for spec, emb in embeddings.items():
                        t = time.perf_counter()
                        timings: dict[str, float] = {}
                        lists[spec] = vector_search(
                            sv, conn, emb, analyze(q.query).query, DEPTH, filters, timings
                        )
                        latency[spec].append(time.perf_counter() - t)
                    t = time.perf_counter()
                    lists["bm25s-textbook"] = peers["bm25s-textbook"].search(
                        textbook_tokens(q.query, langs[0] if len(langs) == 1 else "en"), allowed
                    )
                    latency["bm25s-textbook"].append(time.perf_counter() - t)
                    lists["bm25s-same-analysis"] = peers["bm25s-same-analysis"].search(
                        words.query_terms(q.query, langs), allowed
                    )
                    qlang = (
                        langs[0]
                        if len(langs) == 1
                        else (
                            "zh"
                            if words._CJK_RUN.search(q.query) and not words._KANA.search(q.query)
                            else "en"
                        )
                    )
                    for name, with_words in (
                        ("bm25s-bigrams", False),
                        ("bm25s-words+bigrams", True),
                    ):
                        lists[name] = peers[name].search(
                            list(dict.fromkeys(bigram_tokens(q.query, qlang, with_words))), allowed
                        )
                    entry["lists"][scope] = lists
                    # The search itself (Library.search: the pipeline as users get it,
                    # with the library's current embedding), beside the emulated fusions.
                    t = time.perf_counter()
                    hits = lib.search(q.query, k=K, book=book if scope == "book" else None).hits
                    latency["pipeline"].append(time.perf_counter() - t)
                    entry.setdefault("pipeline", {})[scope] = [h.row_id for h in hits]
                per_query.append(entry)
            # candidate facts for arranging (apparatus after body, duplicates folded)
            pool = {
                i
                for e in per_query
                for ls in e["lists"].values()
                for ranked in ls.values()
                for i, _ in ranked
            }
            facts = candidate_rows(conn, sorted(pool))
            candidates = {i: Candidate.of(i, r[5], r[2], r[4] or "") for i, r in facts.items()}
    if args.dump:
        import pickle

        with args.dump.open("wb") as fh:
            pickle.dump(
                {
                    "per_query": [
                        {
                            "q": e["q"],
                            "book": e["book"],
                            "relevant": e["relevant"],
                            "lists": e["lists"],
                        }
                        for e in per_query
                    ],
                    "candidates": candidates,
                },
                fh,
            )
    out["latency_ms_p50"] = {
        name: round(1000 * statistics.median(v), 2) for name, v in latency.items() if v
    }

    def run(
        name: str,
        rank: Callable[[Mapping[str, Ranked], EvalQuery], list[int]],
        scope: str,
        arranged: bool = True,
    ) -> dict[str, Any]:
        ranks = []
        for e in per_query:
            order = rank(e["lists"][scope], e["q"])
            if arranged:
                order, _also = arrange(order[:DEPTH], candidates)
            ranks.append(first_rank(order, e["relevant"]))
        return grouped([e["q"] for e in per_query], ranks)

    single = [
        "bm25s-textbook",
        "bm25s-same-analysis",
        "bm25s-bigrams",
        "bm25s-words+bigrams",
        "words",
        "trigram",
        *specs,
    ]
    results: dict[str, dict[str, Any]] = {}
    for scope in ("library", "book") if args.within else ("library",):
        for name in single:
            arranged = not name.startswith("bm25s")
            results[f"{scope}:{name}"] = run(
                name, lambda ls, q, n=name: [i for i, _ in ls[n]], scope, arranged
            )
        for label, fusion in fusion_variants(specs, candidates).items():
            results[f"{scope}:{label}"] = run(label, fusion, scope)
        results[f"{scope}:mindory hybrid (Library.search)"] = grouped(
            [e["q"] for e in per_query],
            [first_rank(e["pipeline"][scope], e["relevant"]) for e in per_query],
        )
    out["results"] = results
    print_table(results)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1, default=str))


def shipped(
    spec: str | None,
    queries_lang: Callable[[EvalQuery], str],
    with_vectors: bool = True,
    texts: Mapping[int, Candidate] | None = None,
) -> Callable[[Mapping[str, Ranked], EvalQuery], list[int]]:
    """mindory's own fusion (mindory.search.fusion): score fusion, weights by the query's
    language and the embedder, the phrase bonus (mindory.search.phrases) over ``texts``."""
    from mindory.search.fusion import CANDIDATES, floored_lists, fuse, weights_for
    from mindory.search.phrases import is_keyword_list, with_phrase_bonus, words_of

    def rank(ls: Mapping[str, Ranked], q: EvalQuery) -> list[int]:
        cjk = sum(len(r) for r in analyze(q.query).cjk_runs)
        language = queries_lang(q)
        vectors = bool(with_vectors and spec)
        w = weights_for(
            spec_id(spec) if vectors and spec else None,
            language,
            cjk,
            keyword_list=is_keyword_list(q.query),
        )
        lists = {"words": ls["words"], "lexical": ls["trigram"]}
        floored = floored_lists(spec_id(spec), language) if vectors and spec else frozenset()
        if vectors and spec:
            # A floored list counts from its last score: as the search takes it (50 deep).
            lists["vector"] = ls[spec][:CANDIDATES] if floored else ls[spec]
        fused = fuse(lists, w, floored)
        if vectors and w["vector"] > 0 and language == "latin" and texts is not None:
            pool = fused[:100]
            order = with_phrase_bonus(
                [f.score for f in pool],
                [texts[f.id].text if f.id in texts else None for f in pool],
                words_of(q.query),
            )
            return [pool[n].id for n in order]
        return [f.id for f in fused]

    return rank


def spec_id(spec: str) -> str:
    return "minilm-" if spec == "minilm" else ("hashed-" if spec.startswith("hashed") else spec)


def fusion_variants(
    specs: Sequence[str], texts: Mapping[int, Candidate] | None = None
) -> dict[str, Callable[[Mapping[str, Ranked], EvalQuery], list[int]]]:
    def lang(q: EvalQuery) -> str:
        if (q.lang or "").startswith("zh"):
            return "zh"
        return "ja" if q.lang == "ja" else "latin"

    variants: dict[str, Callable[[Mapping[str, Ranked], EvalQuery], list[int]]] = {
        "mindory lexical (words+trigram)": shipped(None, lang, with_vectors=False),
        "rrf(words,trigram) equal": lambda ls, q: rrf(ls, {"words": 1.0, "trigram": 1.0}),
    }
    for spec in specs:
        variants[f"mindory hybrid ({spec})"] = shipped(spec, lang, texts=texts)
        variants[f"rrf(words,{spec}) equal"] = lambda ls, q, s=spec: rrf(ls, {"words": 1.0, s: 1.0})
    return variants


def print_table(results: Mapping[str, Mapping[str, Any]]) -> None:
    cols = [
        ("all", "MRR", "all"),
        ("kind:paraphrase", "MRR", "paraphr"),
        ("kind:keyword", "MRR", "keyword"),
        ("kind:context", "MRR", "context"),
        ("lang:en", "MRR", "en"),
        ("lang:zh", "MRR", "zh"),
        ("lang:ja", "MRR", "ja"),
        ("pair:zh-Hant", "MRR", "pair Hant"),
        ("pair:zh-Hans", "MRR", "pair Hans"),
        ("all", "R@10", "R@10"),
        ("kind:paraphrase", "R@10", "para R@10"),
        ("kind:keyword", "R@10", "kw R@10"),
    ]
    print(f"{'method':44}" + "".join(f"{label:>10}" for _, _, label in cols))
    for name, groups in results.items():
        cells = "".join(f"{groups.get(c, {}).get(m, float('nan')):10.3f}" for c, m, _ in cols)
        print(f"{name[:44]:44}{cells}")


if __name__ == "__main__":
    main()
