"""Text → vector: the Embedder protocol, the built-in offline embedder, model backends.

Every embedder returns float32 rows of unit L2 length, so inner product is cosine
similarity and the FAISS index can use ``IndexFlatIP``. A text with no features
(empty, only punctuation or whitespace) embeds as the **zero vector**: it scores 0
against everything instead of producing NaN.

An embedder's ``id`` names it, its version and its dimension (``hashed-ngram-v1-384``,
``model2vec-potion-base-8M-1a2b3c4d5e6f-256``). It enters the pipeline settings
fingerprint and the index manifest, so changing the model — or the files of a model
folder — changes the id, and stored vectors / the index are rebuilt rather than mixed.

Model backends never download anything: a spec names a local folder, or a model name
that is already in the local Hugging Face cache.
"""

from __future__ import annotations

import hashlib
import os
import unicodedata
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from mindory.errors import MindoryError

__all__ = [
    "Embedder",
    "FastEmbedEmbedder",
    "HashedNgramEmbedder",
    "Model2VecEmbedder",
    "SentenceTransformerEmbedder",
    "embed_queries",
    "embed_text_for_chunk",
    "get_embedder",
    "l2_normalize",
]


@runtime_checkable
class Embedder(Protocol):
    """Anything that turns texts into unit-length float32 rows."""

    @property
    def id(self) -> str:
        """Name + version + dimension; part of the settings fingerprint."""
        ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """float32 array of shape (len(texts), dim); rows L2-normalized or all zero."""
        ...


def embed_queries(embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
    """Vectors of search questions: the embedder's ``embed_query`` where it has one (a model
    trained with a query prefix, such as e5), else ``embed``."""
    as_query = getattr(embedder, "embed_query", None)
    return np.asarray(as_query(texts) if as_query is not None else embedder.embed(texts))


def l2_normalize(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length as C-contiguous float32; zero (or non-finite) rows → 0."""
    v = np.asarray(vectors, dtype=np.float64)
    if v.ndim == 1:
        v = v.reshape(1, -1)
    # A model may return NaN for an empty input (mean over zero tokens); that is "no features".
    v = np.where(np.isfinite(v), v, 0.0)
    norms = np.sqrt(np.einsum("ij,ij->i", v, v))
    safe = np.where(norms > 0.0, norms, 1.0)
    return np.ascontiguousarray(v / safe[:, None], dtype=np.float32)


def embed_text_for_chunk(
    text: str,
    *,
    title: str | None = None,
    section_title: str | None = None,
    context_header: bool,
    embedder: Embedder | None = None,
) -> str:
    """The text an embedder sees for a chunk: optionally "Book › Section\\n\\n" + text.

    The header is for embedding only; chunk spans and stored text never include it.
    Empty titles are left out, and with neither title there is no header. Without the
    header, an ``embedder`` with a ``text_for_chunk(text, section_title)`` of its own
    (the default embedder: a Chinese chapter's title for e5) decides.
    """
    if not context_header:
        own = getattr(embedder, "text_for_chunk", None)
        return str(own(text, section_title)) if own is not None else text
    parts = [p.strip() for p in (title, section_title) if p and p.strip()]
    if not parts:
        return text
    return " › ".join(parts) + "\n\n" + text


# --------------------------------------------------------------------------------------
# The built-in embedder: signed feature hashing of character n-grams and words.

_OTHER, _WORD, _CJK = 0, 1, 2

# Scripts written without spaces between words, where character 1–2 grams work.
_CJK_RANGES: tuple[tuple[int, int], ...] = (
    (0x1100, 0x11FF),  # Hangul Jamo
    (0x3005, 0x3007),  # 々 〆 〇
    (0x3021, 0x3029),  # Hangzhou numerals
    (0x3038, 0x303B),
    (0x3040, 0x30FF),  # Hiragana, Katakana
    (0x3100, 0x312F),  # Bopomofo
    (0x3130, 0x318F),  # Hangul compatibility Jamo
    (0x31A0, 0x31BF),  # Bopomofo extended
    (0x31F0, 0x31FF),  # Katakana phonetic extensions
    (0x3400, 0x4DBF),  # CJK extension A
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xA960, 0xA97F),  # Hangul Jamo extended A
    (0xAC00, 0xD7FF),  # Hangul syllables, Jamo extended B
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
    (0xFF66, 0xFF9F),  # halfwidth Katakana
    (0xFFA0, 0xFFDC),  # halfwidth Hangul
    (0x1B000, 0x1B16F),  # Kana supplement / extended
    (0x20000, 0x323AF),  # CJK extensions B–H, compatibility supplement
)
_TABLE_SIZE = 0x323B0 + 1  # the last entry (_OTHER) stands for every higher code point

_char_table: np.ndarray | None = None


def _class_table() -> np.ndarray:
    """Code point → _OTHER / _WORD / _CJK, built once (~0.1 s) on first use."""
    global _char_table
    if _char_table is None:
        table = np.zeros(_TABLE_SIZE, dtype=np.uint8)
        cat = unicodedata.category
        # Letters, digits and combining marks (so Devanagari vowel signs or decomposed
        # accents don't split a word) of every alphabetic script form words.
        word = [i for i in range(_TABLE_SIZE - 1) if cat(chr(i))[0] in "LNM"]
        table[np.asarray(word, dtype=np.int64)] = _WORD
        for lo, hi in _CJK_RANGES:
            table[lo : hi + 1] = _CJK
        table[-1] = _OTHER
        _char_table = table
    return _char_table


# 64-bit arithmetic wraps modulo 2**64 in numpy, which is exactly what a polynomial hash
# wants; the result depends only on the code points, never on the process (unlike hash()).
_BASE = 0x100000001B3  # FNV-64 prime as the polynomial base
_Q = np.uint64(_BASE)
_Q2 = np.uint64(pow(_BASE, 2, 1 << 64))
_Q3 = np.uint64(pow(_BASE, 3, 1 << 64))
_QINV = np.uint64(pow(_BASE, -1, 1 << 64))  # the base is odd, so it has an inverse
_POWERS_CACHE_MAX = 1 << 21
_pw_cache: tuple[np.ndarray, np.ndarray] = (np.ones(1, np.uint64), np.ones(1, np.uint64))


def _powers(n: int) -> tuple[np.ndarray, np.ndarray]:
    """(Q**j, Q**-j) for j < n, mod 2**64; cached (up to 2M entries) and grown by doubling."""
    global _pw_cache
    pw, inv = _pw_cache
    if pw.size < n:
        size = max(n, 2 * pw.size, 1 << 16)
        pw = np.cumprod(np.r_[np.uint64(1), np.full(size - 1, _Q, dtype=np.uint64)])
        inv = np.cumprod(np.r_[np.uint64(1), np.full(size - 1, _QINV, dtype=np.uint64)])
        if size <= _POWERS_CACHE_MAX:  # one huge text must not pin 2 x 8 bytes per char
            _pw_cache = (pw, inv)
    return pw[:n], inv[:n]


# One seed per feature kind so a CJK bigram never collides systematically with a word.
_SEED_CJK1 = np.uint64(0x9E3779B97F4A7C15)
_SEED_CJK2 = np.uint64(0xC2B2AE3D27D4EB4F)
_SEED_TRI = np.uint64(0x165667B19E3779F9)
_SEED_QUAD = np.uint64(0x27D4EB2F165667C5)
_SEED_WORD = np.uint64(0x85EBCA77C2B2AE63)
_SPACE = np.uint64(0x20)
_FULLWIDTH_LO, _FULLWIDTH_HI, _FULLWIDTH_SHIFT = 0xFF01, 0xFF5E, 0xFEE0
_KEY_BITS = 40  # feature bits kept per (text, feature) key; the text index goes above


def _mix(h: np.ndarray) -> np.ndarray:
    """Spread the polynomial hashes over the high bits (xor-shift, multiply; in place).

    Only the top 40 bits are used (bucket and sign), and a multiply carries every low bit
    upwards, so one round of SplitMix64's finalizer is enough (a full one cost 10% more
    time for no measurable change in retrieval).
    """
    h ^= h >> np.uint64(29)
    h *= np.uint64(0xBF58476D1CE4E5B9)
    h ^= h >> np.uint64(32)
    return h


class HashedNgramEmbedder:
    """Offline, deterministic bag of hashed n-grams (numpy only).

    Features, each hashed with a stable 64-bit polynomial hash and a SplitMix64-style mix:

    * runs of CJK characters (Han, Hiragana, Katakana, Hangul): character 1- and 2-grams;
    * words of alphabetic scripts (Latin, Greek, Cyrillic, …; letters, digits, marks),
      casefolded, fullwidth ASCII folded to ASCII: the whole word plus the character 3-
      and 4-grams of `` word `` (the spaces mark the word boundaries, as in fastText).

    Each distinct feature of a text weighs ``1 + log(tf)`` (sublinear tf), is added to
    bucket ``hash % dim`` with a sign taken from another hash bit (signed feature hashing
    keeps collisions unbiased), and rows are L2-normalized. Featureless text → zero row.
    """

    VERSION = 1
    _BATCH = 256  # texts per vectorized pass: bounds the temporary arrays

    def __init__(self, dim: int = 384) -> None:
        if not 8 <= dim <= 1 << 16:
            raise MindoryError(f"hashed embedder dimension must be in 8..65536, not {dim}")
        self._dim = int(dim)
        self._table = _class_table()

    @property
    def id(self) -> str:
        return f"hashed-ngram-v{self.VERSION}-{self._dim}"

    @property
    def dim(self) -> int:
        return self._dim

    def __repr__(self) -> str:
        return f"HashedNgramEmbedder(dim={self._dim})"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not one str")
        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        for lo in range(0, len(texts), self._BATCH):
            batch = texts[lo : lo + self._BATCH]
            out[lo : lo + len(batch)] = self._embed_batch(batch)
        return out

    def _features(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """(text index, 64-bit feature hash) of every feature occurrence in ``texts``."""
        folded = [t.casefold() for t in texts]
        # One code point array for the whole batch; NUL separators (and one at each end)
        # are non-word characters, so no n-gram crosses from one text into the next.
        joined = "\x00" + "\x00".join(folded) + "\x00"
        cp = np.frombuffer(joined.encode("utf-32-le", "surrogatepass"), dtype=np.uint32).copy()
        n_cp = cp.size
        lengths = np.fromiter((len(t) + 1 for t in folded), dtype=np.int64, count=len(folded))
        # Text index of every position (the leading NUL gets 0; it never holds a feature).
        owner = np.repeat(np.arange(len(folded), dtype=np.uint64), lengths)
        owner = np.r_[np.zeros(1, np.uint64), owner]
        full = (cp >= _FULLWIDTH_LO) & (cp <= _FULLWIDTH_HI)
        if full.any():
            cp[full] -= _FULLWIDTH_SHIFT  # ＡＢＣ１２ (common in Chinese text) → abc12
        if int(cp.max()) >= _TABLE_SIZE:
            np.minimum(cp, _TABLE_SIZE - 1, out=cp)  # every higher code point is _OTHER
        cls = self._table[cp]
        is_w = cls == _WORD
        is_c = cls == _CJK
        # Non-word characters act as the boundary mark " ".
        lat = np.where(is_w, cp, 0x20).astype(np.uint64)

        hashes: list[np.ndarray] = []
        owners: list[np.ndarray] = []
        # Rolling polynomial hashes of every window, computed on whole arrays (contiguous
        # SIMD work), then only the valid windows are gathered.
        p2 = lat[:-1] + lat[1:] * _Q
        p3 = p2[:-1] + lat[2:] * _Q2
        # Latin 3-grams: a window whose middle is a word character lies inside one padded
        # word " word ".
        i3 = np.flatnonzero(is_w[1:-1])
        hashes.append(p3[i3] + _SEED_TRI)
        owners.append(owner[i3 + 1])
        # 4-grams: both middle characters are word characters.
        i4 = np.flatnonzero(is_w[1:-2] & is_w[2:-1])
        hashes.append(p3[i4] + lat[i4 + 3] * _Q3 + _SEED_QUAD)
        owners.append(owner[i4 + 1])
        # Whole words: with g[j] = sum of lat[i] * Q**i for i <= j, the word [s, e) hashes
        # to (g[e-1] - g[s-1]) * Q**-s = sum lat[s+k] * Q**k, wherever it stands.
        starts = np.flatnonzero(is_w[1:] & ~is_w[:-1]) + 1
        if starts.size:
            ends = np.flatnonzero(is_w[:-1] & ~is_w[1:]) + 1
            pw, inv = _powers(n_cp)
            g = np.cumsum(lat * pw)
            hashes.append((g[ends - 1] - g[starts - 1]) * inv[starts] + _SEED_WORD)
            owners.append(owner[starts])
        if is_c.any():
            # CJK character unigrams and bigrams inside runs.
            c64 = cp.astype(np.uint64)
            i1 = np.flatnonzero(is_c)
            hashes.append(c64[i1] + _SEED_CJK1)
            owners.append(owner[i1])
            i2 = np.flatnonzero(is_c[:-1] & is_c[1:])
            hashes.append(c64[i2] + c64[i2 + 1] * _Q + _SEED_CJK2)
            owners.append(owner[i2])
        return np.concatenate(owners), _mix(np.concatenate(hashes))

    def _embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        n, dim = len(texts), self._dim
        owner, h = self._features(texts)
        if h.size == 0:
            return np.zeros((n, dim), dtype=np.float32)
        # Count each distinct (text, feature) once: sort the packed keys.
        keys = (owner << np.uint64(_KEY_BITS)) | (h >> np.uint64(64 - _KEY_BITS))
        keys.sort()
        first = np.empty(keys.size, dtype=bool)
        first[0] = True
        np.not_equal(keys[1:], keys[:-1], out=first[1:])
        idx = np.flatnonzero(first)
        uniq = keys[idx]
        tf = np.diff(np.append(idx, keys.size))
        feat = uniq & np.uint64((1 << _KEY_BITS) - 1)
        # Bucket from the upper 39 bits by multiply-shift (Lemire's range reduction; a
        # 64-bit modulo is several times slower), sign from the lowest bit.
        bucket = ((feat >> np.uint64(1)) * np.uint64(dim)) >> np.uint64(_KEY_BITS - 1)
        weight = 1.0 + np.log(tf)
        weight[(feat & np.uint64(1)).astype(bool)] *= -1.0
        row = (uniq >> np.uint64(_KEY_BITS)).astype(np.int64)
        flat = row * dim + bucket.astype(np.int64)
        dense = np.bincount(flat, weights=weight, minlength=n * dim).reshape(n, dim)
        return l2_normalize(dense)


# --------------------------------------------------------------------------------------
# Model backends. Imported lazily: the packages are optional extras.


def _missing(package: str, extra: str) -> MindoryError:
    return MindoryError(f"{package} is not installed: pip install 'mindory[{extra}]'")


_SKIP_NAMES = {"readme.md", ".gitattributes", ".gitignore"}
_FULL_HASH_LIMIT = 256 << 20  # larger files: size + first and last 32 MiB
_EDGE = 32 << 20


def model_fingerprint(folder: Path) -> str:
    """Short content hash of a model folder's config, tokenizer and weight files.

    Hashes every file's relative name, size and bytes (README and hidden entries left
    out, so editing a model card doesn't force re-embedding). Files over 256 MiB hash
    their size plus first and last 32 MiB, which keeps loading a big model fast.
    """
    h = hashlib.sha256()
    files = sorted(
        p
        for p in folder.rglob("*")
        if p.is_file()
        and p.name.lower() not in _SKIP_NAMES
        and not any(part.startswith(".") for part in p.relative_to(folder).parts)
    )
    for p in files:
        size = p.stat().st_size
        h.update(p.relative_to(folder).as_posix().encode() + b"\0" + str(size).encode() + b"\0")
        with p.open("rb") as f:
            if size <= _FULL_HASH_LIMIT:
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
            else:
                h.update(f.read(_EDGE))
                f.seek(size - _EDGE)
                h.update(f.read(_EDGE))
    return h.hexdigest()[:12]


def _resolve_model_dir(path_or_name: str, backend: str) -> tuple[Path, str]:
    """A local model folder and its display name. Never touches the network.

    A path that exists is used as is; anything else must be a model already in the local
    Hugging Face cache (``local_files_only``).
    """
    path = Path(path_or_name).expanduser()
    if path.is_dir():
        return path.resolve(), path.resolve().name
    if path.exists():
        raise MindoryError(f"{backend} model must be a folder, not a file", path=str(path))
    looks_like_name = (
        path_or_name.count("/") <= 1
        and not path_or_name.startswith((".", "/", "~"))
        and path_or_name.strip() != ""
    )
    if looks_like_name:
        try:
            import huggingface_hub

            local = huggingface_hub.snapshot_download(path_or_name, local_files_only=True)
            return Path(local), path_or_name.replace("/", "_")
        except Exception:  # noqa: BLE001 - any failure means "not available offline"
            pass
    raise MindoryError(
        f"{backend} model not found: no such folder, and no model of that name in the local "
        "cache (mindory never downloads models; pass the model's folder)",
        path=path_or_name,
    )


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name)[:64] or "model"


class _ModelEmbedder:
    """Shared plumbing of the model backends: id, dim, batching, normalization."""

    backend = "model"

    def __init__(self, folder: Path, name: str, dim: int, encode: Callable[[list[str]], Any]):
        self.folder = folder
        self.name = name
        self._dim = int(dim)
        self._encode = encode
        self._id = f"{self.backend}-{_slug(name)}-{model_fingerprint(folder)}-{self._dim}"

    @property
    def id(self) -> str:
        return self._id

    @property
    def dim(self) -> int:
        return self._dim

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.folder)!r})"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not one str")
        if len(texts) == 0:
            return np.zeros((0, self._dim), dtype=np.float32)
        vectors = np.asarray(self._encode(list(texts)), dtype=np.float32)
        if vectors.shape != (len(texts), self._dim):
            raise MindoryError(
                f"{self.backend} model returned shape {vectors.shape}, "
                f"expected {(len(texts), self._dim)}",
                path=str(self.folder),
            )
        out = l2_normalize(vectors)
        # Models embed "" to some constant vector; the protocol promises zero for no text.
        empty = np.fromiter((not t.strip() for t in texts), dtype=bool, count=len(texts))
        out[empty] = 0.0
        return out


class Model2VecEmbedder(_ModelEmbedder):
    """A model2vec static model (``StaticModel.from_pretrained``) from a local folder."""

    backend = "model2vec"

    def __init__(self, path_or_name: str) -> None:
        try:
            from model2vec import StaticModel
        except ImportError as exc:
            raise _missing("model2vec", "model2vec") from exc
        folder, name = _resolve_model_dir(path_or_name, self.backend)
        try:
            # force_download=False: a local folder is read as is, never fetched again.
            model = StaticModel.from_pretrained(folder, force_download=False)
        except Exception as exc:  # noqa: BLE001 - wrap library errors into one clear one
            raise MindoryError(f"cannot load model2vec model: {exc}", path=str(folder)) from exc
        self.model = model

        def encode(texts: list[str]) -> Any:
            # No thread pool: the caller batches, and results must not depend on timing.
            return model.encode(texts, use_multiprocessing=False, show_progress_bar=False)

        super().__init__(folder, name, int(model.dim), encode)


class FastEmbedEmbedder(_ModelEmbedder):
    """An ONNX model through fastembed, from a local folder.

    fastembed needs to know the architecture (pooling, dimension) of a model by name, so
    the spec is ``fastembed:/path/to/folder`` when the folder's name is a model fastembed
    supports with ``/`` written as ``_`` or ``--`` (``BAAI--bge-small-en-v1.5``), or
    ``fastembed:NAME=/path/to/folder`` to say it explicitly.
    """

    backend = "fastembed"

    def __init__(self, path_or_name: str, *, model_name: str | None = None) -> None:
        try:
            from fastembed import TextEmbedding
        except ImportError as exc:
            raise _missing("fastembed", "fastembed") from exc
        if model_name is None and "=" in path_or_name and not Path(path_or_name).exists():
            model_name, path_or_name = path_or_name.split("=", 1)
        folder, name = _resolve_model_dir(path_or_name, self.backend)
        # fastembed matches names case-insensitively; so do we.
        supported = {
            str(m["model"]).lower(): (str(m["model"]), int(m["dim"]))
            for m in TextEmbedding.list_supported_models()
        }
        if model_name is None:
            model_name = _match_supported(folder.name, supported) or _match_supported(
                name, supported
            )
        if model_name is None or model_name.lower() not in supported:
            raise MindoryError(
                "fastembed needs the model's name: use fastembed:NAME=/path/to/folder with a "
                "name from fastembed's supported models",
                path=str(folder),
            )
        model_name, dim = supported[model_name.lower()]
        try:
            model = TextEmbedding(
                model_name=model_name, specific_model_path=str(folder), local_files_only=True
            )
        except Exception as exc:  # noqa: BLE001
            raise MindoryError(f"cannot load fastembed model: {exc}", path=str(folder)) from exc
        self.model = model

        def encode(texts: list[str]) -> Any:
            return np.stack(list(model.embed(texts)))

        super().__init__(folder, model_name, dim, encode)


def _match_supported(name: str, supported: dict[str, tuple[str, int]]) -> str | None:
    wanted = name.lower()
    for low in supported:
        if wanted in (low, low.replace("/", "_"), low.replace("/", "--"), low.split("/")[-1]):
            return low
    return None


class SentenceTransformerEmbedder(_ModelEmbedder):
    """A sentence-transformers model from a local folder (needs torch; runs on CPU)."""

    backend = "sentence-transformers"

    def __init__(self, path_or_name: str, *, device: str = "cpu") -> None:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise _missing("sentence-transformers", "sentence-transformers") from exc
        folder, name = _resolve_model_dir(path_or_name, self.backend)
        try:
            model = SentenceTransformer(str(folder), device=device, local_files_only=True)
        except Exception as exc:  # noqa: BLE001
            raise MindoryError(
                f"cannot load sentence-transformers model: {exc}", path=str(folder)
            ) from exc
        # Renamed in sentence-transformers 5; accept both spellings.
        get_dim = (
            getattr(model, "get_sentence_embedding_dimension", None)
            or model.get_embedding_dimension
        )
        dim = get_dim()
        if dim is None:
            dim = int(model.encode(["x"], convert_to_numpy=True).shape[1])
        self.model = model

        def encode(texts: list[str]) -> Any:
            return model.encode(
                texts, convert_to_numpy=True, normalize_embeddings=True, show_progress_bar=False
            )

        super().__init__(folder, name, int(dim), encode)


# --------------------------------------------------------------------------------------

_BACKENDS: dict[str, Callable[[str], Embedder]] = {
    "model2vec": Model2VecEmbedder,
    "fastembed": FastEmbedEmbedder,
    "sentence-transformers": SentenceTransformerEmbedder,
    "st": SentenceTransformerEmbedder,
}


def get_embedder(spec: str) -> Embedder:
    """Embedder from a spec string.

    ``minilm+e5`` (the default: all-MiniLM-L6-v2 for Latin-script text, multilingual-e5-small
    for Chinese and Japanese, :mod:`mindory.search.routed`) · ``minilm`` (all-MiniLM-L6-v2
    alone) · ``e5`` (multilingual-e5-small alone) · ``hashed`` (384 dims) ·
    ``hashed:768`` · ``model2vec:/path`` · ``fastembed:/path``
    (or ``fastembed:NAME=/path``) · ``sentence-transformers:/path`` (alias ``st:``).
    A backend path may also be a model name that is already in the local cache.
    """
    kind, sep, arg = spec.strip().partition(":")
    kind = kind.strip().lower()
    if kind == "minilm+e5" and not arg.strip():
        from mindory.search.routed import ScriptRoutedEmbedder

        return ScriptRoutedEmbedder()
    if kind == "e5" and not arg.strip():
        from mindory.search.e5 import E5Embedder

        return E5Embedder()
    if kind == "minilm" and not arg.strip():
        from mindory.search.minilm import MiniLMEmbedder

        return MiniLMEmbedder()
    if kind == "hashed":
        if not sep or not arg.strip():
            return HashedNgramEmbedder()
        try:
            dim = int(arg)
        except ValueError:
            raise MindoryError(f"bad embedder spec {spec!r}: hashed:DIM needs a number") from None
        return HashedNgramEmbedder(dim)
    backend = _BACKENDS.get(kind)
    if backend is None:
        raise MindoryError(
            f"unknown embedder {spec!r}: use minilm+e5, minilm, e5, hashed, hashed:DIM, "
            "model2vec:PATH, fastembed:PATH or sentence-transformers:PATH"
        )
    if not arg.strip():
        raise MindoryError(f"bad embedder spec {spec!r}: {kind} needs a model folder")
    return backend(os.path.expanduser(arg.strip()))
