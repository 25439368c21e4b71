"""What re-anchoring reads and answers: :class:`StoredAnchor` and :class:`Reanchor`.

A stored anchor is a highlight as the old edition knew it (source span + W3C
TextQuoteSelector); a :class:`Reanchor` says where it went in the new edition,
how, and how sure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from mindory.reading.anchoring.sections import SectionText
from mindory.reading.anchoring.thresholds import CONTEXT_CHARS

ReanchorStatus = Literal["position", "exact", "normalized", "fuzzy", "orphaned"]


@dataclass(frozen=True, slots=True)
class StoredAnchor:
    """A highlight as stored: source span + W3C TextQuoteSelector, in the OLD edition.

    ``source_start`` / ``source_end`` are book source coordinates of the old
    edition (file-global for plain text, section-local for EPUB); ``section``
    is the old section's ordinal and ``href`` its content document (EPUB).
    """

    section: int
    source_start: int
    source_end: int
    exact: str
    prefix: str = ""
    suffix: str = ""
    href: str | None = None
    id: str | None = None

    def __post_init__(self) -> None:
        if not self.exact:
            raise ValueError("a stored anchor needs a non-empty exact quote")
        if self.source_end - self.source_start != len(self.exact):
            raise ValueError(
                f"source span [{self.source_start}, {self.source_end}) does not hold the "
                f"{len(self.exact)} characters of the exact quote"
            )

    @classmethod
    def from_span(
        cls, section: SectionText, source_start: int, source_end: int, *, id: str | None = None
    ) -> StoredAnchor:
        """The anchor of source ``[source_start, source_end)`` (book coordinates) of ``section``."""
        a, b = source_start - section.source_start, source_end - section.source_start
        text = section.source_text
        if not 0 <= a < b <= len(text):
            raise ValueError(
                f"span [{source_start}, {source_end}) is empty or outside section "
                f"{section.ordinal} [{section.source_start}, {section.source_end})"
            )
        return cls(
            section=section.ordinal,
            source_start=source_start,
            source_end=source_end,
            exact=text[a:b],
            prefix=text[max(0, a - CONTEXT_CHARS) : a],
            suffix=text[b : b + CONTEXT_CHARS],
            href=section.href,
            id=id,
        )

    @classmethod
    def from_selectors(
        cls,
        selectors: Iterable[Mapping[str, Any]],
        *,
        section: int,
        href: str | None = None,
        id: str | None = None,
    ) -> StoredAnchor:
        """From W3C selectors: a TextQuoteSelector and a TextPositionSelector."""
        quote: Mapping[str, Any] | None = None
        position: Mapping[str, Any] | None = None
        for sel in selectors:
            if sel.get("type") == "TextQuoteSelector":
                quote = sel
            elif sel.get("type") == "TextPositionSelector":
                position = sel
        if quote is None or position is None:
            raise ValueError("need a TextQuoteSelector and a TextPositionSelector")
        return cls(
            section=section,
            source_start=int(position["start"]),
            source_end=int(position["end"]),
            exact=str(quote["exact"]),
            prefix=str(quote.get("prefix", "")),
            suffix=str(quote.get("suffix", "")),
            href=href,
            id=id,
        )

    def selectors(self) -> list[dict[str, str | int]]:
        return [
            {
                "type": "TextQuoteSelector",
                "exact": self.exact,
                "prefix": self.prefix,
                "suffix": self.suffix,
            },
            {"type": "TextPositionSelector", "start": self.source_start, "end": self.source_end},
        ]


@dataclass(frozen=True, slots=True)
class Reanchor:
    """Where a highlight went in the new edition, how, and how sure.

    ``status``: ``position`` | ``exact`` | ``normalized`` | ``fuzzy`` |
    ``orphaned``. For a placed highlight ``section`` / ``href`` name the new
    section, ``source_start`` / ``source_end`` are new book source coordinates
    and ``exact`` / ``prefix`` / ``suffix`` the new TextQuoteSelector (``exact``
    is always the new source text there). ``confidence`` (0–1) is the weighted
    share of the stored selector (prefix + exact + suffix) found again —
    literally for position/exact, after folding for normalized, by edit
    distance for fuzzy; for an orphan, the best score a rejected candidate
    reached. ``edits`` is the edit distance between old and new quote (folded
    text) for fuzzy matches, ``changed`` says whether the quote text differs.
    """

    status: ReanchorStatus
    anchor: StoredAnchor
    section: int | None
    href: str | None
    source_start: int | None
    source_end: int | None
    exact: str | None
    prefix: str | None
    suffix: str | None
    confidence: float
    changed: bool
    edits: int | None
    note: str

    @property
    def placed(self) -> bool:
        return self.status != "orphaned"

    def to_json(self) -> dict[str, Any]:
        a = self.anchor
        return {
            "id": a.id,
            "status": self.status,
            "confidence": round(self.confidence, 4),
            "section": self.section,
            "href": self.href,
            "source": (
                None
                if self.source_start is None
                else {"start": self.source_start, "end": self.source_end}
            ),
            "selector": (
                None
                if self.exact is None
                else {
                    "type": "TextQuoteSelector",
                    "exact": self.exact,
                    "prefix": self.prefix,
                    "suffix": self.suffix,
                }
            ),
            "changed": self.changed,
            "edits": self.edits,
            "old": {
                "section": a.section,
                "href": a.href,
                "source": {"start": a.source_start, "end": a.source_end},
                "exact": a.exact,
            },
            "note": self.note,
        }
