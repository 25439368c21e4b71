"""Open an EPUB's ZIP container without trusting it (DESIGN §5).

Everything here works on the ZIP *central directory* before a single member
is decompressed: ebooklib reads every manifest item into memory, so these
checks are what bounds the memory and time an import can cost. Members are
later read only through :func:`read_member`, and :mod:`zipfile` never
inflates more than a member's declared size (a member that lies about its
size fails its CRC check instead), so the declared sizes checked here are
real bounds.

Limits (module constants, stated in every error message they trigger):

* ``MAX_FILE_BYTES``: the EPUB file itself.
* ``MAX_MEMBERS``: entries in the central directory.
* ``MAX_TOTAL_UNCOMPRESSED`` / ``MAX_MEMBER_UNCOMPRESSED``: declared sizes.
* ``MAX_COMPRESSION_RATIO`` for members over ``RATIO_CHECK_MIN_BYTES``
  (small members may compress well; a bomb needs a large member).
"""

from __future__ import annotations

import posixpath
import re
import zipfile
import zlib
from dataclasses import dataclass
from io import BytesIO

from lxml import etree

from mindory.errors import BookFormatError, DrmError, LimitError

__all__ = [
    "ALLOWED_ENCRYPTION_ALGORITHMS",
    "MAX_COMPRESSION_RATIO",
    "MAX_FILE_BYTES",
    "MAX_MEMBERS",
    "MAX_MEMBER_UNCOMPRESSED",
    "MAX_TOTAL_UNCOMPRESSED",
    "CheckedArchive",
    "ZIP_READ_ERRORS",
    "open_checked",
    "read_member",
    "safe_xml_parser",
]

MiB = 1024 * 1024
MAX_FILE_BYTES = 512 * MiB
MAX_MEMBERS = 10_000
MAX_TOTAL_UNCOMPRESSED = 512 * MiB
MAX_MEMBER_UNCOMPRESSED = 64 * MiB
MAX_COMPRESSION_RATIO = 200
RATIO_CHECK_MIN_BYTES = 1 * MiB
MAX_MIMETYPE_BYTES = 1024
MAX_ENCRYPTION_XML_BYTES = 4 * MiB

# Font obfuscation (IDPF and Adobe) only scrambles embedded fonts: the text is
# readable, so such books import. Any other algorithm encrypts content (DRM).
ALLOWED_ENCRYPTION_ALGORITHMS = frozenset(
    {"http://www.idpf.org/2008/embedding", "http://ns.adobe.com/pdf/enc#RC"}
)
EPUB_MIMETYPE = "application/epub+zip"
CONTAINER_PATH = "META-INF/container.xml"
ENCRYPTION_PATH = "META-INF/encryption.xml"
_XMLENC_NS = "http://www.w3.org/2001/04/xmlenc#"
# Obfuscation applied to these is not "just fonts": the text itself is unreadable.
_TEXT_RESOURCE_RE = re.compile(r"\.(x?html?|xml|opf|ncx|svg)$", re.IGNORECASE)
_DRIVE_RE = re.compile(r"^[A-Za-z]:")

# What zipfile/zlib raise on damaged or unsupported members.
ZIP_READ_ERRORS: tuple[type[BaseException], ...] = (
    zipfile.BadZipFile,
    zlib.error,
    EOFError,
    NotImplementedError,  # unsupported compression method (deflate64, ...)
    RuntimeError,  # zipfile: encrypted member, password required
    OSError,
    ValueError,
    KeyError,
)


def safe_xml_parser(*, recover: bool = False) -> etree.XMLParser:
    """An XML parser that never fetches or expands external/declared entities.

    ``huge_tree`` lifts libxml2's silent caps (10 MB text nodes, depth 256);
    the callers guard depth and size themselves with stated limits. Entity
    amplification protection stays active in libxml2 regardless.
    """
    return etree.XMLParser(
        resolve_entities=False,
        no_network=True,
        load_dtd=False,
        huge_tree=True,
        remove_comments=False,
        remove_pis=False,
        strip_cdata=True,
        recover=recover,
    )


@dataclass(frozen=True)
class CheckedArchive:
    """A ZIP archive whose central directory passed every check."""

    zip: zipfile.ZipFile
    names: frozenset[str]
    path: str
    warnings: tuple[str, ...]

    def has(self, name: str) -> bool:
        return name in self.names


def open_checked(data: bytes, path: str) -> CheckedArchive:
    """Open ``data`` (the EPUB file's bytes) as a checked ZIP archive.

    Raises BookFormatError (not a ZIP / not an EPUB / unsafe names),
    LimitError (over a stated limit) or DrmError (encrypted content).
    """
    if not data:
        raise BookFormatError("empty file (0 bytes), not an EPUB", path=path)
    if len(data) > MAX_FILE_BYTES:
        raise LimitError(
            f"file is {len(data):,} bytes, over the limit of {MAX_FILE_BYTES:,} bytes", path=path
        )
    try:
        zf = zipfile.ZipFile(BytesIO(data))
        infos = zf.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError) as exc:
        raise BookFormatError(
            f"not a ZIP archive, so not an EPUB (truncated or damaged?): {exc}", path=path
        ) from exc
    warnings = _check_central_directory(infos, path)
    names = frozenset(info.filename for info in infos)
    archive = CheckedArchive(zf, names, path, tuple(warnings))
    warnings.extend(_check_mimetype(archive))
    if CONTAINER_PATH not in names:
        raise BookFormatError(f"not an EPUB: {CONTAINER_PATH} is missing", path=path)
    _check_encryption(archive)
    return CheckedArchive(zf, names, path, tuple(warnings))


def read_member(archive: CheckedArchive, name: str) -> bytes:
    """Read one member, turning every zipfile/zlib failure into BookFormatError."""
    try:
        return archive.zip.read(name)
    except ZIP_READ_ERRORS as exc:
        raise BookFormatError(
            f"cannot read {name!r} from the archive: {type(exc).__name__}: {exc}",
            path=archive.path,
        ) from exc


def _check_central_directory(infos: list[zipfile.ZipInfo], path: str) -> list[str]:
    if len(infos) > MAX_MEMBERS:
        raise LimitError(
            f"archive has {len(infos):,} members, over the limit of {MAX_MEMBERS:,}", path=path
        )
    warnings: list[str] = []
    seen: set[str] = set()
    total = 0
    for info in infos:
        name = info.filename
        _check_member_name(name, path)
        if name in seen:
            warnings.append(f"archive holds {name!r} twice; the last copy is used")
        seen.add(name)
        if info.flag_bits & 0x1:
            raise DrmError(
                f"encrypted with DRM (ZIP password encryption on {name!r}), cannot be imported",
                path=path,
            )
        _check_member_size(info, path)
        total += info.file_size
        if total > MAX_TOTAL_UNCOMPRESSED:
            raise LimitError(
                f"members expand to more than {MAX_TOTAL_UNCOMPRESSED:,} bytes in total "
                "(limit); refusing to decompress",
                path=path,
            )
    return warnings


def _check_member_name(name: str, path: str) -> None:
    # Backslashes are path separators on Windows extractors; '..' and absolute
    # names escape the container (zip slip). Real EPUBs never need them.
    parts = name.split("/")
    if (
        "\\" in name
        or name.startswith("/")
        or _DRIVE_RE.match(name)
        or ".." in parts
        or "\x00" in name
    ):
        raise BookFormatError(f"unsafe member name {name!r} in the archive", path=path)


def _check_member_size(info: zipfile.ZipInfo, path: str) -> None:
    size = info.file_size
    if size > MAX_MEMBER_UNCOMPRESSED:
        raise LimitError(
            f"member {info.filename!r} expands to {size:,} bytes, over the per-member limit "
            f"of {MAX_MEMBER_UNCOMPRESSED:,}; refusing to decompress",
            path=path,
        )
    if size > RATIO_CHECK_MIN_BYTES and size > MAX_COMPRESSION_RATIO * max(info.compress_size, 1):
        ratio = size / max(info.compress_size, 1)
        raise LimitError(
            f"member {info.filename!r} has compression ratio {ratio:,.0f}:1, over the limit "
            f"of {MAX_COMPRESSION_RATIO}:1 (zip bomb?); refusing to decompress",
            path=path,
        )


def _check_mimetype(archive: CheckedArchive) -> list[str]:
    """The ``mimetype`` member must say EPUB; missing or padded is tolerated."""
    if not archive.has("mimetype"):
        return ["archive has no 'mimetype' member; read as EPUB anyway"]
    info = archive.zip.getinfo("mimetype")
    if info.file_size > MAX_MIMETYPE_BYTES:
        raise BookFormatError(
            f"not an EPUB: 'mimetype' member is {info.file_size:,} bytes", path=archive.path
        )
    raw = read_member(archive, "mimetype")
    # Real books end it with CRLF or spaces (Feedbooks): strip before comparing.
    text = raw.decode("ascii", errors="replace").strip()
    if text != EPUB_MIMETYPE:
        raise BookFormatError(
            f"not an EPUB: 'mimetype' says {text[:60]!r}, not {EPUB_MIMETYPE!r}", path=archive.path
        )
    return []


def _check_encryption(archive: CheckedArchive) -> None:
    """Refuse content encryption by name; font obfuscation is fine."""
    if not archive.has(ENCRYPTION_PATH):
        return
    info = archive.zip.getinfo(ENCRYPTION_PATH)
    if info.file_size > MAX_ENCRYPTION_XML_BYTES:
        raise LimitError(
            f"{ENCRYPTION_PATH} is {info.file_size:,} bytes, over the limit of "
            f"{MAX_ENCRYPTION_XML_BYTES:,}",
            path=archive.path,
        )
    raw = read_member(archive, ENCRYPTION_PATH)
    try:
        root = etree.fromstring(raw, safe_xml_parser())
    except etree.XMLSyntaxError as exc:
        # Unreadable encryption data means we cannot tell which files are
        # encrypted: refuse rather than import scrambled text.
        raise DrmError(
            f"encrypted with DRM (unreadable {ENCRYPTION_PATH}: {exc}), cannot be imported",
            path=archive.path,
        ) from exc
    for data in root.iter(f"{{{_XMLENC_NS}}}EncryptedData"):
        method = data.find(f"{{{_XMLENC_NS}}}EncryptionMethod")
        algorithm = (method.get("Algorithm") if method is not None else None) or "unknown"
        ref = data.find(f".//{{{_XMLENC_NS}}}CipherReference")
        uri = (ref.get("URI") if ref is not None else None) or "?"
        if algorithm not in ALLOWED_ENCRYPTION_ALGORITHMS:
            raise DrmError(
                f"encrypted with DRM ({algorithm} algorithm on {uri!r}), cannot be imported",
                path=archive.path,
            )
        if _TEXT_RESOURCE_RE.search(posixpath.basename(uri)):
            raise DrmError(
                f"encrypted with DRM (font obfuscation {algorithm} applied to the text "
                f"resource {uri!r}), cannot be imported",
                path=archive.path,
            )
