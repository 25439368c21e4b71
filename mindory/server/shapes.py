"""The JSON shapes of the HTTP API, declared for the OpenAPI document. They allow extra
keys: the library's ``to_json()`` is what is sent; a field it adds is passed through."""

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from mindory.reading.highlights import MAX_NOTE_CHARS, MAX_QUOTE_CHARS
from mindory.server.guard import MAX_JSON_BODY_BYTES

# --------------------------------------------------------------------------- shapes


class _Shape(BaseModel):
    """A declared JSON shape: extra keys pass through, absent optional keys stay absent."""

    model_config = ConfigDict(extra="allow")


class ErrorOut(_Shape):
    error: str = Field(description="One line: what went wrong, naming the file or request.")
    detail: Any = Field(default=None, description="Machine-readable particulars (kind, ...).")


class DerivationOut(_Shape):
    fingerprint: str
    current: bool
    chunk_count: int
    settings: dict[str, Any]
    created_at: str | None


class BookOut(_Shape):
    id: str = Field(description="SHA-256 of the file's bytes.")
    title: str
    format: str = Field(description='"epub" or "txt".')
    file_name: str
    file_size: int
    encoding: str | None
    lossy: bool
    bad_bytes: int
    first_bad_byte: int | None
    creators: list[str]
    language: str | None
    identifiers: list[str]
    section_count: int
    toc_count: int
    chunk_count: int
    fingerprint: str | None
    stored: str
    imported_at: str | None
    warnings: list[str]
    derivations: list[DerivationOut]


class SectionOut(_Shape):
    ordinal: int
    title: str
    href: str | None
    media_type: str
    parser: str
    linear: bool
    source_start: int
    source_end: int
    utf16_start: int
    normalized_length: int
    block_count: int
    chunk_count: int


class TocNodeOut(_Shape):
    title: str
    href: str
    section: int | None = Field(description="Section ordinal the entry jumps to (None: outside).")
    source_offset: int | None = Field(description="Source position (code points) of the target.")
    children: list["TocNodeOut"]


class BookDetailOut(BookOut):
    sections: list[SectionOut]
    toc: list[TocNodeOut]


class OffsetMapOut(_Shape):
    v: int
    n: int = Field(description="Normalized length.")
    s: int = Field(description="Source length.")
    e: list[int] = Field(description="Edit runs, flat: [a, n, b, m, ...].")


class SectionDetailOut(SectionOut):
    book: str
    source_text: str
    normalized_text: str
    offset_map: OffsetMapOut


class BlockOut(_Shape):
    index: int
    kind: str
    level: int | None
    start: int
    end: int
    source_start: int
    source_end: int
    text: str


class BlockPageOut(_Shape):
    book: str
    section: int
    page: int
    page_size: int
    pages: int
    total: int
    blocks: list[BlockOut]


class ChunkOut(_Shape):
    id: str
    section: int
    index: int
    start: int
    end: int
    source_start: int
    source_end: int
    utf16_start: int
    utf16_end: int
    byte_start: int | None = Field(default=None, description="Plain text only.")
    byte_end: int | None = Field(default=None, description="Plain text only.")
    cfi: str | None = Field(default=None, description="EPUB only: the specification's range CFI.")
    cfi_epubjs: str | None = Field(default=None, description="EPUB only: the same for epub.js.")
    context_start: int | None = None
    context_end: int | None = None
    text: str


class ChunkPageOut(_Shape):
    book: str
    fingerprint: str | None
    chunks: list[ChunkOut]


class ImportResultOut(_Shape):
    path: str
    status: str
    book: str
    title: str
    format: str
    fingerprint: str
    sections: int
    chunks: int
    blocks: int
    toc_entries: int
    made_current: bool
    warnings: list[str]
    timings: dict[str, float]
    embedded: int = Field(
        default=0, description="Vectors made for the new chunks in the current embedding."
    )
    embedding: str | None = Field(
        default=None, description="That embedding's fingerprint; null: not embedded."
    )


class JobOut(_Shape):
    id: str
    kind: str = Field(description='"upload" or "folder".')
    state: str = Field(description="queued, running, succeeded or failed.")
    file_name: str
    phase: str | None
    done: int
    total: int
    progress: float
    fingerprint: str
    embed: bool = Field(default=True, description="Whether the job embeds the new chunks.")
    attempts: int = Field(
        default=0, description="How often a worker has claimed the job (a retry counts)."
    )
    created_at: str
    started_at: str | None
    finished_at: str | None
    result: ImportResultOut | None
    error: ErrorOut | None


class HealthOut(_Shape):
    status: str
    version: str
    books: int
    jobs_active: int
    auth: bool
    max_upload_bytes: int
    library_folder: bool


class FolderListingOut(_Shape):
    folder: str
    files: list[str]
    truncated: bool


class FolderImportIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    replaces: str | None = Field(
        default=None,
        min_length=1,
        max_length=512,
        description="A book this file is a new edition of: its highlights are re-anchored.",
    )
    path: str = Field(min_length=1, max_length=4096, description="Relative to the library folder.")
    size: int = Field(default=800, ge=20, le=100_000)
    overlap: int = Field(default=100, ge=0, le=50_000)
    min_size: int = Field(default=50, ge=0, le=100_000)
    nfkc: bool = False
    strategy: Literal["window", "paragraph", "structured", "parent-child", "dialogue"] = "window"
    parent_size: int = Field(default=1600, ge=20, le=100_000)
    copy_file: bool = Field(
        default=True, alias="copy", description="Store the bytes (true) or only the path."
    )
    embed: bool = Field(
        default=True,
        description="Embed the new chunks with the library's current embedding (the job's "
        "last phase); false: lexical only until `mindory embed`.",
    )


class LocatorOut(_Shape):
    """A Readium-style Locator with W3C selectors (docs/coordinates.md, DESIGN §4)."""

    href: str
    type: str
    title: str
    locations: dict[str, Any] = Field(
        description="progression, totalProgression, position; EPUB: partialCfi, cfi, "
        'cfi_epubjs; plain text: fragments (["char=start,end"]).'
    )
    text: dict[str, str] = Field(
        description="before / highlight / after: raw source text (Readium: DOM text, ruby "
        "annotations inline). Search hits add display / displayBefore / displayAfter: the "
        "same text as a reader sees it, without ruby annotations (<rt>, <rp>)."
    )
    source: dict[str, int] = Field(
        description="start, end (code points), utf16Start, utf16End (UTF-16 units); "
        "plain text: byteStart, byteEnd."
    )
    normalized: dict[str, int]
    section: int
    blocks: dict[str, int] | None
    selectors: list[dict[str, Any]]


class HitOut(_Shape):
    rank: int
    score: float
    scores: dict[str, Any]
    chunk: str
    book: dict[str, str]
    section: dict[str, Any]
    locator: LocatorOut
    matches: list[dict[str, Any]]


class SearchOut(_Shape):
    query: str
    mode: str
    k: int
    filters: dict[str, Any]
    terms: dict[str, Any]
    embedding: dict[str, Any] | None
    hits: list[HitOut]
    warnings: list[str]
    timings: dict[str, float]


class LocateChunkOut(_Shape):
    """A chunk of the place's section (without its text)."""

    id: str
    section: int
    index: int
    source_start: int
    source_end: int
    utf16_start: int
    utf16_end: int


class LocateOut(_Shape):
    """A position → where it is: section, block, page, and the chunks containing it."""

    book: str
    bookTitle: str  # noqa: N815 - the JSON key
    href: str
    type: str
    title: str
    section: int
    locations: dict[str, Any]
    source: dict[str, int] = Field(description="position (code points), utf16Position, ...")
    normalized: dict[str, int]
    block: int | None
    page: int | None
    pageSize: int  # noqa: N815 - the JSON key
    rangeEnd: int | None = Field(  # noqa: N815 - the JSON key
        default=None, description="A range CFI: where the range ends (source code points)."
    )
    chunks: list[LocateChunkOut]


class AnchorIn(BaseModel):
    """A quote to calibrate, and where the assistant read it."""

    model_config = ConfigDict(extra="forbid", strict=True)

    quote: str = Field(min_length=1, max_length=MAX_QUOTE_CHARS)
    section: int | None = Field(
        default=None, ge=0, le=1_000_000, description="Search this section."
    )
    chunk: str | None = Field(
        default=None,
        min_length=1,
        max_length=64,
        description="The chunk the quote came from (id or unique prefix): searched first, "
        "then its section.",
    )
    min_prefix: int | None = Field(
        default=None,
        ge=1,
        le=MAX_QUOTE_CHARS,
        description="Shortest prefix (folded code points) that counts; default 16, 5 for CJK.",
    )


class CalibrationOut(_Shape):
    book: str
    method: str = Field(description="exact, normalized, prefix or rejected.")
    quote: str = Field(description="The raw quote, as sent.")
    exact: str | None = Field(description="The source text found (a slice of the book).")
    section: int | None
    source: dict[str, int] | None
    quoteLength: int  # noqa: N815 - the JSON key
    matchedLength: int  # noqa: N815 - the JSON key
    caseInsensitive: bool  # noqa: N815 - the JSON key
    occurrences: int
    note: str
    scope: dict[str, Any]
    minPrefix: int  # noqa: N815 - the JSON key
    locator: LocatorOut | None


class AnnotationOut(_Shape):
    """A highlight as a W3C Web Annotation, plus mindory's fields."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    context: str = Field(alias="@context")
    type: str
    id: str = Field(description="urn:uuid:…; the routes take it or the bare UUID.")
    motivation: str
    created: str
    modified: str
    body: list[dict[str, Any]]
    target: dict[str, Any]
    book: str
    section: int | None
    status: str = Field(description="anchored or orphaned.")
    source: dict[str, int] | None
    note: str | None
    color: str
    reanchored: dict[str, Any] | None


class HighlightIn(BaseModel):
    """Where to highlight: a section and a span, a range CFI, or a Locator."""

    model_config = ConfigDict(extra="forbid", strict=True)

    section: int | None = Field(default=None, ge=0, le=1_000_000)
    start: int | None = Field(
        default=None,
        ge=0,
        le=10**12,
        description="Book source coordinates (as chunks' source_start / utf16_start).",
    )
    end: int | None = Field(default=None, ge=0, le=10**12)
    unit: Literal["codepoint", "utf16"] = "codepoint"
    cfi: str | None = Field(default=None, min_length=1, max_length=8192)
    locator: dict[str, Any] | None = Field(
        default=None, description="A Locator (section, source.start/end; text.highlight checked)."
    )
    exact: str | None = Field(
        default=None, max_length=MAX_JSON_BODY_BYTES, description="Must equal the text there."
    )
    note: str | None = Field(default=None, max_length=MAX_NOTE_CHARS)
    color: str | None = Field(default=None, min_length=1, max_length=32)


class HighlightPatch(BaseModel):
    """Fields to change; absent fields stay, a null note removes the note."""

    model_config = ConfigDict(extra="forbid", strict=True)

    note: str | None = Field(default=None, max_length=MAX_NOTE_CHARS)
    color: str | None = Field(default=None, min_length=1, max_length=32)


class PlaceFields(BaseModel):
    """A place in a book, one way (docs/reading-state.md): a `cfi`; or `section` +
    `offset` (book source coordinates in `unit`); or `progression` (0–1) with `section`
    or `href`; or `totalProgression` (0–1); or a Readium `position` (from 1); or a whole
    `locator` (Readium's, or one mindory returned: its `section` + `source.start`, else
    `locations.cfi`, else `locations.progression`, else `locations.position`, else
    `locations.totalProgression`)."""

    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=True)

    cfi: str | None = Field(default=None, min_length=1, max_length=8192)
    section: int | None = Field(default=None, ge=0, le=1_000_000)
    offset: int | None = Field(
        default=None,
        ge=0,
        le=10**12,
        description="Book source coordinates (plain text: from the file's start).",
    )
    unit: Literal["codepoint", "utf16"] = "codepoint"
    progression: float | None = Field(default=None, ge=0.0, le=1.0)
    total_progression: float | None = Field(default=None, ge=0.0, le=1.0, alias="totalProgression")
    href: str | None = Field(default=None, min_length=1, max_length=4096)
    position: int | None = Field(
        default=None, ge=1, le=10**9, description="A Readium position (GET …/positions)."
    )
    locator: dict[str, Any] | None = None

    def place_json(self) -> dict[str, Any]:
        """The place as :meth:`mindory.reading.positions.PlaceIn.from_json` reads it."""
        flat = {
            "cfi": self.cfi,
            "section": self.section,
            "offset": self.offset,
            "progression": self.progression,
            "totalProgression": self.total_progression,
            "href": self.href,
            "position": self.position,
        }
        given = {k: v for k, v in flat.items() if v is not None}
        if self.locator is not None:
            if given:
                raise ValueError("give a locator or the place's fields, not both")
            return self.locator
        return {**given, "unit": self.unit}


class PositionIn(PlaceFields):
    """A reading position: the place, the device, and the client's time."""

    device: str = Field(min_length=1, max_length=128, description="Which device read there.")
    modified: str = Field(
        min_length=1, max_length=64, description="The client's ISO 8601 time of this position."
    )


class BookmarkIn(PlaceFields):
    title: str | None = Field(default=None, max_length=500)


class KeptPlaceOut(_Shape):
    id: str
    book: str
    status: str = Field(description='"anchored", or "orphaned" by a new edition.')
    locator: dict[str, Any] | None = Field(description="The full Locator (null: orphaned).")
    quote: dict[str, str] = Field(description="exact / prefix / suffix: the text kept there.")
    reanchored: dict[str, Any] | None


class PositionOut(KeptPlaceOut):
    device: str
    modified: str
    received: str


class BookmarkOut(KeptPlaceOut):
    title: str | None
    created: str


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorOut, "description": "Bad request (a MindoryError)."},
    401: {"model": ErrorOut, "description": "Missing or wrong bearer token."},
    403: {"model": ErrorOut, "description": "Refused (cross-origin write, no library folder)."},
    404: {"model": ErrorOut, "description": "No such book, section, resource or job."},
    409: {"model": ErrorOut, "description": "An older reading position (detail.current)."},
    413: {"model": ErrorOut, "description": "Over a stated limit."},
    422: {"model": ErrorOut, "description": "Invalid parameters, or a book file mindory refuses."},
    503: {"model": ErrorOut, "description": "The database is busy or unreachable."},
}


# Error responses of a route whose success is not JSON (server-sent events): FastAPI
# would document its errors with the success media type; they are JSON.
JSON_ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {
        "description": spec["description"],
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorOut"}}},
    }
    for status, spec in ERROR_RESPONSES.items()
}
