"""Catalogue benchmark: the OPDS feeds and KOReader's progress sync of a served library of
N generated books, beside calibre's content server on the same books, in the same run.

For each size N (``--sizes``):

* writes N small, distinct, valid EPUB 3 files (seeded: titles, authors, languages en /
  zh / ja / fr, a small PNG cover in about a third, 2–3 short chapters; ``zipfile``,
  ``mimetype`` first and stored) into a temporary folder;
* imports them into a fresh library (``Library.import_many(..., embed=False)``,
  ``MINDORY_EMBEDDER=hashed``) and reports the time; past ``--import-budget`` seconds
  the import stops and the library is measured with the books it has (the table says
  so);
* serves it with ``mindory serve`` on 127.0.0.1 and measures p50 / p95 (``--requests``
  each, after a warm-up) of: the OPDS 1.2 root feed; a 50-entry page of its "all books"
  (else "recent") acquisition feed, found by following the root's links, with the page
  size set through the query parameter the feed's ``next`` link carries; a search
  through the OpenSearch template, with a title word; the same three for OPDS 2.0
  (``/opds/v2``); and a KOReader push → pull round trip (``PUT`` then ``GET``
  ``/kosync/syncs/progress``, the document key the file's partial MD5, the xpointer the
  one mindory gives for a position set through the API first). A route that is missing
  (404) is reported "not available".
* for the first size of at most 1,000 books, calibre's content server on the same files:
  ``calibredb add -r`` (timed), ``calibre-server --listen-on 127.0.0.1 --max-opds-items
  50``, its OPDS root, a 50-entry page of its "By newest" (else "Title") feed and its
  OPDS search, measured the same way. Skipped, with the reason printed, when calibre is
  not installed or does not start (``--no-calibre`` skips it).

Every request goes to 127.0.0.1; every server started here is stopped. Target: every
mindory request ≤ 50 ms at p50 with 10,000 books.

    .venv/bin/python bench/bench_catalogue.py [--sizes 1000,10000] [--requests 30] \
        [--import-budget 780] [--no-calibre] [--keep DIR] [--json OUT]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urljoin, urlsplit, urlunsplit
from xml.etree import ElementTree as ET

import httpx

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
WARMUP = 3
PAGE = 50
TARGET_MS = 50.0
CALIBRE_MAX_BOOKS = 1_000
ATOM = "{http://www.w3.org/2005/Atom}"
OPENSEARCH = "{http://a9.com/-/spec/opensearch/1.1/}"
PAGE_SIZE_NAMES = ("page_size", "pagesize", "per_page", "size", "limit", "count", "n", "max")

# ---------------------------------------------------------------------------- the books


def _w(text: str) -> list[str]:
    return text.split()


WORDS: dict[str, dict[str, list[str]]] = {
    "en": {
        "adj": _w(
            "Silent Hidden Crimson Northern Forgotten Winter Golden Distant Broken Quiet "
            "Wandering Iron Velvet Burning Hollow Last Secret Pale Endless Wild"
        ),
        "noun": _w(
            "Lighthouse Orchard River Garden Harbour Mountain Library Kingdom Voyage "
            "Letters Bridge Island Forest Cathedral Meadow Lantern Compass Tide Mirror Crown"
        ),
        "first": _w("Alice Thomas Margaret Henry Eleanor James Clara Arthur Edith Samuel"),
        "last": _w("Whitmore Ashford Blake Carrow Dunmore Ellery Finch Hale Morrow Thorne"),
        "text": _w(
            "the river ran quiet under the bridge and the lantern burned while she "
            "read the old letters again before the tide turned toward the northern harbour "
            "where nobody waited for the voyage to end"
        ),
    },
    "fr": {
        "adj": _w("Dernier Secret Ancien Petit Grand Sombre Doux Lointain Perdu Blanc"),
        "noun": _w("Jardin Voyage Rivière Château Silence Miroir Hiver Phare Royaume Verger"),
        "first": _w("Marie Jean Louise Pierre Camille Étienne Hélène Julien Sophie Lucien"),
        "last": _w("Durand Lefèvre Moreau Girard Fontaine Rousseau Mercier Blanchard"),
        "text": _w(
            "le vent soufflait sur la rivière et elle lisait encore les vieilles "
            "lettres pendant que la lumière du phare tournait lentement au-dessus du port"
        ),
    },
    "zh": {
        "adj": _w("寂静的 遥远的 失落的 秋天的 北方的 古老的 金色的 最后的"),
        "noun": _w("花园 河流 灯塔 山城 书信 王国 旅程 故乡 月光 长街"),
        "first": _w("明 华 静 伟 芳 磊 婷 强 丽 军"),
        "last": _w("王 李 张 刘 陈 杨 黄 赵 周 吴"),
        "text": list("河水在桥下静静地流着她又读了一遍那些旧信灯塔的光慢慢转过港口"),
    },
    "ja": {
        "adj": _w("静かな 遠い 失われた 秋の 北の 古い 金色の 最後の"),
        "noun": _w("庭園 川 灯台 山 手紙 王国 旅 故郷 月 街"),
        "first": _w("健 花子 翔 美咲 大輔 由美 蓮 葵 拓海 陽菜"),
        "last": _w("佐藤 鈴木 高橋 田中 伊藤 渡辺 山本 中村 小林 加藤"),
        "text": list("川は橋の下を静かに流れ彼女は古い手紙をもう一度読んだ灯台の光が港をめぐる"),
    },
}
LANGS = ("en", "en", "zh", "ja", "fr")  # English twice as often
SPACED = {"en": True, "fr": True, "zh": False, "ja": False}


def _png(width: int, height: int, rgb: tuple[int, int, int]) -> bytes:
    """A small solid-colour PNG, written by hand (no imaging library needed)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    row = b"\x00" + bytes(rgb) * width
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", zlib.compress(row * height))
        + chunk(b"IEND", b"")
    )


def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _sentence(rng: random.Random, lang: str) -> str:
    words = WORDS[lang]["text"]
    at = rng.randrange(len(words))
    n = rng.randint(8, 18)
    picked = [words[(at + k) % len(words)] for k in range(n)]
    if SPACED[lang]:
        text = " ".join(picked)
        return text[0].upper() + text[1:] + "."
    return "".join(picked) + "。"


def _book(k: int, rng: random.Random) -> dict[str, Any]:
    lang = LANGS[k % len(LANGS)] if rng.random() < 0.8 else rng.choice(LANGS)
    w = WORDS[lang]
    adj, noun = rng.choice(w["adj"]), rng.choice(w["noun"])
    first, last = rng.choice(w["first"]), rng.choice(w["last"])
    if SPACED[lang]:
        title = f"The {adj} {noun}" if lang == "en" else f"Le {noun} {adj.lower()}"
        title += f" {k + 1}" if rng.random() < 0.5 else f", volume {k + 1}"
        author = f"{first} {last}"
    else:
        title = f"{adj}{noun} 第{k + 1}巻" if lang == "ja" else f"{adj}{noun} 第{k + 1}卷"
        author = f"{last}{first}"
    chapters = []
    for c in range(rng.randint(2, 3)):
        paras = [
            (" " if SPACED[lang] else "").join(
                _sentence(rng, lang) for _ in range(rng.randint(2, 5))
            )
            for _ in range(rng.randint(3, 6))
        ]
        chapters.append((f"{'Chapter' if SPACED[lang] else '第'} {c + 1}", paras))
    cover = None
    if rng.random() < 0.35:
        cover = _png(48, 64, (rng.randrange(256), rng.randrange(256), rng.randrange(256)))
    return {"id": f"urn:uuid:00000000-0000-4000-8000-{k:012d}", "title": title,
            "author": author, "lang": lang, "chapters": chapters, "cover": cover}  # fmt: skip


def _epub_bytes(b: dict[str, Any], modified: str) -> bytes:
    lang = b["lang"]
    container = (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">'
        '<rootfiles><rootfile full-path="OEBPS/content.opf" '
        'media-type="application/oebps-package+xml"/></rootfiles></container>'
    )
    manifest = ['<item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" '
                'properties="nav"/>']  # fmt: skip
    spine = []
    files: dict[str, bytes] = {}
    nav_items = []
    for i, (heading, paras) in enumerate(b["chapters"], 1):
        name = f"chapter{i}.xhtml"
        body = "".join(f"<p>{_esc(p)}</p>" for p in paras)
        files[name] = (
            '<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE html>\n'
            f'<html xmlns="http://www.w3.org/1999/xhtml" xml:lang="{lang}" lang="{lang}">'
            f"<head><title>{_esc(heading)}</title></head>"
            f"<body><h1>{_esc(heading)}</h1>{body}</body></html>"
        ).encode()
        manifest.append(f'<item id="c{i}" href="{name}" media-type="application/xhtml+xml"/>')
        spine.append(f'<itemref idref="c{i}"/>')
        nav_items.append(f'<li><a href="{name}">{_esc(heading)}</a></li>')
    meta_cover = ""
    if b["cover"] is not None:
        files["cover.png"] = b["cover"]
        manifest.append('<item id="cover" href="cover.png" media-type="image/png" '
                        'properties="cover-image"/>')  # fmt: skip
        meta_cover = '<meta name="cover" content="cover"/>'
    files["nav.xhtml"] = (
        '<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE html>\n'
        '<html xmlns="http://www.w3.org/1999/xhtml" '
        f'xmlns:epub="http://www.idpf.org/2007/ops" xml:lang="{lang}" lang="{lang}">'
        f"<head><title>{_esc(b['title'])}</title></head><body>"
        f'<nav epub:type="toc" id="toc"><ol>{"".join(nav_items)}</ol></nav></body></html>'
    ).encode()
    opf = (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="uid">'
        '<metadata xmlns:dc="http://purl.org/dc/elements/1.1/">'
        f'<dc:identifier id="uid">{b["id"]}</dc:identifier>'
        f"<dc:title>{_esc(b['title'])}</dc:title>"
        f"<dc:creator>{_esc(b['author'])}</dc:creator>"
        f"<dc:language>{lang}</dc:language>"
        f'<meta property="dcterms:modified">{modified}</meta>{meta_cover}'
        f"</metadata><manifest>{''.join(manifest)}</manifest>"
        f"<spine>{''.join(spine)}</spine></package>"
    )
    stamp = (2026, 1, 1, 0, 0, 0)  # every member's date: the same bytes every run
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr(zipfile.ZipInfo("mimetype", stamp), "application/epub+zip", zipfile.ZIP_STORED)
        z.writestr(
            zipfile.ZipInfo("META-INF/container.xml", stamp), container, zipfile.ZIP_DEFLATED
        )
        z.writestr(zipfile.ZipInfo("OEBPS/content.opf", stamp), opf, zipfile.ZIP_DEFLATED)
        for name, data in files.items():
            kind = zipfile.ZIP_STORED if name.endswith(".png") else zipfile.ZIP_DEFLATED
            z.writestr(zipfile.ZipInfo(f"OEBPS/{name}", stamp), data, kind)
    return buf.getvalue()


def write_books(folder: Path, n: int, seed: int = 11) -> list[dict[str, Any]]:
    """N EPUB files in ``folder`` (book-00001.epub …); the same N for the same seed.
    Returns each book's metadata with its ``path``."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    out = []
    for k in range(n):
        b = _book(k, rng)
        # a fixed dcterms:modified per book (and fixed member dates): the same bytes every run
        modified = f"2026-{1 + k % 12:02d}-{1 + k % 28:02d}T12:00:00Z"
        path = folder / f"book-{k + 1:05d}.epub"
        path.write_bytes(_epub_bytes(b, modified))
        out.append({"title": b["title"], "author": b["author"], "lang": b["lang"],
                    "cover": b["cover"] is not None, "path": path})  # fmt: skip
    return out


# ---------------------------------------------------------------------------- measuring


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Unavailable(Exception):
    """A route or a link the feed does not have (reported "not available")."""


def _timed(client: httpx.Client, runs: int, call: Callable[[], httpx.Response]) -> dict[str, Any]:
    """p50 / p95 of ``runs`` calls after a warm-up; each must answer 2xx."""
    for _ in range(WARMUP):
        r = call()
        if r.status_code == 404:
            raise Unavailable(f"404 at {r.request.url}")
        r.raise_for_status()
    times = []
    last = r
    for _ in range(runs):
        t = time.perf_counter()
        r = call()
        r.read()
        times.append(1000 * (time.perf_counter() - t))
        r.raise_for_status()
        last = r
    out = {"p50_ms": round(_pct(times, 0.5), 1), "p95_ms": round(_pct(times, 0.95), 1),
           "requests": runs, "bytes": len(last.content)}  # fmt: skip
    entries = _entries(last)
    if entries is not None:
        out["entries"] = entries
    return out


def _entries(r: httpx.Response) -> int | None:
    """How many books (Atom entries with an acquisition link; OPDS 2 publications) an
    answer lists; None for other answers."""
    kind = r.headers.get("content-type", "")
    try:
        if "xml" in kind:
            return sum(
                any("acquisition" in lk.get("rel", "") for lk in e.findall(f"{ATOM}link"))
                for e in ET.fromstring(r.content).findall(f"{ATOM}entry")
            )
        if "json" in kind:
            data = r.json()
            return len(data.get("publications", [])) if isinstance(data, dict) else None
    except (ET.ParseError, ValueError):
        return None
    return None


def _get(client: httpx.Client, url: str) -> httpx.Response:
    r = client.get(url)
    if r.status_code == 404:
        raise Unavailable(f"404 at {url}")
    r.raise_for_status()
    if "html" in r.headers.get("content-type", ""):
        raise Unavailable(f"{url} answers HTML (the web app?), not a feed")
    return r


# ---------------------------------------------------------------------------- OPDS 1.2


def _atom_links(root: ET.Element) -> list[dict[str, str]]:
    """Every link of the feed and of its entries, with the entry's title when in one."""
    out = [dict(link.attrib, entry="") for link in root.findall(f"{ATOM}link")]
    for entry in root.findall(f"{ATOM}entry"):
        title = entry.findtext(f"{ATOM}title") or ""
        out += [dict(link.attrib, entry=title) for link in entry.findall(f"{ATOM}link")]
    return out


def _pick_feed(links: list[dict[str, str]], wanted: tuple[tuple[str, ...], ...]) -> dict[str, str]:
    """The first link whose rel or entry title matches one of ``wanted``'s word groups, in
    that order of preference; only links to feeds."""
    feeds = [
        link for link in links
        if "atom+xml" in link.get("type", "") or "opds+json" in link.get("type", "")
        or link.get("type", "") in ("", "application/json")
    ]  # fmt: skip
    for words in wanted:
        for link in feeds:
            label = f"{link.get('rel', '')} {link.get('entry', '')} {link.get('title', '')}"
            if link.get("rel") in ("self", "start", "up", "search"):
                continue
            if any(w in label.lower() for w in words):
                return link
    raise Unavailable(f"no link to {wanted[0][0]!r} feed")


def _with_page_size(url: str, next_url: str | None, size: int) -> str:
    """``url`` with the page-size parameter the ``next`` link carries set to ``size``;
    ``url`` itself when the link carries none (the feed's own page size: the caller
    checks that the page holds ``size`` entries)."""
    if not next_url:
        raise Unavailable("the feed has no next link (fewer books than a page?)")
    params = dict(parse_qsl(urlsplit(next_url).query))
    name = next((p for p in params if p.lower() in PAGE_SIZE_NAMES), None)
    if name is None:
        return url
    parts = urlsplit(url)
    own = dict(parse_qsl(parts.query))
    own[name] = str(size)
    return urlunsplit(parts._replace(query=urlencode(own)))


def _fill_template(template: str, word: str) -> str:
    out = template.replace("{searchTerms}", quote(word))
    # optional OpenSearch parameters ({startPage?} …): empty
    while "{" in out and "}" in out[out.index("{") :]:
        a = out.index("{")
        b = out.index("}", a)
        out = out[:a] + out[b + 1 :]
    return out


def _opds1_search_url(
    client: httpx.Client, base: str, links: list[dict[str, str]], word: str
) -> str:
    # the catalogue's search (titles, authors) before any other (passages)
    found = [link for link in links if link.get("rel") == "search"]
    found.sort(key=lambda link: "title" not in link.get("title", "").lower())
    for link in found:
        href = urljoin(base, link["href"])
        if "{searchTerms}" in href:
            return _fill_template(href, word)
        if "opensearchdescription" in link.get("type", ""):
            desc = ET.fromstring(_get(client, href).content)
            urls = desc.findall(f"{OPENSEARCH}Url")
            urls.sort(key=lambda u: "atom" not in u.get("type", ""))
            for u in urls:
                if "{searchTerms}" in u.get("template", ""):
                    return _fill_template(urljoin(href, u.get("template", "")), word)
    raise Unavailable("no search link in the root feed")


def _opds1_urls(client: httpx.Client, root_url: str, word: str) -> dict[str, str]:
    """The three OPDS 1.2 requests, found from the root feed's links."""
    root = ET.fromstring(_get(client, root_url).content)
    links = _atom_links(root)
    urls = {"root": root_url}
    try:
        feed = _pick_feed(
            links, (("all books", "all"), ("title",), ("/sort/new", "newest", "recent", "new"))
        )
        feed_url = urljoin(root_url, feed["href"])
        page = ET.fromstring(_get(client, feed_url).content)
        nxt = next((lk["href"] for lk in _atom_links(page) if lk.get("rel") == "next"), None)
        sized = _with_page_size(feed_url, urljoin(feed_url, nxt) if nxt else None, PAGE)
        got = len(ET.fromstring(_get(client, sized).content).findall(f"{ATOM}entry"))
        if got != PAGE:
            raise Unavailable(f"{sized} gave {got} entries, not {PAGE}")
        urls["page of 50"] = sized
    except Unavailable as exc:
        urls["page of 50"] = f"not available: {exc}"
    try:
        urls["search"] = _opds1_search_url(client, root_url, links, word)
    except Unavailable as exc:
        urls["search"] = f"not available: {exc}"
    return urls


def _calibre_urls(client: httpx.Client, root_url: str, word: str) -> dict[str, str]:
    """calibre's three requests: its page size is the server's --max-opds-items (50)."""
    root = ET.fromstring(_get(client, root_url).content)
    links = _atom_links(root)
    urls = {"root": root_url}
    try:
        feed = _pick_feed(links, (("newest",), ("title",)))
        feed_url = urljoin(root_url, feed["href"])
        got = len(ET.fromstring(_get(client, feed_url).content).findall(f"{ATOM}entry"))
        if got != PAGE:
            raise Unavailable(f"{feed_url} gave {got} entries, not {PAGE}")
        urls["page of 50"] = feed_url
    except Unavailable as exc:
        urls["page of 50"] = f"not available: {exc}"
    try:
        urls["search"] = _opds1_search_url(client, root_url, links, word)
    except Unavailable as exc:
        urls["search"] = f"not available: {exc}"
    return urls


# ---------------------------------------------------------------------------- OPDS 2.0


def _opds2_urls(client: httpx.Client, root_url: str, word: str) -> dict[str, str]:
    root = _get(client, root_url).json()
    links = [dict(lk, entry="") for lk in root.get("links", [])]
    links += [dict(lk, entry=lk.get("title", "")) for lk in root.get("navigation", [])]
    for group in root.get("groups", []):
        links += [dict(lk, entry=lk.get("title", "")) for lk in group.get("navigation", [])]
        links += [dict(lk, entry=group.get("metadata", {}).get("title", ""))
                  for lk in group.get("links", [])]  # fmt: skip
    for lk in links:
        rel = lk.get("rel", "")
        lk["rel"] = " ".join(rel) if isinstance(rel, list) else rel
    urls = {"root": root_url}
    try:
        feed = _pick_feed(
            links, (("all books", "all"), ("title",), ("/sort/new", "newest", "recent", "new"))
        )
        feed_url = urljoin(root_url, feed["href"])
        page = _get(client, feed_url).json()
        nxt = next(
            (lk["href"] for lk in page.get("links", []) if "next" in lk.get("rel", "")), None
        )
        sized = _with_page_size(feed_url, urljoin(feed_url, nxt) if nxt else None, PAGE)
        got = len(_get(client, sized).json().get("publications", []))
        if got != PAGE:
            raise Unavailable(f"{sized} gave {got} publications, not {PAGE}")
        urls["page of 50"] = sized
    except Unavailable as exc:
        urls["page of 50"] = f"not available: {exc}"
    searches = [lk for lk in links if "search" in lk["rel"].split()]
    # the catalogue's search (titles, authors) before any other (passages)
    searches.sort(key=lambda lk: "title" not in str(lk.get("title", "")).lower())
    search = searches[0] if searches else None
    if search is None or "{" not in search.get("href", ""):
        urls["search"] = "not available: no templated search link"
    else:
        href = search["href"]
        # RFC 6570 level 1 ({query}) or a form-style query ({?query,...})
        if "{?" in href:
            a = href.index("{?")
            names = href[a + 2 : href.index("}", a)].split(",")
            filled = href[:a] + "?" + urlencode({names[0]: word})
        else:
            a = href.index("{")
            filled = href[:a] + quote(word) + href[href.index("}", a) + 1 :]
        urls["search"] = urljoin(root_url, filled)
    return urls


# ---------------------------------------------------------------------------- servers


def _wait(base: str, path: str, proc: subprocess.Popen[bytes], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            if httpx.get(base + path, timeout=5).status_code < 500:
                return
        except httpx.TransportError:
            pass
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited (code {proc.returncode})")
        if time.monotonic() > deadline:
            raise RuntimeError(f"the server did not answer within {seconds:.0f} s")
        time.sleep(0.2)


def _stop(proc: subprocess.Popen[bytes] | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


def _measure_all(
    client: httpx.Client, urls: dict[str, str], runs: int, prefix: str
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, url in urls.items():
        key = f"{prefix} {name}"
        if url.startswith("not available"):
            out[key] = {"error": url}
            continue
        try:
            out[key] = {"url": url, **_timed(client, runs, lambda u=url: client.get(u))}
        except Unavailable as exc:
            out[key] = {"error": f"not available: {exc}"}
        except httpx.HTTPError as exc:
            out[key] = {"error": f"failed: {type(exc).__name__}: {exc}"}
    return out


def _kosync(client: httpx.Client, books: list[dict[str, Any]], runs: int) -> dict[str, Any]:
    """A push → pull round trip of KOReader's sync on one book."""
    from mindory.importers.document_keys import partial_md5

    path = books[len(books) // 2]["path"]
    key = partial_md5(path.read_bytes())
    book_id = books[len(books) // 2].get("book")
    if not book_id:
        return {"error": "not available: the book was not imported"}
    r = client.put(
        f"/books/{book_id}/position",
        json={"device": "web", "modified": "2026-12-01T10:00:00Z", "section": 1, "offset": 10},
    )
    if r.status_code >= 300:
        return {"error": f"not available: PUT position: HTTP {r.status_code} {r.text[:200]}"}
    auth = {"x-auth-user": "bench", "x-auth-key": "5f4dcc3b5aa765d61d8327deb882cf99"}
    pulled = client.get(f"/kosync/syncs/progress/{key}", headers=auth)
    if pulled.status_code == 404:
        return {"error": "not available: 404 at /kosync"}
    try:
        xpointer = pulled.json().get("progress")
    except ValueError:
        xpointer = None
    if pulled.status_code != 200 or not xpointer:
        return {"error": f"not available: pull gave HTTP {pulled.status_code} {pulled.text[:200]}"}
    body = {"document": key, "progress": xpointer, "percentage": 0.25, "device": "bench",
            "device_id": "BENCH0001"}  # fmt: skip

    def round_trip() -> httpx.Response:
        push = client.put("/kosync/syncs/progress", json=body, headers=auth)
        push.raise_for_status()
        pull = client.get(f"/kosync/syncs/progress/{key}", headers=auth)
        pull.raise_for_status()
        if pull.json().get("progress") != xpointer:
            raise RuntimeError(f"pulled {pull.json()!r}, pushed {xpointer!r}")
        return pull

    try:
        timed = _timed(client, runs, round_trip)
    except (httpx.HTTPError, RuntimeError) as exc:
        return {"error": f"failed: {exc}"}
    timed.pop("entries", None)
    return {"xpointer": xpointer, **timed}


def _title_word(books: list[dict[str, Any]]) -> str:
    """A real title word: the noun of the middle English book's title."""
    english = [b for b in books if b["lang"] == "en"]
    return english[len(english) // 2]["title"].split()[2].strip(",")


def run_mindory(
    books: list[dict[str, Any]],
    work: Path,
    runs: int,
    log: Callable[[str], None],
    budget_s: float,
) -> dict[str, Any]:
    from mindory.library import Library

    db = work / "library.sqlite"
    out: dict[str, Any] = {"books": len(books)}
    t = time.perf_counter()
    ok = failed = 0
    by_path: dict[str, str] = {}
    with Library.open(db) as lib:
        for res in lib.import_many([b["path"] for b in books], embed=False):
            if type(res).__name__ == "ImportFailure":
                failed += 1
                if failed <= 3:
                    log(f"  import failed: {res}")
            else:
                ok += 1
                by_path[str(res.path)] = res.book
            if (ok + failed) % 1000 == 0:
                log(f"  {ok + failed} imported, {time.perf_counter() - t:.0f} s")
            if time.perf_counter() - t > budget_s and ok + failed < len(books):
                out["import_stopped"] = (
                    f"{len(books):,} asked; the import budget of {budget_s:.0f} s ran out "
                    f"after {ok + failed:,}"
                )
                log(f"  {out['import_stopped']}")
                break
    out["import_s"] = round(time.perf_counter() - t, 1)
    out["imported"], out["import_failures"] = ok, failed
    out["books"] = ok + failed
    for b in books:
        b["book"] = by_path.get(str(b["path"]))
    books = [b for b in books if b["book"]]  # those in the library (the budget may stop it)
    log(f"mindory: imported {ok} books ({failed} failed) in {out['import_s']} s")
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if k != "MINDORY_TOKEN"}
    proc = subprocess.Popen(
        [str(BIN / "mindory"), "serve", "--db", str(db), "--port", str(port),
         "--log-level", "warning"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    word = _title_word(books)
    out["search_word"] = word
    try:
        t = time.perf_counter()
        _wait(base, "/health", proc, 120)
        out["server_ready_s"] = round(time.perf_counter() - t, 1)
        with httpx.Client(base_url=base, timeout=60) as client:
            requests: dict[str, Any] = {}
            for prefix, root, finder in (
                ("OPDS 1.2", base + "/opds", _opds1_urls),
                ("OPDS 2.0", base + "/opds/v2", _opds2_urls),
            ):
                try:
                    urls = finder(client, root, word)
                except Unavailable as exc:
                    urls = {n: f"not available: {exc}" for n in ("root", "page of 50", "search")}
                except (httpx.HTTPError, ET.ParseError, ValueError) as exc:
                    urls = {n: f"failed: {type(exc).__name__}: {exc}"
                            for n in ("root", "page of 50", "search")}  # fmt: skip
                requests.update(_measure_all(client, urls, runs, prefix))
            requests["KOReader push → pull"] = _kosync(client, books, runs)
            out["requests"] = requests
    finally:
        _stop(proc)
    return out


def run_calibre(
    books: list[dict[str, Any]], folder: Path, work: Path, runs: int, log: Callable[[str], None]
) -> dict[str, Any]:
    calibredb, server = shutil.which("calibredb"), shutil.which("calibre-server")
    if not calibredb or not server:
        return {"skipped": "calibre is not installed (apt-get install calibre)"}
    home = work / "home"
    home.mkdir(exist_ok=True)
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "HOME": str(home),
           "CALIBRE_CONFIG_DIRECTORY": str(home / "config"), "LANG": "C.UTF-8"}  # fmt: skip
    libdir = work / "calibre-library"
    libdir.mkdir(exist_ok=True)
    out: dict[str, Any] = {"books": len(books)}
    t = time.perf_counter()
    added = subprocess.run(
        [calibredb, "add", "-r", str(folder), "--with-library", str(libdir)],
        env=env, capture_output=True, text=True, timeout=3600,
    )  # fmt: skip
    out["import_s"] = round(time.perf_counter() - t, 1)
    if added.returncode != 0:
        return {"skipped": f"calibredb add failed: {added.stderr.strip()[-300:]}"}
    listed = subprocess.run(
        [calibredb, "list", "--fields", "id", "--for-machine", "--with-library", str(libdir)],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    try:
        out["imported"] = len(json.loads(listed.stdout))
    except ValueError:
        out["imported"] = None
    log(f"calibre: added {out['imported']} books in {out['import_s']} s")
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [server, "--port", str(port), "--listen-on", "127.0.0.1",
         "--max-opds-items", str(PAGE), str(libdir)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    word = _title_word(books)
    out["search_word"] = word
    try:
        t = time.perf_counter()
        try:
            _wait(base, "/opds", proc, 180)
        except RuntimeError as exc:
            return {**out, "skipped": f"calibre-server did not start: {exc}"}
        out["server_ready_s"] = round(time.perf_counter() - t, 1)
        with httpx.Client(base_url=base, timeout=60) as client:
            try:
                urls = _calibre_urls(client, base + "/opds", word)
            except (Unavailable, httpx.HTTPError, ET.ParseError) as exc:
                urls = {n: f"not available: {exc}" for n in ("root", "page of 50", "search")}
            out["requests"] = _measure_all(client, urls, runs, "OPDS 1.2")
    finally:
        _stop(proc)
    return out


# ---------------------------------------------------------------------------- report


def _cell(row: dict[str, Any] | None) -> str:
    if row is None:
        return "—"
    if "error" in row:
        return "not available" if row["error"].startswith("not available") else "failed"
    return f"{row['p50_ms']:.1f} / {row['p95_ms']:.1f}"


def _listed(row: dict[str, Any] | None) -> str:
    return "—" if row is None or "entries" not in row else str(row["entries"])


def _table(result: dict[str, Any]) -> list[str]:
    lines = []
    for size in result["sizes"]:
        m = size["mindory"]
        c = size.get("calibre") or {}
        n = m["books"]
        calib = "requests" in c
        lines.append("")
        lines.append(
            f"N = {n:,}: mindory import {m['import_s']} s ({m['imported']} books"
            + (f", {m['import_failures']} failed" if m["import_failures"] else "")
            + (f"; {m['import_stopped']}" if m.get("import_stopped") else "")
            + ")"
            + (f"; calibredb add {c['import_s']} s ({c.get('imported')} books)" if calib else "")
        )
        lines.append(
            f"| request (N = {n:,}) | mindory p50 / p95 ms | calibre p50 / p95 ms "
            f"| books listed: mindory / calibre | mindory p50 ≤ {TARGET_MS:.0f} ms |"
        )
        lines.append("|---|---:|---:|---:|---|")
        for name, row in m.get("requests", {}).items():
            peer = c.get("requests", {}).get(name) if calib else None
            ok = "" if "error" in row else ("yes" if row["p50_ms"] <= TARGET_MS else "**no**")
            listed = f"{_listed(row)} / {_listed(peer)}"
            lines.append(f"| {name} | {_cell(row)} | {_cell(peer)} | {listed} | {ok} |")
        if c and not calib:
            lines.append(f"calibre: skipped: {c.get('skipped')}")
        for who, part in (("mindory", m), ("calibre", c)):
            for name, row in part.get("requests", {}).items():
                if "error" in row:
                    lines.append(f"  {who} {name}: {row['error']}")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000,10000", help="Library sizes, comma-separated.")
    ap.add_argument("--requests", type=int, default=30, help="Timed requests per URL (≥ 30).")
    ap.add_argument("--no-calibre", action="store_true", help="Skip calibre's server.")
    ap.add_argument(
        "--import-budget", type=float, default=780.0,
        help="Seconds mindory may import one size for; past it the import stops and the "
        "library is measured with the books imported so far (stated in the table).",
    )  # fmt: skip
    ap.add_argument("--keep", type=Path, help="Work here and keep the books and libraries.")
    ap.add_argument("--json", type=Path, help="Write the figures here too.")
    args = ap.parse_args()
    sizes = [int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()]
    if not sizes or min(sizes) < PAGE + 1 or args.requests < 1:
        ap.error(f"--sizes: each more than {PAGE}; --requests ≥ 1")
    os.environ["MINDORY_EMBEDDER"] = "hashed"
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
    top = args.keep or Path(tempfile.mkdtemp(prefix="mindory-catalogue-"))

    def log(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    load = os.getloadavg()
    result: dict[str, Any] = {
        "requests_per_url": args.requests,
        "cpus": os.cpu_count(),
        "load_before": [round(x, 2) for x in load],
        "python": sys.version.split()[0],
        "sizes": [],
    }
    calibre_done = args.no_calibre
    try:
        for n in sizes:
            work = top / f"n{n}"
            if work.exists():
                shutil.rmtree(work)
            work.mkdir(parents=True)
            t = time.perf_counter()
            books = write_books(work / "books", n)
            log(f"wrote {n} EPUB files in {time.perf_counter() - t:.1f} s")
            size: dict[str, Any] = {"n": n}
            size["mindory"] = run_mindory(books, work, args.requests, log, args.import_budget)
            if not calibre_done and n <= CALIBRE_MAX_BOOKS:
                calibre_done = True
                try:
                    size["calibre"] = run_calibre(books, work / "books", work, args.requests, log)
                except (OSError, subprocess.SubprocessError, RuntimeError) as exc:
                    size["calibre"] = {"skipped": f"{type(exc).__name__}: {exc}"}
                if "skipped" in size["calibre"]:
                    log(f"calibre skipped: {size['calibre']['skipped']}")
            elif args.no_calibre:
                size["calibre"] = {"skipped": "--no-calibre"}
            result["sizes"].append(size)
            for line in _table({"sizes": [size]}):
                log(line)  # as soon as measured (the full report is printed at the end)
            if args.json:  # so far, in case a later size is stopped
                args.json.parent.mkdir(parents=True, exist_ok=True)
                args.json.write_text(json.dumps(result, indent=2, ensure_ascii=False, default=str))
            if not args.keep:
                shutil.rmtree(work, ignore_errors=True)
    finally:
        if not args.keep:
            shutil.rmtree(top, ignore_errors=True)
    result["load_after"] = [round(x, 2) for x in os.getloadavg()]
    print(
        f"{result['cpus']} CPUs, load average before {result['load_before'][0]}, "
        f"after {result['load_after'][0]}; {args.requests} timed requests per URL after "
        f"{WARMUP} warm-up; p50 / p95 in ms"
    )
    for line in _table(result):
        print(line)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2, ensure_ascii=False, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
