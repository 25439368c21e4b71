"""Reader passwords: stored only as a salted scrypt of the MD5 KOReader sends, checked
for HTTP Basic (the password) and for KOReader (the MD5), remembered only in memory, and
set from the command line without echo or from standard input."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import select

from mindory.cli import main as cli_main
from mindory.errors import MindoryError, NotFoundError
from mindory.library import Library
from mindory.library.passwords import hash_sync_key, sync_key, verify_sync_key
from mindory.store.models import ReaderRow


def test_hash_is_salted_and_checks_only_the_right_key() -> None:
    key = sync_key("pässword")
    assert key == hashlib.md5("pässword".encode()).hexdigest()
    one, two = hash_sync_key(key), hash_sync_key(key)
    assert one != two and one.startswith("scrypt$")  # salted
    assert key not in one and "pässword" not in one
    assert verify_sync_key(key, one) and verify_sync_key(key.upper(), two)
    assert not verify_sync_key(sync_key("password"), one)
    for broken in ("", "scrypt$1$2", "bcrypt$x$y$z$a$b", "scrypt$a$b$c$d$e"):
        assert not verify_sync_key(key, broken)


def test_library_passwords(tmp_path: Path) -> None:
    with Library.open(tmp_path / "lib.sqlite") as lib:
        alice = lib.add_reader("alice")
        with pytest.raises(NotFoundError):
            lib.set_password("bob", "x")
        with pytest.raises(MindoryError, match="empty"):
            lib.set_password("alice", "")
        assert lib.reader_for_password("alice", "secret") is None  # none set yet
        lib.set_password("alice", "secret")
        rid = alice.reader.id
        assert lib.reader_for_password("alice", "secret") == rid
        assert lib.reader_for_password("alice", "secret") == rid  # remembered
        assert lib.reader_for_password("alice", "Secret") is None
        assert lib.reader_for_sync_key("alice", sync_key("secret")) == rid
        assert lib.reader_for_sync_key("alice", "not-an-md5") is None
        assert lib.reader_for_password("nobody", "secret") is None
        lib.set_password("alice", "changed")  # the old password stops working at once
        assert lib.reader_for_password("alice", "secret") is None
        assert lib.reader_for_password("alice", "changed") == rid
        with lib.state.read() as s:
            stored = s.scalar(select(ReaderRow.password_hash).where(ReaderRow.name == "alice"))
        assert stored is not None and "changed" not in stored
        assert sync_key("changed") not in stored
        made = lib.register_sync_reader("kobo", sync_key("pw"))
        assert lib.reader_for_password("kobo", "pw") == made.id
        with pytest.raises(MindoryError, match="already"):
            lib.register_sync_reader("kobo", sync_key("pw"))
        with pytest.raises(MindoryError, match="MD5"):
            lib.register_sync_reader("other", "plain password")


def test_users_passwd_command(tmp_path: Path) -> None:
    db = tmp_path / "lib.sqlite"
    run = CliRunner().invoke
    assert run(cli_main, ["--db", str(db), "users", "add", "alice"]).exit_code == 0
    r = run(
        cli_main,
        ["--db", str(db), "users", "passwd", "alice", "--password-stdin"],
        input="s3cret\n",
    )
    assert r.exit_code == 0, r.output
    assert "s3cret" not in r.output
    r = run(cli_main, ["--db", str(db), "users", "passwd", "alice"], input="two\ntwo\n")
    assert r.exit_code == 0, r.output
    with Library.open(db) as lib:
        assert lib.reader_for_password("alice", "two") is not None
        assert lib.reader_for_password("alice", "s3cret") is None
    r = run(cli_main, ["--db", str(db), "users", "passwd", "bob", "--password-stdin"], input="x\n")
    assert r.exit_code != 0 and "bob" in r.output
    r = run(cli_main, ["--db", str(db), "users", "passwd", "alice", "--password-stdin"], input="\n")
    assert r.exit_code != 0 and "empty" in r.output
