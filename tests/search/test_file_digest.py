"""The digests of model files, remembered while the files stay the same."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from mindory.search import file_digest
from mindory.search.file_digest import sha256_of


def test_a_digest_is_remembered_until_the_file_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model, store = tmp_path / "model.bin", tmp_path / "cache" / "digests.json"
    model.write_bytes(b"weights" * 1000)
    want = hashlib.sha256(model.read_bytes()).hexdigest()
    assert sha256_of(model, store) == want and store.is_file()
    hashed: list[Path] = []
    real = file_digest._hash

    def counted(path: Path) -> str:
        hashed.append(path)
        return real(path)

    monkeypatch.setattr(file_digest, "_hash", counted)
    assert sha256_of(model, store) == want and hashed == []  # from the store
    model.write_bytes(b"other weights")
    assert sha256_of(model, store) == hashlib.sha256(b"other weights").hexdigest()
    assert hashed == [model.resolve()]


def test_a_damaged_or_unwritable_store_only_costs_a_hash(tmp_path: Path) -> None:
    model = tmp_path / "model.bin"
    model.write_bytes(b"x")
    want = hashlib.sha256(b"x").hexdigest()
    damaged = tmp_path / "digests.json"
    damaged.write_text("{not json")
    assert sha256_of(model, damaged) == want
    if os.geteuid() != 0:  # root writes anywhere
        locked = tmp_path / "locked"
        locked.mkdir()
        locked.chmod(0o500)
        assert sha256_of(model, locked / "digests.json") == want
