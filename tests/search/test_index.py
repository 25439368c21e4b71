"""VectorIndex: exact, IVF and HNSW search, filters, removal, atomic save and validated load."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import faiss
import numpy as np
import pytest

import mindory.search.vector_index as index_mod
from mindory.errors import MindoryError
from mindory.search.embedders import HashedNgramEmbedder
from mindory.search.vector_index import Manifest, VectorIndex, ids_checksum, load, manifest_path
from tests.conftest import CORPUS

DIM = 32
EMB = "test-embedder-v1-32"


def unit(n: int, dim: int = DIM, seed: int = 0) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def sparse_ids(n: int, seed: int = 0) -> np.ndarray:
    """Unique, unordered, non-contiguous ids, like chunk row ids."""
    return np.random.default_rng(seed).choice(10 * n, size=n, replace=False).astype(np.int64)


def brute(
    vecs: np.ndarray, ids: np.ndarray, q: np.ndarray, k: int
) -> tuple[np.ndarray, np.ndarray]:
    sims = q @ vecs.T
    order = np.argsort(-sims, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(sims, order, axis=1), ids[order]


@pytest.fixture
def flat() -> tuple[VectorIndex, np.ndarray, np.ndarray]:
    ids, vecs = sparse_ids(2000), unit(2000)
    vi = VectorIndex(DIM, embedder_id=EMB)
    vi.build(ids, vecs)
    return vi, ids, vecs


# ------------------------------------------------------------------------- flat


def test_flat_search_is_exact(flat: tuple[VectorIndex, np.ndarray, np.ndarray]) -> None:
    vi, ids, vecs = flat
    q = unit(25, seed=9)
    scores, got = vi.search(q, 10)
    want_s, want_i = brute(vecs, ids, q, 10)
    np.testing.assert_array_equal(got, want_i)
    np.testing.assert_allclose(scores, want_s, atol=1e-5)
    assert vi.kind == "flat" and len(vi) == 2000 and got.dtype == np.int64
    # one vector without the batch axis works too
    np.testing.assert_array_equal(vi.search(q[0], 10)[1], want_i[:1])


def test_k_larger_than_the_index_pads_with_minus_one() -> None:
    vi = VectorIndex(DIM)
    vi.build([5, 7, 9], unit(3))
    scores, got = vi.search(unit(2, seed=1), 5)
    assert (got[:, 3:] == -1).all() and np.isneginf(scores[:, 3:]).all()
    assert sorted(got[0, :3].tolist()) == [5, 7, 9]
    empty = VectorIndex(DIM)
    assert (empty.search(unit(1), 3)[1] == -1).all()


def test_search_keeps_the_thread_setting(flat: tuple[VectorIndex, np.ndarray, np.ndarray]) -> None:
    vi, _, _ = flat
    before = faiss.omp_get_max_threads()
    vi.search(unit(1), 5)
    assert faiss.omp_get_max_threads() == before


def test_bad_input_is_refused(flat: tuple[VectorIndex, np.ndarray, np.ndarray]) -> None:
    vi, ids, _ = flat
    with pytest.raises(ValueError, match="already"):
        vi.add(ids[:2], unit(2))
    with pytest.raises(ValueError, match="duplicate"):
        vi.add([1, 1], unit(2))
    with pytest.raises(ValueError, match="shape"):
        vi.add([1], unit(1, dim=DIM + 1))
    with pytest.raises(ValueError, match="ids for"):
        vi.add([1, 2], unit(1))
    with pytest.raises(ValueError, match=">= 0"):
        vi.add([-1], unit(1))
    with pytest.raises(ValueError, match="shape"):
        vi.search(unit(1, dim=8), 3)
    with pytest.raises(ValueError):
        vi.search(unit(1), 0)


def test_add_and_remove(flat: tuple[VectorIndex, np.ndarray, np.ndarray]) -> None:
    vi, ids, vecs = flat
    new_ids, new_vecs = np.array([10**12, 10**12 + 1]), unit(2, seed=5)
    vi.add(new_ids, new_vecs)
    assert vi.search(new_vecs, 1)[1][:, 0].tolist() == new_ids.tolist()  # 64-bit ids survive
    gone = ids[:500]
    assert vi.remove(np.r_[gone, [123456789]]) == 500  # unknown ids are ignored
    assert vi.remove(gone) == 0
    assert len(vi) == 1502
    _, got = vi.search(vecs[:500], 10)
    assert not np.isin(got, gone).any()
    keep = ~np.isin(ids, gone)
    all_ids, all_vecs = np.r_[ids[keep], new_ids], np.vstack([vecs[keep], new_vecs])
    np.testing.assert_array_equal(got, brute(all_vecs, all_ids, vecs[:500], 10)[1])


def test_filtered_search_returns_only_allowed_ids(
    flat: tuple[VectorIndex, np.ndarray, np.ndarray],
) -> None:
    vi, ids, vecs = flat
    allowed = ids[::7]
    q = unit(20, seed=4)
    scores, got = vi.search(q, 10, allowed_ids=np.r_[allowed, [-5, 99999999]])
    assert np.isin(got, allowed).all()
    want_s, want_i = brute(vecs[::7], allowed, q, 10)
    np.testing.assert_array_equal(got, want_i)
    np.testing.assert_allclose(scores, want_s, atol=1e-5)
    # fewer allowed than k, and nothing allowed
    _, few = vi.search(q, 10, allowed_ids=ids[:3].tolist())
    assert set(few[0, :3].tolist()) == set(ids[:3].tolist()) and (few[:, 3:] == -1).all()
    assert (vi.search(q, 5, allowed_ids=[])[1] == -1).all()


def test_ids_checksum_is_order_free() -> None:
    ids = np.array([9, 2, 7], dtype=np.int64)
    expected = hashlib.sha256(np.array([2, 7, 9], dtype="<i8").tobytes()).hexdigest()
    assert ids_checksum(ids) == ids_checksum([7, 9, 2]) == expected
    m = Manifest.for_ids(EMB, DIM, [7, 9, 2])
    assert (m.count, m.ids_sha256, m.dim, m.embedder_id) == (3, expected, DIM, EMB)


# ------------------------------------------------------------------------- save / load


def test_save_load_round_trip(
    tmp_path: Path, flat: tuple[VectorIndex, np.ndarray, np.ndarray]
) -> None:
    vi, ids, _ = flat
    path = tmp_path / "vectors.faiss"
    written = vi.save(path)
    expected = Manifest.for_ids(EMB, DIM, ids)
    assert written == expected
    doc = json.loads(manifest_path(path).read_text())
    assert doc["embedder_id"] == EMB and doc["count"] == 2000 and doc["kind"] == "flat"
    assert doc["format_version"] == index_mod.FORMAT_VERSION
    assert doc["ids_sha256"] == ids_checksum(ids) and doc["dim"] == DIM
    loaded = load(path, expected)
    assert loaded is not None and loaded.kind == "flat" and loaded.embedder_id == EMB
    q = unit(10, seed=2)
    for a, b in zip(vi.search(q, 10), loaded.search(q, 10)):
        np.testing.assert_array_equal(a, b)
    assert sorted(os.listdir(tmp_path)) == ["vectors.faiss", "vectors.faiss.manifest.json"]


def test_load_refuses_anything_that_does_not_match(
    tmp_path: Path, flat: tuple[VectorIndex, np.ndarray, np.ndarray]
) -> None:
    vi, ids, _ = flat
    path = tmp_path / "vectors.faiss"
    vi.save(path)
    good = Manifest.for_ids(EMB, DIM, ids)
    other_ids = ids.copy()
    other_ids[0] = ids.max() + 1  # same count, different set
    for expected in (
        Manifest.for_ids(EMB, DIM, ids[:-1]),  # different count
        Manifest.for_ids(EMB, DIM, other_ids),  # different id set
        Manifest.for_ids("hashed-ngram-v1-32", DIM, ids),  # different embedder
        Manifest.for_ids(EMB, DIM + 1, ids),  # different dimension
    ):
        assert load(path, expected) is None
    assert load(tmp_path / "missing.faiss", good) is None
    assert load(path, good) is not None


def test_load_refuses_broken_or_inconsistent_files(
    tmp_path: Path, flat: tuple[VectorIndex, np.ndarray, np.ndarray]
) -> None:
    vi, ids, vecs = flat
    path = tmp_path / "v.faiss"
    good = Manifest.for_ids(EMB, DIM, ids)
    mpath = manifest_path(path)

    vi.save(path)
    mpath.unlink()  # index without manifest
    assert load(path, good) is None

    vi.save(path)
    mpath.write_text("{not json")
    assert load(path, good) is None

    vi.save(path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])  # truncated index
    assert load(path, good) is None
    path.write_bytes(b"garbage" * 10)
    assert load(path, good) is None

    # A manifest that claims the right ids over a file that holds others (a crash
    # between the two renames of an older writer, a hand-copied file, ...).
    vi.save(path)
    other = VectorIndex(DIM, embedder_id=EMB)
    other.build(ids + 1, vecs)
    faiss.write_index(other._index, str(path))
    assert load(path, good) is None


def test_failed_write_leaves_no_partial_file(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    flat: tuple[VectorIndex, np.ndarray, np.ndarray],
) -> None:
    vi, ids, _ = flat
    path = tmp_path / "v.faiss"
    vi.save(path)
    before = {p: p.read_bytes() for p in tmp_path.iterdir()}
    vi.remove(ids[:10])

    def broken_write(index: object, name: str) -> None:
        Path(name).write_bytes(b"half an index")
        raise RuntimeError("disk full")

    monkeypatch.setattr(faiss, "write_index", broken_write)
    with pytest.raises(MindoryError, match="disk full"):
        vi.save(path)
    # no temporary file left, the previous pair untouched and still valid
    assert {p: p.read_bytes() for p in tmp_path.iterdir()} == before
    assert load(path, Manifest.for_ids(EMB, DIM, ids)) is not None


def test_crash_between_renames_is_never_served(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    flat: tuple[VectorIndex, np.ndarray, np.ndarray],
) -> None:
    vi, ids, _ = flat
    path = tmp_path / "v.faiss"
    vi.save(path)
    vi.remove(ids[:10])
    real_replace = os.replace
    calls = []

    def replace_then_die(src: str, dst: str) -> None:
        calls.append(dst)
        if len(calls) == 2:  # the index is in place, its manifest is not
            raise OSError("power cut")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace_then_die)
    with pytest.raises(MindoryError):
        vi.save(path)
    monkeypatch.undo()
    assert [p.name for p in tmp_path.iterdir()] == ["v.faiss"]
    assert load(path, Manifest.for_ids(EMB, DIM, ids)) is None  # old expectation
    assert load(path, Manifest.for_ids(EMB, DIM, ids[10:])) is None  # new one: no manifest


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root ignores permissions")
def test_read_only_folder(tmp_path: Path, flat: tuple[VectorIndex, np.ndarray, np.ndarray]) -> None:
    vi, _, _ = flat
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        with pytest.raises(MindoryError):
            vi.save(folder / "v.faiss")
        assert list(folder.iterdir()) == []
    finally:
        folder.chmod(0o700)


# ------------------------------------------------------------------------- HNSW


def real_vectors(n: int) -> np.ndarray:
    """Hashed embeddings of 800-char slices of a corpus text (clustered unit vectors
    otherwise): HNSW recall depends on the data, so test it on the real kind."""
    path = CORPUS / "txt_en_news-from-nowhere_ascii_crlf.txt"
    if path.exists():
        text = path.read_bytes().decode("ascii")
        stride = (len(text) - 800) // n
        chunks = [text[i * stride : i * stride + 800] for i in range(n)]
        return HashedNgramEmbedder(DIM * 4).embed(chunks)
    rng = np.random.default_rng(0)
    centers = rng.standard_normal((50, DIM * 4))
    v = centers[rng.integers(0, 50, n)] + 0.5 * rng.standard_normal((n, DIM * 4))
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


@pytest.fixture(scope="module")
def hnsw_data() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    vecs = real_vectors(3300)
    return sparse_ids(3000, seed=1), vecs[:3000], vecs[3000:]  # last 300: queries


def recall(approx: np.ndarray, exact: np.ndarray) -> float:
    return float(np.mean([len(set(a) & set(e)) / len(e) for a, e in zip(approx, exact)]))


def test_ivf_above_the_threshold_with_good_recall(
    hnsw_data: tuple[np.ndarray, np.ndarray, np.ndarray],
) -> None:
    ids, vecs, queries = hnsw_data
    dim = vecs.shape[1]
    small = VectorIndex(dim, flat_max=1000)
    small.build(ids[:1000], vecs[:1000])
    assert small.kind == "flat"
    # 3,000 vectors make 64 small lists: half of them are searched here; at the sizes
    # where the library uses IVF (> 200k) a quarter finds >= 0.958 (bench_pg_vectors).
    vi = VectorIndex(dim, flat_max=1000, probe_share=0.5)
    vi.build(ids, vecs)
    assert vi.kind == "ivf"
    exact = brute(vecs, ids, queries, 10)[1]
    assert recall(vi.search(queries, 10)[1], exact) >= 0.95


def test_ivf_lists_follow_the_size() -> None:
    assert index_mod.ivf_lists(1_000_000) == 4096
    assert index_mod.ivf_lists(100_000) == 1024
    assert index_mod.ivf_lists(3000) == 64  # at least 39 vectors a list
    assert index_mod.ivf_lists(10) == 1


def test_ivf_remove_filters_save_load_and_retrains_when_grown(
    hnsw_data: tuple[np.ndarray, np.ndarray, np.ndarray], tmp_path: Path
) -> None:
    ids, vecs, queries = hnsw_data
    dim = vecs.shape[1]
    vi = VectorIndex(dim, kind="ivf", embedder_id=EMB, max_dead_share=0.2)
    vi.build(ids[:700], vecs[:700])
    assert vi.kind == "ivf"
    vi.add(ids[700:], vecs[700:])  # past 4x what its lists learnt from: trained again
    assert len(vi) == 3000 and vi._trained_for == 3000
    dead = ids[:300]
    assert vi.remove(dead) == 300 and vi.dead_count == 300
    assert not np.isin(vi.search(vecs[:300], 10)[1], dead).any()
    path = tmp_path / "i.faiss"
    vi.save(path)
    loaded = load(path, Manifest.for_ids(EMB, dim, ids[300:]))
    assert loaded is not None and loaded.kind == "ivf" and loaded.dead_count == 300
    np.testing.assert_array_equal(loaded.search(queries, 10)[1], vi.search(queries, 10)[1])
    got_ids, got_vecs = loaded.vectors()  # reconstruction works after a load
    order = np.argsort(got_ids)
    np.testing.assert_array_equal(got_ids[order], np.sort(ids[300:]))
    np.testing.assert_array_equal(got_vecs[order], vecs[300:][np.argsort(ids[300:])])
    # a filter: small ones exactly, large ones through the lists
    book = ids[400:600]
    _, got = loaded.search(queries, 10, allowed_ids=book)
    np.testing.assert_array_equal(got, brute(vecs[400:600], book, queries, 10)[1])


def test_hnsw_remove_filters_then_compacts(
    hnsw_data: tuple[np.ndarray, np.ndarray, np.ndarray], tmp_path: Path
) -> None:
    ids, vecs, queries = hnsw_data
    dim = vecs.shape[1]
    vi = VectorIndex(dim, kind="hnsw", embedder_id=EMB, max_dead_share=0.2)
    vi.build(ids, vecs)
    dead = ids[:300]
    assert vi.remove(dead) == 300
    assert vi.ntotal == 3000 and vi.dead_count == 300 and len(vi) == 2700
    _, got = vi.search(vecs[:300], 10)  # the dead vectors themselves as queries
    assert not np.isin(got, dead).any()
    # the deleted set survives save/load
    path = tmp_path / "h.faiss"
    vi.save(path)
    loaded = load(path, Manifest.for_ids(EMB, dim, ids[300:]))
    assert loaded is not None and loaded.kind == "hnsw" and loaded.dead_count == 300
    assert not np.isin(loaded.search(vecs[:300], 10)[1], dead).any()
    # re-adding a dead id works (it forces a clean graph first)
    vi.add(ids[:1], vecs[:1])
    assert vi.search(vecs[:1], 1)[1][0, 0] == ids[0]
    # past the dead share the graph is rebuilt without the dead entries
    vi.remove(ids[1:1000])  # 700 more dead of 2701 > 20%
    assert vi.dead_count == 0 and vi.ntotal == len(vi) == 2001
    exact = brute(vecs[1000:], ids[1000:], queries, 10)[1]
    filtered = vi.search(queries, 10, allowed_ids=ids[1000:])[1]
    assert recall(filtered, exact) >= 0.95


def test_hnsw_filters(
    hnsw_data: tuple[np.ndarray, np.ndarray, np.ndarray], monkeypatch: pytest.MonkeyPatch
) -> None:
    ids, vecs, queries = hnsw_data
    vi = VectorIndex(vecs.shape[1], kind="hnsw")
    vi.build(ids, vecs)
    book = ids[100:400]
    # small filter: answered exactly from the allowed vectors
    scores, got = vi.search(queries, 10, allowed_ids=book)
    want_s, want_i = brute(vecs[100:400], book, queries, 10)
    np.testing.assert_array_equal(got, want_i)
    np.testing.assert_allclose(scores, want_s, atol=1e-5)
    # large filter: through FAISS's selector in the graph search
    monkeypatch.setattr(index_mod, "EXACT_SUBSET_MAX", 10)
    half = ids[::2]
    _, got = vi.search(queries, 10, allowed_ids=half)
    assert np.isin(got, half).all()
    assert recall(got, brute(vecs[::2], half, queries, 10)[1]) >= 0.95


def test_kind_follows_size(hnsw_data: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
    ids, vecs, _ = hnsw_data
    vi = VectorIndex(vecs.shape[1], flat_max=2000, max_dead_share=0.2)
    vi.build(ids[:1500], vecs[:1500])
    assert vi.kind == "flat"
    vi.add(ids[1500:], vecs[1500:])  # crosses the threshold: converted once
    assert vi.kind == "ivf" and len(vi) == 3000
    vi.remove(ids[:1200])  # compaction to 1800 live vectors: back to flat
    assert vi.kind == "flat" and len(vi) == vi.ntotal == 1800
    got_ids, got_vecs = vi.vectors()
    order = np.argsort(got_ids)
    ref = np.argsort(ids[1200:])
    np.testing.assert_array_equal(got_ids[order], ids[1200:][ref])
    np.testing.assert_array_equal(got_vecs[order], vecs[1200:][ref])


def test_hnsw_deleted_filter_follows_rebuilds(
    hnsw_data: tuple[np.ndarray, np.ndarray, np.ndarray],
) -> None:
    ids, vecs, _ = hnsw_data
    vi = VectorIndex(vecs.shape[1], kind="hnsw")
    vi.build(ids[:1000], vecs[:1000])
    a, b = ids[:50], ids[50:100]
    vi.remove(a)
    assert not np.isin(vi.search(vecs[:100], 5)[1], a).any()
    vi.build(ids[:1000], vecs[:1000])  # everything back, same number removed next
    vi.remove(b)
    got = vi.search(vecs[:100], 5)[1]
    assert not np.isin(got, b).any()
    assert (got[:50, 0] == a).all()  # a's vectors find themselves again


def test_unwritable_folder_is_a_clear_error(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    flat: tuple[VectorIndex, np.ndarray, np.ndarray],
) -> None:
    """What a read-only folder does, also when running as root (which ignores modes)."""
    vi, _, _ = flat

    def refuse(*args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(index_mod.tempfile, "mkstemp", refuse)
    with pytest.raises(MindoryError, match="Permission denied"):
        vi.save(tmp_path / "v.faiss")
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------ flat, large


def test_a_large_flat_index_scans_in_fp16_and_returns_exact_scores() -> None:
    # coarse_min=0: the fp16 pass and the float32 re-score, as at 50k vectors and up.
    ids, vecs = sparse_ids(3000, seed=3), unit(3000, seed=3)
    vi = VectorIndex(DIM, embedder_id=EMB, coarse_min=0)
    vi.build(ids, vecs)
    q = unit(40, seed=11)
    scores, got = vi.search(q, 10)
    want_s, want_i = brute(vecs, ids, q, 10)
    np.testing.assert_array_equal(got, want_i)
    np.testing.assert_allclose(scores, want_s, atol=1e-6)
    # Restricted to some ids, after adds and removes: still the exact answer.
    more_ids, more = sparse_ids(500, seed=4) + 10**6, unit(500, seed=4)
    vi.add(more_ids, more)
    gone = ids[::3]
    vi.remove(gone)
    keep = ~np.isin(ids, gone)
    all_ids, all_vecs = np.r_[ids[keep], more_ids], np.vstack([vecs[keep], more])
    allowed = all_ids[::2]
    scores, got = vi.search(q, 10, allowed_ids=allowed)
    mask = np.isin(all_ids, allowed)
    want_s, want_i = brute(all_vecs[mask], all_ids[mask], q, 10)
    np.testing.assert_array_equal(got, want_i)
    np.testing.assert_allclose(scores, want_s, atol=1e-6)
    scores, got = vi.search(q, 10)
    np.testing.assert_array_equal(got, brute(all_vecs, all_ids, q, 10)[1])
    assert vi.kind == "flat"


def _routed(n: int, seed: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """Unit vectors that fill one half of 64 dimensions each (the default embedder's
    shape: MiniLM's half or e5's), with exact copies (one text in two books)."""
    rng = np.random.default_rng(seed)
    vecs = np.zeros((n, 64), dtype=np.float32)
    half = rng.random(n) < 0.3
    body = rng.standard_normal((n, 32)).astype(np.float32)
    body /= np.linalg.norm(body, axis=1, keepdims=True)
    vecs[~half, :32] = body[~half]
    vecs[half, 32:] = body[half]
    vecs[n // 2 : n // 2 + 20] = vecs[:20]  # copies: equal scores, ties by id
    return np.arange(1, n + 1, dtype=np.int64) * 3, vecs


def test_a_query_of_one_half_scans_that_half_and_agrees_bit_for_bit() -> None:
    ids, vecs = _routed(3000)
    halves = VectorIndex(64)
    halves.build(ids, vecs)
    full = VectorIndex(64)
    full.build(ids, vecs)
    full._search_half = lambda q, k: None  # type: ignore[method-assign]  # the full scan alone
    for row in [*range(0, 3000, 97), *range(0, 20)]:
        q = vecs[row : row + 1]
        for k in (1, 10, 60):
            s1, i1 = halves.search(q, k)
            s2, i2 = full.search(q, k)
            assert np.array_equal(i1, i2) and np.array_equal(s1, s2)
    assert set(halves._halves) == {0, 1}
    # Kept in step with adds and removals.
    more_ids, more = _routed(200, seed=9)
    halves.add(more_ids + 10**6, more)
    full.add(more_ids + 10**6, more)
    halves.remove(ids[::7])
    full.remove(ids[::7])
    for row in range(0, 200, 13):
        q = more[row : row + 1]
        s1, i1 = halves.search(q, 50)
        s2, i2 = full.search(q, 50)
        assert np.array_equal(i1, i2) and np.array_equal(s1, s2)


def test_a_half_query_without_enough_positive_scores_falls_back_to_the_full_scan() -> None:
    vecs = np.zeros((8, 64), dtype=np.float32)
    vecs[:3, 0] = 1.0  # three rows of the first half
    vecs[3:, 40] = 1.0  # five of the second
    index = VectorIndex(64)
    index.build(np.arange(1, 9), vecs)
    q = -vecs[:1]  # -1 against its own half: the other half's rows (0) come first
    scores, found = index.search(q, 2)
    assert scores[0].tolist() == [0.0, 0.0] and set(found[0].tolist()) <= {4, 5, 6, 7, 8}
    assert index.search(vecs[:1], 2)[0][0].tolist() == [1.0, 1.0]  # its own half: 1
