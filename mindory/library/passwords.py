"""Reader passwords: what HTTP Basic (OPDS apps on e-ink devices can send nothing else)
and KOReader's progress sync check.

KOReader never sends the password itself: its sync plugin sends ``MD5(password)`` as
``x-auth-key`` (and registers with that digest as the "password"). So the stored hash is
a salted scrypt of that MD5 hex digest: Basic auth computes the MD5 of the password it is
given and checks the same hash, and one stored value serves both doors. The password is
never stored.

scrypt is slow on purpose (~50 ms). Apps send Basic credentials with every request, so a
credential checked once is remembered in memory (an HMAC of it under a per-process key,
never the credential) together with the stored hash it matched: a changed password no
longer matches, and nothing persists outside the process.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
import threading
import time

__all__ = ["Checked", "hash_sync_key", "is_sync_key", "sync_key", "verify_sync_key"]

# scrypt work factors (RFC 7914 names): 16 MiB of memory and ~50 ms a check here.
SCRYPT_N = 2**14
SCRYPT_R = 8
SCRYPT_P = 1
SALT_BYTES = 16
PREFIX = "scrypt"
MD5_HEX = re.compile(r"[0-9a-f]{32}")


def sync_key(password: str) -> str:
    """What KOReader sends for ``password``: the MD5 hex digest of its UTF-8 bytes."""
    return hashlib.md5(password.encode("utf-8"), usedforsecurity=False).hexdigest()


def is_sync_key(key: str) -> bool:
    return MD5_HEX.fullmatch(key.lower()) is not None


def _scrypt(key: str, salt: bytes, n: int, r: int, p: int) -> bytes:
    return hashlib.scrypt(key.lower().encode("ascii"), salt=salt, n=n, r=r, p=p, dklen=32)


def hash_sync_key(key: str) -> str:
    """The stored form: ``scrypt$N$r$p$salt$hash`` (salt and hash in base64)."""
    salt = secrets.token_bytes(SALT_BYTES)
    digest = _scrypt(key, salt, SCRYPT_N, SCRYPT_R, SCRYPT_P)
    b64 = base64.b64encode
    return f"{PREFIX}${SCRYPT_N}${SCRYPT_R}${SCRYPT_P}${b64(salt).decode()}${b64(digest).decode()}"


def verify_sync_key(key: str, stored: str) -> bool:
    """Does ``key`` (an MD5 hex digest) match the stored hash? False for a malformed one."""
    parts = stored.split("$")
    if len(parts) != 6 or parts[0] != PREFIX or not key.isascii():
        return False
    try:
        n, r, p = int(parts[1]), int(parts[2]), int(parts[3])
        salt, want = base64.b64decode(parts[4]), base64.b64decode(parts[5])
        got = _scrypt(key, salt, n, r, p)
    except (ValueError, MemoryError):
        return False
    return hmac.compare_digest(got, want)


class Checked:
    """Credentials checked recently: HMAC(name, key) → the stored hash they matched."""

    def __init__(self, ttl_seconds: float = 600.0, size: int = 1024) -> None:
        self._secret = secrets.token_bytes(32)
        self._seen: dict[bytes, tuple[str, float]] = {}
        self._ttl = ttl_seconds
        self._size = size
        self._lock = threading.Lock()

    def _mac(self, name: str, key: str) -> bytes:
        msg = name.encode("utf-8", "surrogateescape") + b"\0" + key.lower().encode("ascii")
        return hmac.new(self._secret, msg, hashlib.sha256).digest()

    def verify(self, name: str, key: str, stored: str) -> bool:
        """``verify_sync_key``, remembered for a while when it succeeds."""
        if not key.isascii():
            return False
        mac = self._mac(name, key)
        now = time.monotonic()
        with self._lock:
            seen = self._seen.get(mac)
        if seen is not None and seen[1] > now and hmac.compare_digest(seen[0], stored):
            return True
        if not verify_sync_key(key, stored):
            return False
        with self._lock:
            if len(self._seen) >= self._size:
                self._seen.clear()
            self._seen[mac] = (stored, now + self._ttl)
        return True
