"""The browser harness itself, proven on hand-made CFIs (independent of mindory's generator).

* georgia-cfi: the IDPF sample's seven page-list CFIs, turned into range CFIs by hand; the
  expected strings were read off ``EPUB/georgia.xhtml``.
* a tiny EPUB built here, whose markup makes the specification (foliate-js) and epub.js 0.3
  count text steps differently (DESIGN.md §4): leading inline element, ``<br/><br/>``, a
  comment splitting text, and characters outside the BMP (offsets in UTF-16 units).
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

import pytest

try:
    from tests.browser_harness import (
        browser_available,
        in_ci,
        require_browser,
        resolve_in_browser,
        run_job,
    )
except ImportError:  # tests/ is not a package: pytest put tests/ itself on sys.path
    from browser_harness import (  # type: ignore[no-redef]
        browser_available,
        in_ci,
        require_browser,
        resolve_in_browser,
        run_job,
    )

pytestmark = pytest.mark.browser

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpus"
GEORGIA = CORPUS / "epub3_en_georgia-cfi.epub"
GEORGIA_HREF = "EPUB/georgia.xhtml"

# The seven CFIs of georgia-cfi's nav page-list (with their text assertions), for reference:
#   /6/4[ct]!/4/2[d10e42]/12[d10e85]/6[d10e93]/1:1552[Bryan,%20and]
#   /6/4[ct]!/4/2[d10e42]/18[d10e150]/4[d10e155]/1:35
#   /6/4[ct]!/4/2[d10e42]/24[d10e209]/4[d10e214]/3:2180[for,%20taxation]
#   /6/4[ct]!/4/2[d10e42]/26[d10e271]/4[d10e276]/3:1054
#   /6/4[ct]!/4/2[d10e42]/30[d10e304]/14[d10e345]/1:505
#   /6/4[ct]!/4/2[d10e42]/30[d10e304]/22[d10e386]/1:2032
#   /6/4[ct]!/4/2[d10e42]/30[d10e304]/34/2[d10e432]/1:0
# Each range below contains or ends at the page-list point.
GEORGIA_CASES: list[tuple[str, str]] = [
    # "…Liberty, Bryan|^| and Effingham counties" (the text assertion's two sides)
    ("epubcfi(/6/4[ct]!/4/2[d10e42]/12[d10e85]/6[d10e93],/1:1547,/1:1566)", "Bryan and Effingham"),
    # "Although excelled by Alabama in the|^| manufacture of mineral products"
    ("epubcfi(/6/4[ct]!/4/2[d10e42]/18[d10e150]/4[d10e155],/1:36,/1:47)", "manufacture"),
    # "…assessed for|^| taxation." — the third text chunk, after an inline element
    ("epubcfi(/6/4[ct]!/4/2[d10e42]/24[d10e209]/4[d10e214],/3:2177,/3:2189)", "for taxation"),
    # "North Georgia Agricultural College, at|^| Dahlonega"
    ("epubcfi(/6/4[ct]!/4/2[d10e42]/26[d10e271]/4[d10e276],/3:1055,/3:1064)", "Dahlonega"),
    # "the new legislature rescinded the contracts|^| on the ground"
    (
        "epubcfi(/6/4[ct]!/4/2[d10e42]/30[d10e304]/14[d10e345],/1:482,/1:505)",
        "rescinded the contracts",
    ),
    # "in 1854 the rank|^| and file of the Whigs"
    ("epubcfi(/6/4[ct]!/4/2[d10e42]/30[d10e304]/22[d10e386],/1:2028,/1:2041)", "rank and file"),
    # the heading of the governors' table, an element without id on the path (/34)
    ("epubcfi(/6/4[ct]!/4/2[d10e42]/30[d10e304]/34/2[d10e432],/1:0,/1:17)", "List of Governors"),
    # across the SSML <span>s of the first paragraph: /1 text, /2 span, /3 " ", ... /7 " and "
    ("epubcfi(/6/4[ct]!/4/2[d10e42]/4[d10e47],/1:105,/7:4)", "between 30° 31′ 39″ and"),
    # across two elements, through the whitespace-only text between <h1> and <p>
    (
        "epubcfi(/6/4[ct]!/4/2[d10e42],/2[d10e44]/1:0,/4[d10e47]/1:7)",
        "GEORGIA\n         GEORGIA",
    ),
]


def require_corpus() -> None:
    if GEORGIA.is_file():
        return
    message = f"corpus file {GEORGIA} missing (shared/ must sit beside the repository)"
    if in_ci():
        pytest.fail(f"FAILED (CI=true): {message}", pytrace=False)
    pytest.skip(f"SKIPPED: {message}")


def test_browser_available_reports_reason() -> None:
    ok, reason = browser_available()
    assert isinstance(ok, bool)
    assert reason == "ok" if ok else reason.startswith("missing: ")


@pytest.fixture(scope="module")
def georgia_job() -> dict[str, Any]:
    require_browser()
    require_corpus()
    items = [{"href": GEORGIA_HREF, "cfi": cfi, "cfi_epubjs": cfi} for cfi, _ in GEORGIA_CASES]
    return run_job(GEORGIA, items)


@pytest.mark.parametrize(("index", "case"), list(enumerate(GEORGIA_CASES)))
def test_georgia_both_engines(
    georgia_job: dict[str, Any], index: int, case: tuple[str, str]
) -> None:
    cfi, expected = case
    r = georgia_job["results"][index]
    assert r["foliate_error"] is None, r
    assert r["epubjs_error"] is None, r
    assert r["foliate"] == expected, cfi
    assert r["epubjs"] == expected, cfi
    # the spine step /6/4[ct] names georgia.xhtml in both engines
    assert r["foliate_href"] == GEORGIA_HREF
    assert r["epubjs_href"] == GEORGIA_HREF
    assert r["foliate_parsed_as"] == "application/xhtml+xml"


def test_georgia_versions_and_timings(georgia_job: dict[str, Any]) -> None:
    versions = georgia_job["versions"]
    assert versions["epubjs"].startswith("0.3.")
    assert versions["foliate-js"]
    assert versions["chromium"]
    assert georgia_job["timings_ms"]["total"] > 0


def test_georgia_point_cfis_and_errors() -> None:
    """Point CFIs give an empty range; href None follows the spine; bad CFIs don't kill the job."""
    require_browser()
    require_corpus()
    point = "epubcfi(/6/4[ct]!/4/2[d10e42]/12[d10e85]/6[d10e93]/1:1552[Bryan,%20and])"
    items: list[dict[str, Any]] = [
        {"href": GEORGIA_HREF, "cfi": point, "cfi_epubjs": point},
        {"href": None, "cfi": GEORGIA_CASES[1][0], "cfi_epubjs": None},
        {"href": GEORGIA_HREF, "cfi": None, "cfi_epubjs": GEORGIA_CASES[2][0]},
        # spine position 20 does not exist; the offset runs past the text node's end
        {"href": GEORGIA_HREF, "cfi": None, "cfi_epubjs": "epubcfi(/6/20!/4/2,/1:0,/1:3)"},
        {
            "href": GEORGIA_HREF,
            "cfi": "epubcfi(/6/4[ct]!/4/2[d10e42]/4[d10e47],/1:0,/1:99999)",
            "cfi_epubjs": None,
        },
    ]
    r = resolve_in_browser(GEORGIA, items)
    assert r[0]["foliate"] == "" and r[0]["epubjs"] == ""
    assert r[0]["foliate_error"] is None and r[0]["epubjs_error"] is None
    assert r[1]["foliate"] == "manufacture" and r[1]["foliate_href"] == GEORGIA_HREF
    assert r[1]["epubjs"] is None and r[1]["epubjs_error"] is None
    assert r[2]["foliate"] is None and r[2]["foliate_error"] is None
    assert r[2]["epubjs"] == "for taxation"
    assert r[3]["epubjs"] is None and r[3]["epubjs_error"]
    assert r[4]["foliate"] is None and r[4]["foliate_error"]


# --- a tiny EPUB where the specification and epub.js 0.3 count text steps differently ---

CHAPTER = """<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE html>
<html xmlns="http://www.w3.org/1999/xhtml" xml:lang="en">
<head><title>Chapter</title></head>
<body>
<p id="p1"><b>Bold</b> tail text</p>
<p id="p2">one<br/><br/>two</p>
<p id="p3">before<!-- a comment -->after</p>
<p id="p4">\U0001d538\U0001d539 astral words</p>
</body>
</html>
"""

# a UTF-16 (BOM) chapter: the harness decodes it as its BOM says; epub.js decodes as UTF-8
CHAPTER_UTF16 = """<?xml version="1.0" encoding="UTF-16"?>
<html xmlns="http://www.w3.org/1999/xhtml" xml:lang="en">
<head><title>Chapter 2</title></head>
<body><p id="q1">Wide \u00e9t\u00e9 text</p></body>
</html>
"""

NAV = """<?xml version="1.0" encoding="UTF-8"?>
<html xmlns="http://www.w3.org/1999/xhtml" xmlns:epub="http://www.idpf.org/2007/ops">
<head><title>Contents</title></head>
<body><nav epub:type="toc"><ol><li><a href="ch1.xhtml">Chapter</a></li></ol></nav></body>
</html>
"""

OPF = """<?xml version="1.0" encoding="UTF-8"?>
<package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="uid">
<metadata xmlns:dc="http://purl.org/dc/elements/1.1/">
<dc:identifier id="uid">urn:uuid:00000000-0000-4000-8000-000000000001</dc:identifier>
<dc:title>Text steps</dc:title><dc:language>en</dc:language>
<meta property="dcterms:modified">2026-01-01T00:00:00Z</meta>
</metadata>
<manifest>
<item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" properties="nav"/>
<item id="ch1" href="ch1.xhtml" media-type="application/xhtml+xml"/>
<item id="ch2" href="ch2.xhtml" media-type="application/xhtml+xml"/>
</manifest>
<spine><itemref idref="nav"/><itemref idref="ch1" id="ch1ref"/><itemref idref="ch2" id="ch2ref"/></spine>
</package>
"""

CONTAINER = """<?xml version="1.0" encoding="UTF-8"?>
<container xmlns="urn:oasis:names:tc:opendocument:xmlns:container" version="1.0">
<rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/></rootfiles>
</container>
"""

# (specification CFI — what foliate-js resolves, epub.js form of the same place, text)
# body is /4; p1../p4 are /2../8.
STEP_CASES: list[tuple[str, str, str]] = [
    # <p><b>Bold</b> tail</p>: the spec has an empty chunk /1 before <b>, so the tail is /3;
    # epub.js counts only existing text nodes, so for it the tail is /1.
    (
        "epubcfi(/6/4[ch1ref]!/4/2[p1],/3:1,/3:5)",
        "epubcfi(/6/4[ch1ref]!/4/2[p1],/1:1,/1:5)",
        "tail",
    ),
    # one<br/><br/>two: spec /1 one, /2 br, /3 (empty), /4 br, /5 two; epub.js: two is /3
    (
        "epubcfi(/6/4[ch1ref]!/4/4[p2],/5:0,/5:3)",
        "epubcfi(/6/4[ch1ref]!/4/4[p2],/3:0,/3:3)",
        "two",
    ),
    # before<!---->after: one chunk /1 "beforeafter" for the spec; two text nodes for epub.js
    (
        "epubcfi(/6/4[ch1ref]!/4/6[p3],/1:6,/1:11)",
        "epubcfi(/6/4[ch1ref]!/4/6[p3],/3:0,/3:5)",
        "after",
    ),
    # two astral letters = 4 UTF-16 units (2 code points) + space: "astral" starts at :5
    (
        "epubcfi(/6/4[ch1ref]!/4/8[p4],/1:5,/1:11)",
        "epubcfi(/6/4[ch1ref]!/4/8[p4],/1:5,/1:11)",
        "astral",
    ),
    # and a range over the whole astral text, both engines
    (
        "epubcfi(/6/4[ch1ref]!/4/8[p4],/1:0,/1:4)",
        "epubcfi(/6/4[ch1ref]!/4/8[p4],/1:0,/1:4)",
        "\U0001d538\U0001d539",
    ),
]


def make_step_epub(path: Path) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(zipfile.ZipInfo("mimetype"), "application/epub+zip")
        z.writestr("META-INF/container.xml", CONTAINER, zipfile.ZIP_DEFLATED)
        z.writestr("OEBPS/content.opf", OPF, zipfile.ZIP_DEFLATED)
        z.writestr("OEBPS/nav.xhtml", NAV, zipfile.ZIP_DEFLATED)
        z.writestr("OEBPS/ch1.xhtml", CHAPTER.encode("utf-8"), zipfile.ZIP_DEFLATED)
        z.writestr("OEBPS/ch2.xhtml", CHAPTER_UTF16.encode("utf-16"), zipfile.ZIP_DEFLATED)
    return path


def test_text_step_divergence(tmp_path: Path) -> None:
    require_browser()
    epub = make_step_epub(tmp_path / "steps.epub")
    href = "OEBPS/ch1.xhtml"
    items = [{"href": href, "cfi": spec, "cfi_epubjs": ejs} for spec, ejs, _ in STEP_CASES]
    # the spec CFIs handed to epub.js, to show it really disagrees where DESIGN.md says
    crossed = [{"href": href, "cfi": None, "cfi_epubjs": spec} for spec, ejs, _ in STEP_CASES]
    results = resolve_in_browser(epub, items + crossed)
    for (spec, ejs, expected), r in zip(STEP_CASES, results[: len(STEP_CASES)]):
        assert r["foliate"] == expected, (spec, r)
        assert r["epubjs"] == expected, (ejs, r)
        assert r["foliate_href"] == href and r["epubjs_href"] == href
    for (spec, ejs, expected), r in zip(STEP_CASES, results[len(STEP_CASES) :]):
        if spec == ejs:
            assert r["epubjs"] == expected
        else:
            assert r["epubjs"] != expected, (spec, r)


def test_utf16_document(tmp_path: Path) -> None:
    """foliate's side follows the BOM; epub.js 0.3 decodes every file as UTF-8 (DESIGN.md §4)."""
    require_browser()
    epub = make_step_epub(tmp_path / "steps.epub")
    cfi = "epubcfi(/6/6[ch2ref]!/4/2[q1],/1:5,/1:8)"
    (r,) = resolve_in_browser(epub, [{"href": None, "cfi": cfi, "cfi_epubjs": cfi}])
    assert r["foliate"] == "\u00e9t\u00e9", r
    assert r["foliate_href"] == "OEBPS/ch2.xhtml"
    assert r["foliate_parsed_as"] == "application/xhtml+xml"
    assert r["epubjs"] != "\u00e9t\u00e9", r
