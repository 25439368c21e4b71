"""EPUB importer on broken and hostile files: one clear mindory error, never a raw one."""

from __future__ import annotations

import base64
import random
import struct
import time
import tracemalloc
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from lxml import etree

from mindory.errors import BookFormatError, DrmError, LimitError, MindoryError
from mindory.importers import epub_safety
from mindory.importers.epub import read_epub
from mindory.importers.xhtml import MAX_NESTING
from mindory.text.records import Book

CONTAINER = (
    '<?xml version="1.0"?><container version="1.0" '
    'xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles>'
    '<rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/>'
    "</rootfiles></container>"
)


def xhtml(body: str, doctype: str = "") -> str:
    return (
        f'<?xml version="1.0" encoding="utf-8"?>{doctype}'
        '<html xmlns="http://www.w3.org/1999/xhtml"><head><title>t</title></head>'
        f"<body>{body}</body></html>"
    )


def opf(
    manifest: str = '<item id="c1" href="c1.xhtml" media-type="application/xhtml+xml"/>',
    spine: str = '<itemref idref="c1"/>',
    metadata: str = "<dc:title>T</dc:title>",
    doctype: str = "",
) -> str:
    return (
        f'<?xml version="1.0" encoding="utf-8"?>{doctype}'
        '<package xmlns="http://www.idpf.org/2007/opf" version="3.0">'
        f'<metadata xmlns:dc="http://purl.org/dc/elements/1.1/">{metadata}</metadata>'
        f"<manifest>{manifest}</manifest><spine>{spine}</spine></package>"
    )


def build(
    path: Path,
    files: dict[str, str | bytes] | None = None,
    *,
    mimetype: bytes | None = b"application/epub+zip",
    container: str | None = CONTAINER,
    package: str | None = None,
) -> Path:
    """An EPUB with a default one-chapter book; ``files`` adds or replaces members."""
    members: dict[str, str | bytes] = {}
    if mimetype is not None:
        members["mimetype"] = mimetype
    if container is not None:
        members["META-INF/container.xml"] = container
    members["OEBPS/content.opf"] = package if package is not None else opf()
    members["OEBPS/c1.xhtml"] = xhtml("<p>Hello.</p>")
    members.update(files or {})
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path


def refused(path: Path, kind: type[MindoryError] = BookFormatError) -> MindoryError:
    """Import must fail with ``kind``, a one-line message that names the file."""
    with pytest.raises(kind) as info:
        read_epub(path)
    exc = info.value
    assert isinstance(exc, MindoryError)
    assert exc.path == str(path)
    assert str(exc).startswith(str(path))
    assert "\n" not in str(exc)
    return exc


def test_good_baseline(tmp_path: Path) -> None:
    book = read_epub(build(tmp_path / "ok.epub"))
    assert book.sections[0].normalized_text == "Hello."


# ------------------------------------------------------------ not an EPUB


def test_missing_file(tmp_path: Path) -> None:
    assert "cannot read" in refused(tmp_path / "nope.epub").message


def test_directory(tmp_path: Path) -> None:
    (tmp_path / "dir.epub").mkdir()
    refused(tmp_path / "dir.epub")


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.epub"
    path.write_bytes(b"")
    assert "empty" in refused(path).message


def test_garbage_bytes(tmp_path: Path) -> None:
    path = tmp_path / "garbage.epub"
    path.write_bytes(bytes(range(256)) * 40)
    assert "not a ZIP" in refused(path).message


def test_truncated_zip(tmp_path: Path) -> None:
    data = build(tmp_path / "ok.epub").read_bytes()
    for cut in (len(data) // 2, len(data) - 10):
        path = tmp_path / f"cut{cut}.epub"
        path.write_bytes(data[:cut])
        refused(path)


def test_zip_that_is_not_an_epub(tmp_path: Path) -> None:
    path = tmp_path / "plain.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("readme.txt", "hello")
    refused(path)


def test_wrong_mimetype(tmp_path: Path) -> None:
    path = build(tmp_path / "odt.epub", mimetype=b"application/vnd.oasis.opendocument.text")
    assert "mimetype" in refused(path).message


def test_mimetype_with_crlf_and_missing_mimetype_accepted(tmp_path: Path) -> None:
    assert read_epub(build(tmp_path / "crlf.epub", mimetype=b"application/epub+zip\r\n"))
    book = read_epub(build(tmp_path / "nomime.epub", mimetype=None))
    assert any("mimetype" in w for w in book.warnings)


def test_missing_container(tmp_path: Path) -> None:
    assert "container.xml" in refused(build(tmp_path / "noc.epub", container=None)).message


def test_container_without_rootfile(tmp_path: Path) -> None:
    container = CONTAINER.replace("<rootfile ", "<other ")
    refused(build(tmp_path / "c.epub", container=container))


def test_container_points_at_missing_package(tmp_path: Path) -> None:
    container = CONTAINER.replace("OEBPS/content.opf", "OEBPS/missing.opf")
    exc = refused(build(tmp_path / "c.epub", container=container))
    assert "missing.opf" in exc.message


def test_package_not_xml(tmp_path: Path) -> None:
    refused(build(tmp_path / "p.epub", package="this is not xml at all"))


def test_package_without_spine_or_manifest(tmp_path: Path) -> None:
    no_spine = opf().replace('<spine><itemref idref="c1"/></spine>', "")
    assert "spine" in refused(build(tmp_path / "s.epub", package=no_spine)).message
    no_manifest = opf().split("<manifest>")[0] + "<spine/></package>"
    assert "manifest" in refused(build(tmp_path / "m.epub", package=no_manifest)).message


def test_empty_spine(tmp_path: Path) -> None:
    exc = refused(build(tmp_path / "e.epub", package=opf(spine="")))
    assert "spine" in exc.message


def test_unknown_spine_idref(tmp_path: Path) -> None:
    package = opf(spine='<itemref idref="c1"/><itemref idref="ghost"/>')
    assert "'ghost'" in refused(build(tmp_path / "u.epub", package=package)).message


def test_missing_xhtml_is_an_error(tmp_path: Path) -> None:
    manifest = (
        '<item id="c1" href="c1.xhtml" media-type="application/xhtml+xml"/>'
        '<item id="c2" href="gone.xhtml" media-type="application/xhtml+xml"/>'
    )
    package = opf(manifest=manifest, spine='<itemref idref="c1"/><itemref idref="c2"/>')
    assert "gone.xhtml" in refused(build(tmp_path / "x.epub", package=package)).message


def test_missing_audio_and_stylesheet_are_warnings(tmp_path: Path) -> None:
    manifest = (
        '<item id="c1" href="c1.xhtml" media-type="application/xhtml+xml"/>'
        '<item id="a" href="audio/a.mp3" media-type="audio/mpeg"/>'
        '<item id="css" href="style.css" media-type="text/css"/>'
    )
    book = read_epub(build(tmp_path / "a.epub", package=opf(manifest=manifest)))
    assert any("audio/a.mp3" in w for w in book.warnings)
    assert any("style.css" in w for w in book.warnings)


def test_case_mismatched_href_is_found(tmp_path: Path) -> None:
    manifest = '<item id="c1" href="C1.XHTML" media-type="application/xhtml+xml"/>'
    book = read_epub(build(tmp_path / "case.epub", package=opf(manifest=manifest)))
    assert book.sections[0].href == "OEBPS/c1.xhtml"
    assert any("letter case" in w for w in book.warnings)


def test_images_only_book(tmp_path: Path) -> None:
    files = {"OEBPS/c1.xhtml": xhtml('<div><img src="a.png" alt="pic"/></div>\n')}
    exc = refused(build(tmp_path / "img.epub", files))
    assert "no text" in exc.message


def test_malformed_xhtml_imports_as_html(tmp_path: Path) -> None:
    files = {"OEBPS/c1.xhtml": "<html><body><p>Broken<br>markup &eacute;<p>next</body>"}
    book = read_epub(build(tmp_path / "m.epub", files))
    section = book.sections[0]
    assert section.parser == "html"
    assert section.normalized_text == "Broken\nmarkup \u00e9\n\nnext"


# ------------------------------------------------------------------- hostile


@pytest.fixture
def secret(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "secret.txt"
    path.write_text("TOP-SECRET-PASSWORD-4711")
    yield path


def _assert_secret_absent(book: Book, secret_text: str) -> None:
    assert secret_text not in repr(book)
    for section in book.sections:
        assert secret_text not in section.source_text
        assert secret_text not in section.normalized_text
        assert secret_text not in section.title
        if section.dom.root is not None:
            assert secret_text.encode() not in etree.tostring(section.dom.root)
    assert all(secret_text not in w for w in book.warnings)


def test_xxe_in_content_document(tmp_path: Path, secret: Path) -> None:
    doctype = (
        f'<!DOCTYPE html [<!ENTITY x SYSTEM "{secret.as_uri()}">'
        f'<!ENTITY % p SYSTEM "{secret.as_uri()}"> %p;]>'
    )
    files = {"OEBPS/c1.xhtml": xhtml("<p>before &x; after</p>", doctype)}
    book = read_epub(build(tmp_path / "xxe.epub", files))
    _assert_secret_absent(book, secret.read_text())
    assert book.sections[0].normalized_text == "before after"


def test_xxe_via_external_dtd(tmp_path: Path, secret: Path) -> None:
    files = {
        "OEBPS/c1.xhtml": xhtml("<p>a &x; b</p>", f'<!DOCTYPE html SYSTEM "{secret.as_uri()}">')
    }
    try:
        book = read_epub(build(tmp_path / "dtd.epub", files))
    except MindoryError:
        return  # refusing is fine too; reading the file is not
    _assert_secret_absent(book, secret.read_text())


def test_xxe_in_package_document(tmp_path: Path, secret: Path) -> None:
    package = opf(
        metadata="<dc:title>Title &x;</dc:title><dc:creator>&x;</dc:creator>",
        doctype=f'<!DOCTYPE package [<!ENTITY x SYSTEM "{secret.as_uri()}">]>',
    )
    book = read_epub(build(tmp_path / "xxe-opf.epub", package=package))
    _assert_secret_absent(book, secret.read_text())
    assert book.title.startswith("Title")


LAUGHS = (
    '<!DOCTYPE html [<!ENTITY lol "lol">'
    + "".join(
        f'<!ENTITY lol{i} "{("&lol" + (str(i - 1) if i > 1 else "") + ";") * 10}">'
        for i in range(1, 10)
    )
    + "]>"
)


def test_billion_laughs_in_content(tmp_path: Path) -> None:
    files = {"OEBPS/c1.xhtml": xhtml("<p>&lol9;</p>", LAUGHS)}
    start = time.perf_counter()
    refused(build(tmp_path / "lol.epub", files), LimitError)
    assert time.perf_counter() - start < 2


def test_billion_laughs_in_package(tmp_path: Path) -> None:
    package = opf(
        metadata="<dc:title>&lol9;</dc:title>", doctype=LAUGHS.replace("html", "package", 1)
    )
    start = time.perf_counter()
    refused(build(tmp_path / "lol-opf.epub", package=package), LimitError)
    assert time.perf_counter() - start < 2


def _zip_bomb(path: Path, size: int) -> Path:
    build(path)
    with zipfile.ZipFile(path, "a", zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        chunk = b"\0" * (1024 * 1024)
        with zf.open("OEBPS/zeros.bin", "w", force_zip64=True) as out:
            for _ in range(size // len(chunk)):
                out.write(chunk)
    return path


def _peak_memory_while(path: Path, kind: type[MindoryError]) -> int:
    tracemalloc.start()
    try:
        with pytest.raises(kind):
            read_epub(path)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_zip_bomb_member_over_limit(tmp_path: Path) -> None:
    path = _zip_bomb(tmp_path / "bomb.epub", 80 * 1024 * 1024)
    assert path.stat().st_size < 1024 * 1024
    peak = _peak_memory_while(path, LimitError)
    assert peak < 16 * 1024 * 1024, f"peak memory {peak:,} bytes"
    assert "refusing to decompress" in refused(path, LimitError).message


def test_zip_bomb_compression_ratio(tmp_path: Path) -> None:
    path = _zip_bomb(tmp_path / "ratio.epub", 8 * 1024 * 1024)
    assert "ratio" in refused(path, LimitError).message


def test_total_uncompressed_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(epub_safety, "MAX_TOTAL_UNCOMPRESSED", 1000)
    files = {f"OEBPS/pad{i}.txt": "x" * 400 for i in range(3)}
    assert "in total" in refused(build(tmp_path / "total.epub", files), LimitError).message


def test_too_many_members(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(epub_safety, "MAX_MEMBERS", 50)
    files: dict[str, str | bytes] = {f"OEBPS/f{i}.txt": "" for i in range(60)}
    assert "members" in refused(build(tmp_path / "many.epub", files), LimitError).message


def _patch_central_directory(
    path: Path, member: str, field_offset: int, fmt: str, value: int
) -> None:
    """Overwrite one field of ``member``'s central directory and local headers."""
    data = bytearray(path.read_bytes())
    name = member.encode()
    for signature, name_at, offset in (
        (b"PK\x01\x02", 46, field_offset),
        (b"PK\x03\x04", 30, None),
    ):
        pos = data.find(signature)
        while pos >= 0:
            if data[pos + name_at : pos + name_at + len(name)] == name:
                if offset is not None:
                    struct.pack_into(fmt, data, pos + offset, value)
                elif field_offset in (8, 10, 24):
                    # Same field in the local header sits 2 bytes earlier (no "version made by").
                    local = {8: 6, 10: 8, 24: 22}[field_offset]
                    struct.pack_into(fmt, data, pos + local, value)
            pos = data.find(signature, pos + 4)
    path.write_bytes(bytes(data))


def test_member_lying_about_its_size(tmp_path: Path) -> None:
    big = xhtml("<p>" + "x" * (3 * 1024 * 1024) + "</p>")
    path = build(tmp_path / "liar.epub", {"OEBPS/c1.xhtml": big})
    _patch_central_directory(path, "OEBPS/c1.xhtml", 24, "<I", 2000)  # uncompressed size
    peak = _peak_memory_while(path, BookFormatError)
    assert peak < 16 * 1024 * 1024
    refused(path)


def test_password_encrypted_member(tmp_path: Path) -> None:
    path = build(tmp_path / "pw.epub")
    _patch_central_directory(path, "OEBPS/c1.xhtml", 8, "<H", 0x1)  # flag bits
    assert "DRM" in refused(path, DrmError).message


def test_unsupported_compression_method(tmp_path: Path) -> None:
    path = build(tmp_path / "d64.epub")
    _patch_central_directory(path, "OEBPS/c1.xhtml", 10, "<H", 9)  # deflate64
    refused(path)


@pytest.mark.parametrize(
    "name",
    ["../evil.txt", "OEBPS/../../evil.txt", "/etc/evil.txt", "OEBPS\\evil.txt", "C:/evil.txt"],
)
def test_unsafe_member_names(tmp_path: Path, name: str) -> None:
    path = build(tmp_path / "slip.epub", {name: "pwned"})
    assert "unsafe member name" in refused(path).message


ENCRYPTION = (
    '<?xml version="1.0"?><encryption xmlns="urn:oasis:names:tc:opendocument:xmlns:container" '
    'xmlns:enc="http://www.w3.org/2001/04/xmlenc#"><enc:EncryptedData>'
    '<enc:EncryptionMethod Algorithm="{alg}"/>'
    '<enc:CipherData><enc:CipherReference URI="{uri}"/></enc:CipherData>'
    "</enc:EncryptedData></encryption>"
)


def test_drm_encryption_refused(tmp_path: Path) -> None:
    enc = ENCRYPTION.format(alg="http://www.w3.org/2001/04/xmlenc#aes128-cbc", uri="OEBPS/c1.xhtml")
    path = build(tmp_path / "drm.epub", {"META-INF/encryption.xml": enc})
    exc = refused(path, DrmError)
    assert "DRM" in exc.message and "aes128-cbc" in exc.message
    assert "cannot be imported" in exc.message


def test_unreadable_encryption_xml_refused(tmp_path: Path) -> None:
    path = build(tmp_path / "drm2.epub", {"META-INF/encryption.xml": "<not xml"})
    assert "DRM" in refused(path, DrmError).message


@pytest.mark.parametrize(
    "alg", ["http://www.idpf.org/2008/embedding", "http://ns.adobe.com/pdf/enc#RC"]
)
def test_font_obfuscation_imports(tmp_path: Path, alg: str) -> None:
    enc = ENCRYPTION.format(alg=alg, uri="OEBPS/fonts/f.otf")
    files = {"META-INF/encryption.xml": enc, "OEBPS/fonts/f.otf": b"\x00\x01obfuscated"}
    book = read_epub(build(tmp_path / "font.epub", files))
    assert book.sections[0].normalized_text == "Hello."


def test_font_obfuscation_on_a_text_document_refused(tmp_path: Path) -> None:
    enc = ENCRYPTION.format(alg="http://www.idpf.org/2008/embedding", uri="OEBPS/c1.xhtml")
    refused(build(tmp_path / "obf.epub", {"META-INF/encryption.xml": enc}), DrmError)


def test_deep_nesting_is_refused_clearly(tmp_path: Path) -> None:
    depth = 10_000
    body = "<div>" * depth + "deep text" + "</div>" * depth + "<p>after</p>"
    start = time.perf_counter()
    exc = refused(build(tmp_path / "deep.epub", {"OEBPS/c1.xhtml": xhtml(body)}), LimitError)
    assert "nested deeper" in exc.message
    assert time.perf_counter() - start < 5


def test_deep_malformed_nesting_never_loses_text_silently(tmp_path: Path) -> None:
    # Not well-formed, so the HTML parser runs: libxml2 drops text below 2048 levels.
    # The undefined entity stops the XML parser before it meets the depth.
    depth = 3_000
    body = "<p>&bogus;</p>" + "<div>" * depth + "deep text" + "</div>" * depth
    exc = refused(build(tmp_path / "deep-html.epub", {"OEBPS/c1.xhtml": xhtml(body)}), LimitError)
    assert f"deeper than {MAX_NESTING} levels" in exc.message


def test_moderate_nesting_imports_all_text(tmp_path: Path) -> None:
    depth = 1_500  # deeper than libxml2's default 256, below our limit
    body = "<div>" * depth + "deep text" + "</div>" * depth + "<p>after</p>"
    book = read_epub(build(tmp_path / "ok-deep.epub", {"OEBPS/c1.xhtml": xhtml(body)}))
    assert book.sections[0].normalized_text == "deep text\n\nafter"


def test_huge_text_node_is_kept(tmp_path: Path) -> None:
    # 11 MB of incompressible text: over libxml2's default 10 MB text node cap.
    text = base64.b64encode(random.Random(7).randbytes(8_300_000)).decode()
    book = read_epub(build(tmp_path / "big.epub", {"OEBPS/c1.xhtml": xhtml(f"<p>{text}</p>")}))
    assert len(book.sections[0].source_text) == len(text)


def test_unexpected_library_error_is_wrapped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mindory.importers import epub as epub_mod

    def boom(*args: object, **kwargs: object) -> None:
        raise zlib.error("simulated inflate failure")

    monkeypatch.setattr(epub_mod, "read_package", boom)
    exc = refused(build(tmp_path / "z.epub"))
    assert "zlib" in exc.message or "inflate" in exc.message
