"""Catalogue details from the OPF (mindory.importers.epub_meta) on real corpus EPUBs,
and on small hand-made packages for each way a cover is named."""

from __future__ import annotations

import io
import zipfile

import pytest

from mindory.errors import BookFormatError
from mindory.importers.epub_meta import read_epub_details
from tests.conftest import SAMPLES, corpus_file


def _details(name: str):  # type: ignore[no-untyped-def]
    path = corpus_file(name)
    return read_epub_details(path.read_bytes(), str(path))


def test_epub2_feedbooks_meta_cover_and_description() -> None:
    d = _details("epub2_en_romeo-and-juliet-feedbooks.epub")
    assert d.cover_href == "OPS/images/cover.png" and d.cover_type == "image/png"
    assert d.publisher == "Feedbooks"
    assert d.published == "1597"
    assert d.description is not None and d.description.startswith("Romeo and Juliet is a tragic")
    assert "<" not in d.description
    assert d.subjects[:3] == ("Fiction", "Drama", "Romance")


def test_epub2_calibre_cover_and_subject() -> None:
    d = _details("epub2_en_leaves-of-grass-gutenberg-calibre.epub")
    assert d.cover_href == "cover.jpeg" and d.cover_type == "image/jpeg"
    assert d.subjects == ("American poetry -- 19th century",)
    assert d.published is not None and d.published.startswith("1998-04-30")


def test_epub3_cover_image_property() -> None:
    d = _details("epub3_en_moby-dick.epub")
    assert d.cover_href == "OPS/images/9780316000000.jpg" and d.cover_type == "image/jpeg"
    assert d.publisher == "Harper & Brothers, Publishers"
    pepys = _details("epub3_en_pepys-diary-large-endnotes.epub")
    assert pepys.cover_type == "image/svg+xml"  # kept; the catalogue makes no thumbnail of it
    assert pepys.description == "The diary of a man living in London in the 17th century."
    sample = read_epub_details((SAMPLES / "wasteland.epub").read_bytes(), "wasteland.epub")
    assert sample.cover_href == "EPUB/wasteland-cover.jpg" and sample.published == "2011-09-01"


def test_books_without_a_cover() -> None:
    for name in ("epub2_zh-TW_shuihu-zhuan-haodoo.epub", "epub3_ja_kusamakura-vertical-ruby.epub"):
        d = _details(name)
        assert d.cover_href is None and d.cover_type is None


# --------------------------------------------------------------------------- made-up packages

CONTAINER = (
    '<?xml version="1.0"?><container version="1.0" '
    'xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles>'
    '<rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/>'
    "</rootfiles></container>"
)


def _epub(
    metadata: str, manifest: str, extra: str = "", files: dict[str, bytes] | None = None
) -> bytes:
    opf = (
        '<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="2.0" '
        'unique-identifier="id"><metadata xmlns:dc="http://purl.org/dc/elements/1.1/" '
        'xmlns:opf="http://www.idpf.org/2007/opf"><dc:title>T</dc:title>'
        f'<dc:identifier id="id">x</dc:identifier>{metadata}</metadata>'
        f'<manifest><item id="c1" href="c1.xhtml" media-type="application/xhtml+xml"/>{manifest}'
        f'</manifest><spine><itemref idref="c1"/></spine>{extra}</package>'
    )
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr("mimetype", "application/epub+zip", compress_type=zipfile.ZIP_STORED)
        z.writestr("META-INF/container.xml", CONTAINER)
        z.writestr("OEBPS/content.opf", opf)
        z.writestr(
            "OEBPS/c1.xhtml",
            '<html xmlns="http://www.w3.org/1999/xhtml"><body><p>a</p></body></html>',
        )
        for name, data in (files or {}).items():
            z.writestr(name, data)
    return out.getvalue()


IMG = '<item id="pic" href="img/front.jpg" media-type="image/jpeg"/>'
FILES = {"OEBPS/img/front.jpg": b"\xff\xd8\xff"}


def test_guide_cover_page_names_the_image() -> None:
    page = (
        '<html xmlns="http://www.w3.org/1999/xhtml"><body><div><svg xmlns="http://www.w3.org/2000/svg" '
        'xmlns:xlink="http://www.w3.org/1999/xlink"><image xlink:href="../OEBPS/img/front.jpg"/>'
        "</svg></div></body></html>"
    )
    data = _epub(
        "",
        IMG + '<item id="cp" href="cover.xhtml" media-type="application/xhtml+xml"/>',
        '<guide><reference type="cover" href="cover.xhtml" title="Cover"/></guide>',
        {**FILES, "OEBPS/cover.xhtml": page.encode()},
    )
    d = read_epub_details(data, "guide.epub")
    assert d.cover_href == "OEBPS/img/front.jpg" and d.cover_type == "image/jpeg"


def test_meta_cover_naming_an_href_and_html_description() -> None:
    data = _epub(
        '<meta name="cover" content="img/front.jpg"/>'
        "<dc:description>&lt;p&gt;First &amp;amp; &lt;b&gt;bold&lt;/b&gt;&lt;/p&gt;&lt;p&gt;Second"
        "&lt;/p&gt;&lt;script&gt;x()&lt;/script&gt;</dc:description>"
        '<dc:date opf:event="modification">2020-01-01</dc:date>'
        '<dc:date opf:event="publication">1851</dc:date>'
        "<dc:subject>Sea</dc:subject><dc:subject>Sea</dc:subject><dc:subject> </dc:subject>",
        IMG,
        files=FILES,
    )
    d = read_epub_details(data, "meta.epub")
    assert d.cover_href == "OEBPS/img/front.jpg"
    assert d.description == "First & bold\nSecond"
    assert d.published == "1851"
    assert d.subjects == ("Sea",)


def test_a_cover_missing_from_the_zip_or_not_an_image_is_no_cover() -> None:
    missing = _epub(
        "", '<item id="x" href="a.jpg" media-type="image/jpeg" properties="cover-image"/>'
    )
    assert read_epub_details(missing, "m.epub").cover_href is None
    not_image = _epub('<meta name="cover" content="c1"/>', "")
    assert read_epub_details(not_image, "n.epub").cover_href is None
    by_id = _epub(
        "", '<item id="cover" href="img/front.jpg" media-type="image/jpeg"/>', files=FILES
    )
    assert read_epub_details(by_id, "i.epub").cover_href == "OEBPS/img/front.jpg"


def test_bad_files_raise_the_importers_errors() -> None:
    with pytest.raises(BookFormatError):
        read_epub_details(b"not a zip", "bad.epub")
    with pytest.raises(BookFormatError):
        read_epub_details(b"", "empty.epub")
