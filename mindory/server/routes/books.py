"""Routes over books: health, the list, upload, one book, its file and EPUB resources,
and imports from the library folder."""

import shutil
import tempfile
import zipfile
from pathlib import Path
from typing import Annotated, Any

from fastapi import (
    APIRouter,
    File,
    Form,
    Query,
    Request,
    Response,
    UploadFile,
)
from fastapi import Path as PathParam

from mindory.errors import LimitError
from mindory.server.guard import RESOURCE_CSP, VERSION, HTTPError, MiB
from mindory.server.params import (
    BookRef,
    ServerContext,
    Strategy,
    chunk_settings,
    content_disposition,
    file_type,
    not_modified,
    safe_file_name,
)
from mindory.server.routes.readium import CORS_HEADERS
from mindory.server.shapes import BookDetailOut, BookOut, HealthOut, JobOut

# --------------------------------------------------------------------------- uploads
# What cannot be a book is refused before anything is queued (415): the first bytes
# decide first (a PDF renamed .txt is still a PDF), then the name. Anything else is
# offered to the importer as plain text, which still refuses binary data itself.

ACCEPTED = ["application/epub+zip", "text/plain"]
_ACCEPTED_TEXT = "mindory imports EPUB (.epub) and plain text (.txt) books"
_EPUB_MIMETYPE = b"application/epub+zip"

# (offset, magic bytes, what the file is)
_SIGNATURES: tuple[tuple[int, bytes, str], ...] = (
    (0, b"%PDF-", "a PDF document"),
    (0, b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (0, b"\xff\xd8\xff", "a JPEG image"),
    (0, b"GIF87a", "a GIF image"),
    (0, b"GIF89a", "a GIF image"),
    (0, b"II*\x00", "a TIFF image"),
    (0, b"MM\x00*", "a TIFF image"),
    (0, b"\x7fELF", "an executable (ELF)"),
    (0, b"\xfe\xed\xfa\xce", "an executable (Mach-O)"),
    (0, b"\xfe\xed\xfa\xcf", "an executable (Mach-O)"),
    (0, b"\xce\xfa\xed\xfe", "an executable (Mach-O)"),
    (0, b"\xcf\xfa\xed\xfe", "an executable (Mach-O)"),
    (0, b"\xca\xfe\xba\xbe", "an executable (Mach-O or Java class)"),
    (0, b"\x00asm", "an executable (WebAssembly)"),
    (0, b"\x1f\x8b", "a gzip archive"),
    (0, b"\xfd7zXZ\x00", "an xz archive"),
    (0, b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive"),
    (0, b"Rar!\x1a\x07", "a RAR archive"),
    (0, b"\x28\xb5\x2f\xfd", "a zstd archive"),
    (257, b"ustar", "a tar archive"),
    (0, b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "an Office document (OLE)"),
    (0, b"{\\rtf", "an RTF document"),
    (60, b"BOOKMOBI", "a Kindle (Mobipocket) book"),
    (60, b"TEXtREAd", "a PalmDOC book"),
    (0, b"AT&TFORM", "a DjVu document"),
    (0, b"SQLite format 3\x00", "a SQLite database"),
    (0, b"OggS", "an Ogg audio or video file"),
    (0, b"fLaC", "a FLAC audio file"),
)

# Names that say "not a book mindory reads" even when the bytes do not (a truncated
# file, a format without a signature).
# fmt: off
_REFUSED_SUFFIXES = frozenset(
    {
        ".pdf", ".mobi", ".azw", ".azw3", ".azw4", ".kfx", ".prc", ".pdb", ".lit", ".fb2",
        ".djvu", ".djv", ".cbz", ".cbr", ".cb7", ".doc", ".docx", ".odt", ".rtf", ".pages",
        ".xls", ".xlsx", ".ods", ".ppt", ".pptx", ".odp", ".key", ".numbers", ".png", ".jpg",
        ".jpeg", ".gif", ".webp", ".bmp", ".tif", ".tiff", ".heic", ".heif", ".avif", ".svg",
        ".ico", ".mp3", ".m4a", ".m4b", ".aac", ".flac", ".ogg", ".opus", ".wav", ".mp4",
        ".m4v", ".mkv", ".avi", ".mov", ".webm", ".zip", ".gz", ".tgz", ".bz2", ".xz",
        ".7z", ".rar", ".tar", ".zst", ".exe", ".dll", ".so", ".dylib", ".msi", ".apk",
        ".dmg", ".iso", ".deb", ".rpm", ".jar", ".class", ".wasm", ".bin",
    }
)
# fmt: on


def _signature(head: bytes) -> str | None:
    """What the first bytes say the file is, when that is something no book is."""
    for offset, magic, what in _SIGNATURES:
        if head[offset : offset + len(magic)] == magic:
            return what
    if head.startswith(b"MZ") and b"\x00" in head[2:64]:  # text may start with "MZ"
        return "an executable (Windows)"
    if head[:1] == b"\x00" and head[4:8] == b"ftyp":  # ISO media: a box size, then ftyp
        return "an MP4 or HEIF media file"
    if head.startswith(b"RIFF") and head[8:12] in (b"WEBP", b"WAVE", b"AVI "):
        return "a RIFF media file (WebP, WAV or AVI)"
    if head.startswith(b"ID3") and head[3:4] in (b"\x02", b"\x03", b"\x04"):
        return "an MP3 audio file"
    return None


def _zip_refusal(path: Path, head: bytes) -> str | None:
    """Why a ZIP archive is not an EPUB, or None when it is one (or is too broken to
    tell: the importer then says what is wrong with it)."""
    if head[30:38] == b"mimetype" and head[38:58] == _EPUB_MIMETYPE:
        return None  # the OCF way: an uncompressed mimetype entry first
    try:
        with zipfile.ZipFile(path) as z:
            names = set(z.namelist())
            if "mimetype" in names:
                mimetype = z.read("mimetype")[:200].strip()
                if mimetype == _EPUB_MIMETYPE:
                    return None
                shown = mimetype.decode("ascii", "replace")
                return f"a ZIP archive of {shown}, not an EPUB"
    except (zipfile.BadZipFile, OSError, ValueError, NotImplementedError):
        return None
    if "META-INF/container.xml" in names:
        return None  # an EPUB without its mimetype entry: the importer copes
    return "a ZIP archive that is not an EPUB (no mimetype application/epub+zip)"


def upload_refusal(path: Path, name: str) -> str | None:
    """What the uploaded file is, when it cannot be a book mindory imports (None: it
    may be one; the importer decides)."""
    with path.open("rb") as fh:
        head = fh.read(4096)
    suffix = Path(name).suffix.lower()
    found = _signature(head)
    if found is not None:
        return found
    if head.startswith(b"PK\x03\x04"):
        return _zip_refusal(path, head)
    if suffix == ".epub":
        return "named .epub but not a ZIP archive (an EPUB is one)"
    if suffix in _REFUSED_SUFFIXES:
        return f"a {suffix} file"
    return None


def add_routes(api: APIRouter, ctx: ServerContext) -> None:
    """Add these routes to ``api`` (the order of registration is the order of matching)."""
    lib, jobs, token, folder = ctx.lib, ctx.jobs, ctx.token, ctx.folder
    uploads, max_upload_bytes = ctx.uploads, ctx.max_upload_bytes

    # ------------------------------------------------------------------ health

    @api.get("/health", response_model=HealthOut, tags=["server"])
    def health() -> dict[str, Any]:
        """Liveness and a few facts (also checks the database answers)."""
        return {
            "status": "ok",
            "version": VERSION,
            "books": len(lib.books()),
            "jobs_active": jobs.active(),
            "auth": token is not None,
            "max_upload_bytes": max_upload_bytes,
            "library_folder": folder is not None,
        }

    # ------------------------------------------------------------------ books

    @api.get(
        "/books", response_model=list[BookOut], response_model_exclude_unset=True, tags=["books"]
    )
    def list_books() -> list[dict[str, Any]]:
        """Every book, by title (`mindory books --json`)."""
        return [b.to_json() for b in lib.books()]

    @api.post(
        "/books",
        status_code=202,
        response_model=JobOut,
        tags=["books"],
        openapi_extra={"x-max-upload-bytes": max_upload_bytes},
        responses={415: {"description": "Not an EPUB or a plain-text file (nothing queued)."}},
    )
    def upload_book(
        response: Response,
        file: Annotated[UploadFile, File(description="An .epub or a plain-text file.")],
        size: Annotated[int, Query(ge=20, le=100_000, description="Window size.")] = 800,
        overlap: Annotated[int, Query(ge=0, le=50_000)] = 100,
        min_size: Annotated[int, Query(ge=0, le=100_000, description="Shortest tail.")] = 50,
        nfkc: Annotated[bool, Query(description="Normalize with NFKC, not NFC.")] = False,
        strategy: Annotated[
            Strategy, Query(description="How to cut chunks (docs/chunking.md).")
        ] = "window",
        parent_size: Annotated[
            int, Query(ge=20, le=100_000, description="parent-child: the parents' size.")
        ] = 1600,
        embed: Annotated[
            bool,
            Query(
                description="Embed the new chunks with the library's current embedding as "
                "part of the job (false: lexical only until `mindory embed`)."
            ),
        ] = True,
        replaces: Annotated[
            str | None,
            Form(
                min_length=1,
                max_length=512,
                description="A book (ref) this file is a new edition of: every highlight "
                "of that book is re-anchored onto the new one (the job's result reports "
                "each under `reanchored`).",
            ),
        ] = None,
    ) -> dict[str, Any]:
        """Upload a book and import it in the background.

        Returns 202 and the job (`Location: /jobs/{id}`); follow it with
        `GET /jobs/{id}` or `GET /jobs/{id}/events`. What cannot be a book
        (a PDF, an image, an executable, a ZIP that is not an EPUB, a `.epub`
        that is not a ZIP, a `.mobi`...) is refused at once with 415, naming the
        accepted formats; nothing is queued. A file the importer refuses ends
        the job `failed`, naming the file; nothing is written then.
        """
        settings = chunk_settings(size, overlap, min_size, nfkc, strategy, parent_size)
        old = lib.book(replaces).id if replaces is not None else None
        name = safe_file_name(file.filename)
        if uploads is not None:
            uploads.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix="mindory-upload-", dir=uploads))
        try:
            dest = tmp / name
            written = 0
            with dest.open("wb") as out:
                while block := file.file.read(1 * MiB):
                    written += len(block)
                    if written > max_upload_bytes:
                        raise LimitError(
                            f"the upload is over the limit of {max_upload_bytes:,} bytes",
                            path=name,
                        )
                    out.write(block)
            refused = upload_refusal(dest, name)
            if refused is not None:
                raise HTTPError(
                    415,
                    f"{name}: {refused}; {_ACCEPTED_TEXT}",
                    {
                        "kind": "UnsupportedMediaType",
                        "file": name,
                        "found": refused,
                        "accepted": ACCEPTED,
                        "extensions": [".epub", ".txt"],
                    },
                )
            job = jobs.submit(
                dest,
                file_name=name,
                kind="upload",
                settings=settings,
                copy=True,
                cleanup=tmp,
                replaces=old,
                embed=embed,
            )
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        response.headers["Location"] = f"/jobs/{job['id']}"
        return job

    @api.get(
        "/books/{book}",
        response_model=BookDetailOut,
        response_model_exclude_unset=True,
        tags=["books"],
    )
    def get_book(book: BookRef) -> dict[str, Any]:
        """Metadata, sections and the nested table of contents with jump positions
        (`mindory show BOOK --toc --json`)."""
        info = lib.book(book)
        sections = lib.sections(info.id)
        toc = lib.toc(info.id)
        return {
            **info.to_json(),
            "sections": [s.to_json() for s in sections],
            "toc": [n.to_json() for n in toc],
        }

    @api.delete(
        "/books/{book}", response_model=BookOut, response_model_exclude_unset=True, tags=["books"]
    )
    def delete_book(book: BookRef) -> dict[str, Any]:
        """Delete a book and everything derived from it; returns what was deleted."""
        info = lib.delete_book(book)
        return info.to_json()

    @api.get(
        "/books/{book}/file",
        tags=["books"],
        response_class=Response,
        responses={
            200: {
                "description": "The original file's bytes.",
                "content": {
                    "application/epub+zip": {"schema": {"type": "string", "format": "binary"}},
                    "text/plain": {"schema": {"type": "string", "format": "binary"}},
                },
            },
            304: {"description": "Not modified (If-None-Match)."},
        },
    )
    def book_file(book: BookRef, request: Request) -> Response:
        """The original file, byte for byte (EPUB, or the text in its own encoding)."""
        info = lib.book(book)
        etag = f'"{info.id}"'
        # readable from any origin: a Readium manifest's reading order (routes/readium.py)
        headers = {"ETag": etag, "Cache-Control": "private, no-cache", **CORS_HEADERS}
        if not_modified(request, etag):
            return Response(status_code=304, headers=headers)
        data = lib.book_file(info.id)
        headers["Content-Disposition"] = content_disposition(info.file_name)
        return Response(data, media_type=file_type(info.format, info.encoding), headers=headers)

    @api.get(
        "/books/{book}/resources/{href:path}",
        tags=["books"],
        response_class=Response,
        responses={
            200: {
                "description": "The member's bytes, with its manifest media type.",
                "content": {"*/*": {"schema": {"type": "string", "format": "binary"}}},
            },
            304: {"description": "Not modified (If-None-Match)."},
        },
    )
    def book_resource(
        book: BookRef,
        href: Annotated[str, PathParam(description="ZIP path inside the EPUB.")],
        request: Request,
    ) -> Response:
        """Any file inside an EPUB by its ZIP path (XHTML, CSS, images, fonts).

        Paths that would leave the book (`..`, absolute, backslashes) are 400;
        names not in the archive are 404. Served with a sandboxing CSP.
        """
        found = lib.resource(book, href)
        data, media_type, etag = found.data, found.media_type, found.etag
        headers = {
            "ETag": etag,
            "Cache-Control": "private, no-cache",
            "Content-Security-Policy": RESOURCE_CSP,
            **CORS_HEADERS,  # readable from any origin: a Readium manifest links it
        }
        if not_modified(request, etag):
            return Response(status_code=304, headers=headers)
        return Response(data, media_type=media_type, headers=headers)
