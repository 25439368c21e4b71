"""The SHA-256 of a large file, remembered while the file stays the same.

An embedder's id names the SHA-256 of its model files (tens of MB: ~0.2 s to read and
hash on two busy cores). A search needs the id before its first vector, so hashing the
same unchanged files on every start would cost more than the search. The digests are
kept in one small JSON file in the user cache folder, each under its file's path with
the file's size, mtime, ctime and inode: any write changes ctime, and then the file is
hashed again (git's index trusts the same signature).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import threading
from pathlib import Path

__all__ = ["DIGESTS_FILE", "sha256_of"]

DIGESTS_FILE = "digests-v1.json"  # in mindory.search.onnx_cache.cache_dir()
_LOCK = threading.Lock()


def _signature(st: os.stat_result) -> list[int]:
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


def _hash(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        # In 1 MiB pieces: a whole 70 MB model read at once would count in the RSS.
        for piece in iter(lambda: fh.read(1 << 20), b""):
            h.update(piece)
    return h.hexdigest()


def _read(store: Path) -> dict[str, list[object]]:
    try:
        doc = json.loads(store.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _write(store: Path, doc: dict[str, list[object]]) -> None:
    try:
        store.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=store.parent, suffix=".part")
    except OSError:
        return  # a read-only cache: hash again next time
    try:  # beside, then rename: another process never reads half a file
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=0, sort_keys=True)
        os.replace(tmp, store)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def sha256_of(path: Path, store: Path | None = None) -> str:
    """The hex SHA-256 of ``path``, from ``store`` (default: the cache folder's digest
    file) when the file has not changed since it was hashed."""
    if store is None:
        from mindory.search.onnx_cache import cache_dir

        store = cache_dir() / DIGESTS_FILE
    path = path.resolve()
    key = str(path)
    signature = _signature(path.stat())
    with _LOCK:
        known = _read(store).get(key)
        if isinstance(known, list) and known[:-1] == signature and isinstance(known[-1], str):
            return known[-1]
    digest = _hash(path)
    if _signature(path.stat()) != signature:
        return digest  # changed while read: do not remember it
    with _LOCK:
        doc = _read(store)
        doc[key] = [*signature, digest]
        _write(store, doc)
    return digest
