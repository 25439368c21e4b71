"""Ranking that knows a book's structure: apparatus after the body, duplicates once."""

from __future__ import annotations

from mindory.search.structure import Candidate, apparatus_kind, arrange

CONTENTS = "\n".join(
    ["CONTENTS", "Chapter I. The Awakening", "Chapter II. A Market by the Way",
     "Chapter III. The Guest House", "Chapter IV. The Museum", "Chapter V. Children"]
)  # fmt: skip
LICENCE = (
    "*** END OF THE PROJECT GUTENBERG EBOOK NEWS FROM NOWHERE ***\nUpdated editions will "
    "replace the previous one. Creating the works from print editions not protected by U.S. "
    "copyright law means that no one owns a United States copyright in these works, so the "
    "Foundation can copy and distribute it without permission and without paying royalties."
)
BODY = "Chapter I. I went to bed and dreamed that the river was clear and the houses were gone."


def test_apparatus_is_recognised() -> None:
    assert apparatus_kind(CONTENTS) == "contents"
    assert apparatus_kind("第一回\n第二回 張天師祈禳瘟疫\n第三回\n第四回\n第五回", "") == "contents"
    assert apparatus_kind("whatever", "目錄") == "contents"
    assert apparatus_kind(LICENCE) == "licence"
    assert apparatus_kind(BODY) is None
    assert apparatus_kind("It was Project Gutenberg that he meant.") is None  # one mention


def test_the_body_comes_before_the_apparatus_and_duplicates_fold() -> None:
    c = {
        1: Candidate.of(1, "book-a", CONTENTS),
        2: Candidate.of(2, "book-a", BODY),
        3: Candidate.of(3, "book-b", BODY),  # the same text in another book
        4: Candidate.of(4, "book-a", LICENCE),
        5: Candidate.of(5, "book-a", "Another body chunk about the guest house."),
    }
    order, also = arrange([1, 4, 3, 2, 5], c)
    assert order == [3, 5, 1, 4]  # body first (3 before its copy 2), then the apparatus
    assert also == {3: [2]}


def test_a_verbatim_quote_comes_first() -> None:
    c = {i: Candidate.of(i, "b", f"text {i}") for i in range(1, 5)}
    order, _ = arrange([1, 2, 3], c, quotes=[3, 4])
    assert order == [3, 4, 1, 2]
