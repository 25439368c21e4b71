"""mindory.text.encoding: detection, strict and lossy decoding, exact byte offsets.

The corpus tests use the five real ``txt_*`` files of shared/corpus (see its
SOURCES.md). Positions of known phrases are hard-coded on purpose: they were
checked by hand against the files, and a test that computed them with
``str.find`` would only test itself.
"""

from __future__ import annotations

import codecs
import os
import random
import time
from functools import cache
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mindory.errors import DecodeError
from mindory.text.byte_index import ByteIndex
from mindory.text.encoding import DecodedText, decode_bytes, read_text_file

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpus"

GBK = "txt_zh-Hant_honglou-meng_gbk_crlf.txt"
BIG5 = "txt_zh-Hant_honglou-meng_big5-cp950_crlf.txt"
HKSCS = "txt_zh-Hant_qiaoshi-yanyi_big5hkscs-astral_crlf.txt"
SANGUO = "txt_zh-Hans_sanguo-yanyi_utf8_crlf.txt"
NOWHERE = "txt_en_news-from-nowhere_ascii_crlf.txt"

HONGLOU_PHRASES = [
    (1223, "第一回 甄士隱夢幻識通靈"),
    (15113, "林黛玉"),
    (37929, "賈寶玉初試雲雨情"),
]
# file, codec, code points, [(position, phrase)]
CORPUS_CASES = [
    (GBK, "gbk", 895_286, HONGLOU_PHRASES),
    (BIG5, "cp950", 895_286, HONGLOU_PHRASES),
    (
        HKSCS,
        "big5hkscs",
        174_158,
        [(4156, "恍若看殺之衛𡩋。流盼光溢"), (18950, "知奉承魏𦹃的，卻借他")],
    ),
    (SANGUO, "utf-8", 608_315, [(13, "第一回 宴桃园豪杰三结义"), (171, "话说天下大势")]),
    (NOWHERE, "ascii", 450_413, [(1471, "CHAPTER I: DISCUSSION AND BED")]),
]


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"true", "1", "yes"}


@cache
def _raw(name: str) -> bytes:
    path = CORPUS / name
    if not path.is_file():
        message = f"corpus file {path} missing (shared/ must sit beside the repository)"
        if _in_ci():
            pytest.fail(f"FAILED (CI=true): {message}", pytrace=False)
        pytest.skip(f"SKIPPED LOUDLY: {message}")
    return path.read_bytes()


@cache
def _decoded(name: str) -> tuple[bytes, DecodedText, ByteIndex]:
    raw = _raw(name)
    decoded = decode_bytes(raw, path=name)
    return raw, decoded, ByteIndex(raw, decoded)


def _check_positions(
    raw: bytes, decoded: DecodedText, index: ByteIndex, positions: list[int]
) -> None:
    """Byte offsets agree with the raw file, both ways, at every given position."""
    text, codec = decoded.text, decoded.encoding
    for p in positions:
        start = index.byte_offset(p)
        assert index.code_point(start) == p
        if p < len(text):
            end = index.byte_offset(p + 1)
            assert raw[start:end].decode(codec) == text[p]
            for inside in range(start + 1, end):  # inside a character: floor to it
                assert index.code_point(inside) == p
        k = min(len(text) - p, 37)
        assert raw[start : index.byte_offset(p + k)].decode(codec) == text[p : p + k]


# --- the real files ---------------------------------------------------------------------


@pytest.mark.parametrize(("name", "codec", "length", "phrases"), CORPUS_CASES)
def test_corpus_file_detected_and_decoded(
    name: str, codec: str, length: int, phrases: list[tuple[int, str]]
) -> None:
    raw, decoded, _ = _decoded(name)
    assert decoded.encoding == codec
    assert decoded.bom == b""
    assert not decoded.lossy
    assert decoded.bad_bytes == 0
    assert decoded.first_bad_byte is None
    assert decoded.replacements == ()
    assert len(decoded.text) == length
    assert decoded.text == raw[len(decoded.bom) :].decode(codec)
    for position, phrase in phrases:
        assert decoded.text[position : position + len(phrase)] == phrase


@pytest.mark.parametrize(("name", "codec", "length", "phrases"), CORPUS_CASES)
def test_corpus_byte_index(
    name: str, codec: str, length: int, phrases: list[tuple[int, str]]
) -> None:
    raw, decoded, index = _decoded(name)
    text = decoded.text
    positions = {0, 1, length - 1, length}
    positions.update(range(0, length, length // 97))  # spread over the whole book
    for k in (1, 2, 50, 100, 200):  # around checkpoints
        positions.update(p for p in (k * 4096 - 1, k * 4096, k * 4096 + 1) if p <= length)
    for start in range(0, length, length // 40):  # at and right after CRLFs
        crlf = text.find("\r\n", start)
        if crlf >= 0:
            positions.update({crlf, crlf + 1, crlf + 2})
    for position, phrase in phrases:
        positions.update({position, position + len(phrase)})
        start, end = index.byte_offset(position), index.byte_offset(position + len(phrase))
        assert raw[start:end].decode(codec) == phrase
    assert index.byte_offset(length) == len(raw)
    assert index.code_point(len(raw)) == length
    _check_positions(raw, decoded, index, sorted(positions))


def test_corpus_crlf_kept() -> None:
    _, decoded, index = _decoded(NOWHERE)
    # ASCII: byte offsets are code points; CRLF is two characters, kept as such.
    assert decoded.text[1465:1471] == "\r\n\r\n\r\n"
    assert index.byte_offset(1471) == 1471
    assert index.code_point(300_001) == 300_001


def test_hkscs_astral_characters() -> None:
    raw, decoded, index = _decoded(HKSCS)
    text = decoded.text
    astral = [i for i, ch in enumerate(text) if ord(ch) > 0xFFFF]
    assert len(astral) == 86
    assert astral[0] == 4162
    assert text[4162] == "𡩋"
    assert text[18954] == "𦹃"
    assert len(text.encode("utf-16-le")) // 2 == 174_244  # what JavaScript counts
    # 𡩋 is the first byte pair that cp950 rejects.
    assert index.byte_offset(4162) == 8250
    assert index.byte_offset(4163) == 8252
    assert raw[8250:8252].decode("big5hkscs") == "𡩋"
    with pytest.raises(UnicodeDecodeError) as info:
        raw.decode("cp950")
    assert info.value.start == 8250
    after = [p + d for p in astral[:10] + astral[-10:] for d in (0, 1, 2)]
    _check_positions(raw, decoded, index, after)


def test_honglou_gbk_and_big5_are_the_same_text() -> None:
    raw_gbk, gbk, gbk_index = _decoded(GBK)
    raw_big5, big5, big5_index = _decoded(BIG5)
    assert raw_gbk != raw_big5
    assert gbk.text == big5.text
    assert len(gbk.text) == 895_286
    assert gbk.text.count("\u3000") == 6152
    # Every non-ASCII character is two bytes in both files, so offsets agree too.
    for p in range(0, len(gbk.text) + 1, 8191):
        assert gbk_index.byte_offset(p) == big5_index.byte_offset(p)


def test_big5_traps_are_avoided() -> None:
    raw, decoded, _ = _decoded(BIG5)
    with pytest.raises(UnicodeDecodeError):
        raw.decode("big5")  # Python's plain big5 rejects the file ...
    garbage = raw.decode("gb18030")  # ... and gb18030 "decodes" it without an error
    assert garbage != decoded.text
    assert decoded.encoding == "cp950"
    assert _decoded(HKSCS)[1].encoding != "gb18030"


def test_corpus_detection_is_fast() -> None:
    raw = _raw(GBK)
    start = time.perf_counter()
    decode_bytes(raw)
    assert time.perf_counter() - start < 2.0  # measured ~0.1 s; seconds mean a regression


# --- synthetic files --------------------------------------------------------------------

FRENCH = (
    "« Il était une fois », dit-elle, “une forêt où l’on entendait chanter les oiseaux.” "
    "Le garçon, très ému, répondit : « Ça, c’est à voir — peut-être demain… » "
    "Les cœurs étaient légers ; l’été s’achevait et la fête du village coûtait 5 €.\r\n"
)
GERMAN = (
    "Größe und Übermut: die Äpfel fielen früh vom Baum, während der Bäcker über die "
    "Straße lief. Müde, aber glücklich, öffnete er die Tür zur Stube. «Grüß Gott!»\r\n"
)
JAPANESE = (
    "山路を登りながら、こう考えた。智に働けば角が立つ。情に棹させば流される。"
    "意地を通せば窮屈だ。とかくに人の世は住みにくい。住みにくさが高じると、"
    "安い所へ引き越したくなる。どこへ越しても住みにくいと悟った時、詩が生れて、画が出来る。\r\n"
)
SIMPLIFIED = "话说天下大势，分久必合，合久必分。周末七国分争，并入于秦。及秦灭之后，楚、汉分争，又并入于汉。\r\n"
TRADITIONAL = "話說天下大勢，分久必合，合久必分。周末七國分爭，並入於秦。及秦滅之後，楚、漢分爭，又並入於漢。\r\n"
KOREAN = "대한민국은 민주공화국이다. 대한민국의 주권은 국민에게 있고, 모든 권력은 국민으로부터 나온다.\r\n"
RUSSIAN = "Все счастливые семьи похожи друг на друга, каждая несчастливая семья несчастлива по-своему.\r\n"


@pytest.mark.parametrize(
    ("text", "codec", "expected"),
    [
        (FRENCH * 3, "cp1252", "cp1252"),
        (GERMAN * 3, "latin-1", "latin-1"),
        (JAPANESE * 3, "shift_jis", "shift_jis"),
        (JAPANESE * 3, "euc-jp", "euc-jp"),
        (SIMPLIFIED * 3, "gbk", "gbk"),
        (TRADITIONAL * 3, "gbk", "gbk"),
        (TRADITIONAL * 3, "cp950", "cp950"),
        (KOREAN * 3, "euc-kr", "euc-kr"),
        (RUSSIAN * 3, "cp1251", "cp1251"),
        ("naïve café\r\n", "latin-1", "latin-1"),  # tiny: no statistics, Western default
    ],
)
def test_legacy_encodings(text: str, codec: str, expected: str) -> None:
    data = text.encode(codec)
    decoded = decode_bytes(data)
    assert decoded.encoding == expected
    assert decoded.text == text
    assert not decoded.lossy
    index = ByteIndex(data, decoded)
    for p in range(len(text) + 1):
        assert index.byte_offset(p) == len(text[:p].encode(codec))
        assert index.code_point(index.byte_offset(p)) == p


def test_cp1252_smart_quotes() -> None:
    data = b"\x93Quoted,\x94 she said \x96 caf\xe9, na\xefve, \x80 5.\r\n" * 4
    decoded = decode_bytes(data)
    assert decoded.encoding == "cp1252"
    assert decoded.text.startswith("“Quoted,” she said – café, naïve, € 5.\r\n")


def test_big5_is_never_gb18030() -> None:
    data = (TRADITIONAL * 5).encode("cp950")
    data.decode("gb18030")  # the trap: no error
    assert decode_bytes(data).encoding == "cp950"


@pytest.mark.parametrize(
    ("bom", "codec"),
    [
        (codecs.BOM_UTF8, "utf-8"),
        (codecs.BOM_UTF16_LE, "utf-16-le"),
        (codecs.BOM_UTF16_BE, "utf-16-be"),
        (codecs.BOM_UTF32_LE, "utf-32-le"),
        (codecs.BOM_UTF32_BE, "utf-32-be"),
    ],
)
def test_bom_files(bom: bytes, codec: str) -> None:
    text = "Ab\r\n中文𡩋\tz\u3000é\ufeff!"  # a U+FEFF inside the text is text
    data = bom + text.encode(codec)
    decoded = decode_bytes(data)
    assert decoded.encoding == codec
    assert decoded.bom == bom
    assert decoded.text == text  # the BOM is not part of the text
    assert not decoded.lossy
    index = ByteIndex(data, decoded)
    assert index.byte_offset(0) == len(bom)
    assert all(index.code_point(b) == 0 for b in range(len(bom) + 1))
    for p in range(len(text) + 1):
        assert index.byte_offset(p) == len(bom) + len(text[:p].encode(codec))
        assert index.code_point(index.byte_offset(p)) == p
    assert index.byte_offset(len(text)) == len(data)


def test_utf8_bom_offsets_hard_coded() -> None:
    data = codecs.BOM_UTF8 + "中a\r\n".encode()
    decoded = decode_bytes(data)
    index = ByteIndex(data, decoded)
    assert decoded.text == "中a\r\n"
    assert [index.byte_offset(p) for p in range(5)] == [3, 6, 7, 8, 9]
    assert [index.code_point(b) for b in range(10)] == [0, 0, 0, 0, 0, 0, 1, 2, 3, 4]


@pytest.mark.parametrize(
    "text",
    [
        "Hello, world.\r\nThis is plain text.\r\n" * 10,
        # U+4E00 puts its NUL byte on the other side than ASCII does.
        (SIMPLIFIED + "一统天下，万世一系。\r\n") * 5,
    ],
)
@pytest.mark.parametrize("codec", ["utf-16-le", "utf-16-be"])
def test_bomless_utf16(text: str, codec: str) -> None:
    decoded = decode_bytes(text.encode(codec))
    assert (decoded.encoding, decoded.bom, decoded.text) == (codec, b"", text)


def test_bom_decides_even_when_damaged() -> None:
    data = codecs.BOM_UTF16_LE + "abc".encode("utf-16-le") + b"\x00\xd8" + b"d\x00" + b"e"
    decoded = decode_bytes(data)
    assert decoded.encoding == "utf-16-le"
    assert decoded.lossy
    assert decoded.text == "abc\ufffdd\ufffd"
    assert decoded.replacements == ((3, 8, 10), (5, 12, 13))
    assert decoded.first_bad_byte == 8
    assert decoded.bad_bytes == 3


# Valid UTF-8 Chinese (202 code points, 602 bytes), then damage at known places.
UTF8_PREFIX = "中文" * 100 + "\r\n"


def test_lossy_utf8_positions_are_exact() -> None:
    data = UTF8_PREFIX.encode() + b"abc" + "中文".encode() + b"\xff" + "é".encode() + b"\xe4\xb8xyz"
    decoded = decode_bytes(data, path="damaged.txt")
    assert decoded.encoding == "utf-8"
    assert decoded.lossy
    assert decoded.text == UTF8_PREFIX + "abc中文\ufffdé\ufffdxyz"
    assert decoded.text == data.decode("utf-8", "replace")
    assert decoded.replacements == ((207, 611, 612), (209, 614, 616))
    assert decoded.bad_bytes == 3
    assert decoded.first_bad_byte == 611
    index = ByteIndex(data, decoded)
    assert [index.byte_offset(p) for p in range(205, 214)] == [
        605,
        608,
        611,
        612,
        614,
        616,
        617,
        618,
        619,
    ]
    assert index.code_point(611) == 207
    assert index.code_point(612) == 208
    assert index.code_point(613) == 208  # inside é
    assert index.code_point(615) == 209  # inside the bad range: the U+FFFD
    assert index.code_point(616) == 210
    small = ByteIndex(data, decoded, checkpoint_every=3)
    for p in range(len(decoded.text) + 1):
        assert small.byte_offset(p) == index.byte_offset(p)
    for b in range(len(data) + 1):
        assert small.code_point(b) == index.code_point(b)


def test_lossy_utf8_truncated_end() -> None:
    data = UTF8_PREFIX.encode() + "中".encode()[:2]
    decoded = decode_bytes(data)
    assert decoded.encoding == "utf-8"
    assert decoded.text == UTF8_PREFIX + "\ufffd"
    assert decoded.replacements == ((202, 602, 604),)
    index = ByteIndex(data, decoded)
    assert index.byte_offset(203) == 604
    assert index.code_point(603) == 202
    assert index.code_point(604) == 203


def test_mostly_legacy_is_not_read_as_lossy_utf8() -> None:
    data = ("é" * 3).encode() + b" caf\xe9 na\xefve \x93quoted\x94" * 20
    decoded = decode_bytes(data)
    assert decoded.encoding == "cp1252"
    assert not decoded.lossy


def test_lossy_gbk() -> None:
    good = (SIMPLIFIED * 20).encode("gbk")
    data = good[:300] + b"\xff" + good[300:]
    decoded = decode_bytes(data)
    assert decoded.encoding == "gbk"
    assert decoded.lossy
    assert decoded.text == data.decode("gbk", "replace")
    ((cp, start, end),) = decoded.replacements
    assert (start, end) == (300, 301)
    assert decoded.text[cp] == "\ufffd"
    index = ByteIndex(data, decoded)
    assert index.byte_offset(cp) == 300
    assert index.byte_offset(cp + 1) == 301
    assert data[301:].decode("gbk") == decoded.text[cp + 1 :]


def test_big5hkscs_two_code_point_character_floors() -> None:
    # 0x8862 is one Big5-HKSCS character that decodes to two code points (Ê + macron).
    data = "中".encode("big5hkscs") + b"\x88\x62" + "好".encode("big5hkscs")
    decoded = DecodedText(data.decode("big5hkscs"), "big5hkscs")
    assert decoded.text == "中\u00ca\u0304好"
    for every in (1, 2, 4096):
        index = ByteIndex(data, decoded, checkpoint_every=every)
        assert [index.byte_offset(p) for p in range(5)] == [0, 2, 2, 4, 6]
        assert [index.code_point(b) for b in range(7)] == [0, 0, 1, 1, 3, 3, 4]


# --- refusals ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [b"", codecs.BOM_UTF8, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE, codecs.BOM_UTF32_BE],
)
def test_empty_files(data: bytes) -> None:
    with pytest.raises(DecodeError) as info:
        decode_bytes(data, path="books/empty.txt")
    assert str(info.value) == "books/empty.txt: empty file"
    assert info.value.path == "books/empty.txt"


def test_binary_png() -> None:
    rng = random.Random(7)
    data = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(rng.randrange(256) for _ in range(4000))
    with pytest.raises(DecodeError) as info:
        decode_bytes(data, path="cover.png")
    assert str(info.value) == "cover.png: looks like a binary file, not text (NUL byte at offset 8)"


def test_binary_control_bytes_without_nul() -> None:
    data = bytes(range(1, 32)) * 200
    with pytest.raises(DecodeError) as info:
        decode_bytes(data, path="blob.bin")
    assert str(info.value).startswith("blob.bin: looks like a binary file, not text (control byte")


def test_nul_in_utf8_bom_file_is_binary() -> None:
    with pytest.raises(DecodeError, match="NUL byte at offset 5"):
        decode_bytes(codecs.BOM_UTF8 + b"ab\x00cd")


def test_byte_index_rejects_out_of_range() -> None:
    data = b"abc"
    index = ByteIndex(data, decode_bytes(data))
    with pytest.raises(IndexError):
        index.byte_offset(4)
    with pytest.raises(IndexError):
        index.code_point(-1)


# --- read_text_file ---------------------------------------------------------------------


def test_read_text_file(tmp_path: Path) -> None:
    path = tmp_path / "book.txt"
    path.write_bytes(codecs.BOM_UTF8 + "第一回\r\n".encode())
    raw, decoded = read_text_file(path)
    assert raw == path.read_bytes()
    assert (decoded.text, decoded.encoding, decoded.bom) == ("第一回\r\n", "utf-8", codecs.BOM_UTF8)


def test_read_text_file_errors_name_the_file(tmp_path: Path) -> None:
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    with pytest.raises(DecodeError, match="empty file") as info:
        read_text_file(empty)
    assert str(info.value).startswith(f"{empty}: ")

    big = tmp_path / "big.txt"
    big.write_bytes(b"x" * 101)
    with pytest.raises(DecodeError, match="too large") as info:
        read_text_file(big, max_bytes=100)
    assert str(info.value).startswith(f"{big}: ")

    missing = tmp_path / "missing.txt"
    with pytest.raises(DecodeError, match="cannot read file") as info:
        read_text_file(missing)
    assert str(info.value).startswith(f"{missing}: ")

    binary = tmp_path / "cover.png"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    with pytest.raises(DecodeError, match="binary") as info:
        read_text_file(binary)
    assert str(info.value).startswith(f"{binary}: ")


# --- property -----------------------------------------------------------------------------

PIECES = ["\r\n", "\n", "\t", " ", "中", "é", "\u3000", "𡩋", "😀", "\ufeff"]
TEXTS = st.lists(
    st.one_of(
        st.sampled_from(PIECES),
        st.characters(blacklist_categories=("Cs", "Cc")),
    ),
    min_size=1,
    max_size=80,
).map("".join)


@settings(max_examples=150, deadline=None)
@given(
    text=TEXTS, variant=st.sampled_from(["utf-8", "utf-8-bom", "utf-16-le-bom", "utf-16-be-bom"])
)
def test_property_round_trip_and_offsets(text: str, variant: str) -> None:
    codec = variant.removesuffix("-bom")
    bom = {
        "utf-8": b"",
        "utf-8-bom": codecs.BOM_UTF8,
        "utf-16-le-bom": codecs.BOM_UTF16_LE,
        "utf-16-be-bom": codecs.BOM_UTF16_BE,
    }[variant]
    if not bom and text.startswith("\ufeff"):
        text = "x" + text  # a leading U+FEFF without a BOM would read as a BOM
    data = bom + text.encode(codec)
    decoded = decode_bytes(data)
    assert decoded.text == text
    assert decoded.bom == bom
    assert not decoded.lossy
    assert decoded.encoding == ("ascii" if not bom and text.isascii() else codec)
    for every in (3, 4096):
        index = ByteIndex(data, decoded, checkpoint_every=every)
        for i in range(len(text) + 1):
            offset = index.byte_offset(i)
            assert offset == len(bom) + len(text[:i].encode(codec))
            assert index.code_point(offset) == i


# --- damaged UTF-8 (rule 5): UTF-8 with a few broken sequences is UTF-8, lossy ----------

# 37 non-ASCII characters (Latin, CJK, an astral emoji), ASCII between them.
DAMAGE_HEAD = (
    "La naïve café de l’été, déjà vu : crème brûlée.\n\n"
    "日本語の文章です。山路を登りながら考えた。\n\n"
    "Un smiley 😀 et « guillemets » pour finir — voilà.\n\n"
)
DAMAGE_TAIL = "\n\nEncore du texte après : ça marche, n’est-ce pas ? 東京へ行く。\n"
# kind -> (bad bytes, U+FFFDs that errors="replace" makes for them)
DAMAGE_KINDS = {
    "lone continuation 0x80": (b"\x80", 1),
    "byte 0xFF": (b"\xff", 1),
    "overlong C0 AF": (b"\xc0\xaf", 2),
    "encoded surrogate ED A0 80": (b"\xed\xa0\x80", 3),
    "cut-off sequence E6 97": (b"\xe6\x97", 1),  # the first two bytes of 日 (E6 97 A5)
}


def _damaged_file(kind: str, where: str) -> tuple[bytes, str, int]:
    """(file bytes, expected decoded text, offset of the first bad byte)."""
    bad, replacements = DAMAGE_KINDS[kind]
    head = DAMAGE_HEAD.encode()
    tail = DAMAGE_TAIL.encode() if where == "middle" else b""
    expected = DAMAGE_HEAD + "\ufffd" * replacements + (DAMAGE_TAIL if where == "middle" else "")
    return head + bad + tail, expected, len(head)


def _check_chunk_bytes(
    data: bytes, text: str, index: ByteIndex, spans: list[tuple[int, int]]
) -> None:
    for start, end in spans:
        b0, b1 = index.byte_offset(start), index.byte_offset(end)
        assert data[b0:b1].decode("utf-8", "replace") == text[start:end], (start, end)


@pytest.mark.parametrize("where", ["middle", "end"])
@pytest.mark.parametrize("kind", list(DAMAGE_KINDS))
def test_damaged_utf8_is_utf8_lossy(kind: str, where: str) -> None:
    data, expected, first_bad = _damaged_file(kind, where)
    bad, replacements = DAMAGE_KINDS[kind]
    decoded = decode_bytes(data)
    assert decoded.encoding == "utf-8"
    assert decoded.text == expected
    assert decoded.text == data.decode("utf-8", "replace")
    assert "naïve café" in decoded.text and "日本語" in decoded.text  # no mojibake
    assert decoded.lossy
    assert decoded.bad_bytes == len(bad)
    assert decoded.bad_sequences == replacements
    assert decoded.first_bad_byte == first_bad
    cp = len(DAMAGE_HEAD)
    assert decoded.replacements[0][:2] == (cp, first_bad)
    assert decoded.replacements[-1][2] == first_bad + len(bad)
    for every in (1, 5, 4096):
        index = ByteIndex(data, decoded, checkpoint_every=every)
        assert index.byte_offset(cp) == first_bad
        assert index.byte_offset(cp + replacements) == first_bad + len(bad)
        assert index.byte_offset(len(decoded.text)) == len(data)
        for b in range(first_bad, first_bad + len(bad)):
            assert decoded.text[index.code_point(b)] == "\ufffd"
        n = len(decoded.text)
        _check_chunk_bytes(data, decoded.text, index, [(0, p) for p in range(n + 1)])
        _check_chunk_bytes(data, decoded.text, index, [(p, n) for p in range(n + 1)])


@pytest.mark.parametrize("where", ["middle", "end"])
@pytest.mark.parametrize("kind", list(DAMAGE_KINDS))
def test_damaged_utf8_book_chunks_have_exact_bytes(kind: str, where: str, tmp_path: Path) -> None:
    from mindory.importers import load_book
    from mindory.text.chunking import chunk_book
    from mindory.text.records import ChunkSettings, Settings

    data, expected, first_bad = _damaged_file(kind, where)
    path = tmp_path / "damaged.txt"
    path.write_bytes(data)
    book = load_book(path)
    assert (book.encoding, book.lossy) == ("utf-8", True)
    assert book.bad_bytes == len(DAMAGE_KINDS[kind][0])
    assert book.first_bad_byte == first_bad
    assert book.source.text == expected
    assert any("U+FFFD" in w and f"first at byte {first_bad}" in w for w in book.warnings)
    settings = Settings(chunking=ChunkSettings(size=24, overlap=8, min_size=4))
    chunks = chunk_book(book, settings)
    assert len(chunks) > 5
    index = book.source.bytes_index
    spans = [(c.source_start, c.source_end) for c in chunks]
    _check_chunk_bytes(data, book.source.text, index, spans)
    # The chunk holding the damage carries the U+FFFD(s) and exactly the bad bytes.
    holding = [c for c in chunks if c.source_start <= len(DAMAGE_HEAD) < c.source_end]
    assert holding and all("\ufffd" in c.text for c in holding)
    for c in holding:
        b0, b1 = index.byte_offset(c.source_start), index.byte_offset(c.source_end)
        assert b0 <= first_bad and b1 >= first_bad + 1


def test_legacy_file_with_some_valid_utf8_pairs_stays_cp1252() -> None:
    # "ß“" is DF 93 in cp1252: a well-formed UTF-8 sequence (U+07D3) by accident,
    # ten of them; but „ (ten), the ß of "heißt" (five) and ö ß ä ü (four) are 19
    # ill-formed pieces: far from 8 valid per invalid.
    text = "Er rief „Gruß“, sie heißt „Spaß“. " * 5 + "Größe, Bäcker, früh.\r\n"
    data = text.encode("cp1252")
    as_utf8 = data.decode("utf-8", "replace")
    assert as_utf8.count("\u07d3") == 10
    assert as_utf8.count("\ufffd") == 19
    decoded = decode_bytes(data)
    assert decoded.encoding == "cp1252"
    assert decoded.text == text
    assert not decoded.lossy


@pytest.mark.parametrize(
    ("valid", "invalid", "utf8"),
    [
        (8, 1, True),  # rule 5: 8 valid per invalid
        (16, 2, True),
        # Rule 7: below 8 per invalid, a single-byte reading would make "Ã©" of every é.
        (7, 1, True),
        (15, 2, True),
        (4, 4, True),  # as many plausible valid sequences as damaged characters
        (4, 5, False),  # one damaged character more: a legacy codec judges it
        (3, 1, False),  # fewer than 4 valid sequences: too little evidence
    ],
)
def test_damaged_utf8_threshold(valid: int, invalid: int, utf8: bool) -> None:
    data = ("word é " * valid).encode() + b"end \xff" * invalid + b".\r\n"
    decoded = decode_bytes(data)
    assert (decoded.encoding == "utf-8") is utf8
    assert decoded.lossy is utf8


# Issue 24, item 2: five valid multi-byte sequences, five broken spots (one cut off at the
# end); it used to become "naÃ¯ve cafÃ©", "æ—¥æœ¬èªž", lossy: false.
SHORT_DAMAGED = (
    "Valid start: naïve café.\nbad1:".encode()
    + b"\x80 bad2:\xff bad3:\xc0\xaf bad4:\xed\xa0\x80\n"
    + "日本語 then MARKER.\ntail:".encode()
    + b"\xe2\x82"
)


def test_short_mostly_utf8_file_is_utf8_lossy() -> None:
    decoded = decode_bytes(SHORT_DAMAGED)
    assert decoded.encoding == "utf-8"
    assert decoded.text == SHORT_DAMAGED.decode("utf-8", "replace")
    assert "naïve café." in decoded.text and "日本語 then MARKER." in decoded.text
    assert decoded.lossy
    assert decoded.bad_bytes == 1 + 1 + 2 + 3 + 2
    assert decoded.bad_sequences == 1 + 1 + 2 + 3 + 1
    assert decoded.first_bad_byte == SHORT_DAMAGED.index(b"\x80")
    assert decoded.replacements[-1][1:] == (len(SHORT_DAMAGED) - 2, len(SHORT_DAMAGED))


def test_short_damaged_utf8_book_records_the_loss(tmp_path: Path) -> None:
    from mindory.importers import load_book

    path = tmp_path / "short.txt"
    path.write_bytes(SHORT_DAMAGED)
    book = load_book(path)
    assert (book.encoding, book.lossy, book.bad_bytes) == ("utf-8", True, 9)
    assert book.first_bad_byte == SHORT_DAMAGED.index(b"\x80")


@pytest.mark.parametrize(
    ("text", "codec"),
    [
        # Accidental valid pairs in single-byte text: "ß“" is NKo U+07D3, "Ві" is "³".
        ("Er rief „Gruß“, sie heißt „Spaß“. GRÜß“ Maß’ ÄRGER… «ÖL» ", "cp1252"),
        ("Він сказав: «Ні». Вона пішла. Їжак Європа Сірий Білий Віра. ВІН Її ", "cp1251"),
        ("Zażółć gęślą jaźń. ŁÓDŹ „Świętość” — ŻÓŁW… ", "cp1250"),
        ("Η Ελλάδα είναι χώρα. «ΝΑΙ» — ΌΧΙ… Άλφα Έψιλον ", "cp1253"),
    ],
)
def test_single_byte_text_with_accidental_utf8_pairs_is_not_utf8(text: str, codec: str) -> None:
    data = (text * 3).encode(codec)
    decoded = decode_bytes(data)
    assert decoded.encoding != "utf-8"
    assert not decoded.lossy


@pytest.mark.parametrize(("valid", "utf8"), [(4, True), (3, False)])
def test_truncated_utf8_needs_four_valid_sequences(valid: int, utf8: bool) -> None:
    # A sequence cut off at the end is a valid prefix, not evidence against UTF-8:
    # only the minimum of 4 valid sequences applies.
    data = "日本語で".encode()[: 3 * valid] + "日".encode()[:2]
    decoded = decode_bytes(data)
    assert (decoded.encoding == "utf-8") is utf8
    if utf8:
        assert decoded.text == "日本語で"[:valid] + "\ufffd"
        assert (decoded.bad_bytes, decoded.first_bad_byte) == (2, 3 * valid)


def test_legacy_text_ending_in_a_lead_byte_is_not_truncated_utf8() -> None:
    # "café" in latin-1 ends in E9, a valid start of a 3-byte UTF-8 sequence.
    decoded = decode_bytes(b"un caf\xe9")
    assert decoded.encoding in {"latin-1", "cp1252"}
    assert decoded.text == "un café"


def test_damaged_utf8_after_bom_counts_the_bom() -> None:
    data = codecs.BOM_UTF8 + "中文".encode() + b"\xc0\xaf" + "é".encode()
    decoded = decode_bytes(data)
    assert (decoded.encoding, decoded.text) == ("utf-8", "中文\ufffd\ufffdé")
    assert (decoded.bad_bytes, decoded.bad_sequences, decoded.first_bad_byte) == (2, 2, 9)


# Characters that are never valid anywhere in UTF-8: each corrupts the character it hits.
NEVER_UTF8 = [0xC0, 0xC1, *range(0xF5, 0x100)]
NON_ASCII_CHARS = st.characters(min_codepoint=0x80, exclude_categories=("Cs", "Cc"))
WORDS = st.text(alphabet="abcdefghij ,.\n", max_size=5)


@settings(max_examples=150, deadline=None)
@given(
    pieces=st.lists(st.tuples(WORDS, NON_ASCII_CHARS), min_size=130, max_size=220),
    hits=st.lists(
        st.tuples(st.integers(min_value=0), st.sampled_from(NEVER_UTF8), st.booleans()),
        min_size=1,
        max_size=3,
    ),
    cut=st.integers(min_value=0, max_value=2),
    data_draw=st.data(),
)
def test_property_damaged_utf8_still_utf8(
    pieces: list[tuple[str, str]],
    hits: list[tuple[int, int, bool]],
    cut: int,
    data_draw: st.DataObject,
) -> None:
    text = "x" + "".join(w + ch for w, ch in pieces) + "語"  # "x": no U+FEFF first (a BOM)
    encoded = text.encode()
    starts = [0]  # byte start of every character, and the end
    for ch in text:
        starts.append(starts[-1] + len(ch.encode()))
    char_at = {b: k for k in range(len(text)) for b in range(starts[k], starts[k + 1])}
    corrupt = bytearray(encoded)
    bad_chars: set[int] = set()
    inserted = []
    for offset, byte, insert in hits:
        q = offset % len(encoded)
        if insert:  # a stray continuation byte between two characters
            k = char_at[q]
            inserted.append((starts[k], 0x80 | (byte & 0x3F)))
        else:
            corrupt[q] = byte
            bad_chars.add(char_at[q])
    if cut:
        del corrupt[len(corrupt) - cut :]  # "語" (3 bytes) loses its last byte(s)
        bad_chars.add(len(text) - 1)
    for at, byte in sorted(inserted, reverse=True):
        corrupt.insert(at, byte)
    data = bytes(corrupt)
    decoded = decode_bytes(data)
    assert decoded.encoding == "utf-8"
    assert decoded.lossy
    assert decoded.text == data.decode("utf-8", "replace")
    first = min([starts[k] for k in bad_chars] + [at for at, _ in inserted])
    assert decoded.first_bad_byte == first
    last_len = len(text[-1].encode()) - cut if cut else 3
    assert decoded.bad_bytes == sum(
        len(text[k].encode()) if k != len(text) - 1 else last_len for k in bad_chars
    ) + len(inserted)
    index = ByteIndex(data, decoded, checkpoint_every=data_draw.draw(st.sampled_from([7, 4096])))
    n = len(decoded.text)
    for _ in range(10):
        a = data_draw.draw(st.integers(min_value=0, max_value=n))
        b = data_draw.draw(st.integers(min_value=a, max_value=n))
        start, end = index.byte_offset(a), index.byte_offset(b)
        assert data[start:end].decode("utf-8", "replace") == decoded.text[a:b]
        assert index.code_point(start) == a


# Characters any text uses (Latin, Greek, Cyrillic, punctuation, common CJK, kana, emoji):
# a single-byte reading makes mojibake of each (rule 7).
# Each after an ASCII letter, as in "café" or "iPhone日本": text in Latin words (CJK prose,
# with no ASCII letters around, is judged by the CJK codecs first: "ééé" is Korean
# "톱톱톱" in cp949).
LATIN_WORDS = st.builds(
    lambda w, e: w + e, WORDS, st.text(alphabet="klmnop", min_size=1, max_size=3)
)
PLAUSIBLE_CHARS = st.sampled_from(
    list("éèàçüößñłżČšőıœæøåÉÜ€£©«»—–’“”…αβγδΔЖжщыёі日本語中文的是人の東京かなカナ😀")
)


@settings(max_examples=200, deadline=None)
@given(
    pieces=st.lists(st.tuples(LATIN_WORDS, PLAUSIBLE_CHARS), min_size=12, max_size=60),
    bad=st.lists(
        st.tuples(st.integers(min_value=0), st.sampled_from([*NEVER_UTF8, *range(0x80, 0xC0)])),
        min_size=1,
        max_size=4,
    ),
)
def test_property_short_damaged_utf8_is_utf8(
    pieces: list[tuple[str, str]], bad: list[tuple[int, int]]
) -> None:
    # Valid UTF-8 with at least 12 multi-byte characters any text uses, and up to one
    # in four as many bytes that are never valid where they stand, inserted between
    # characters (each may spoil the evidence of the two characters beside it).
    text = "".join(w + ch for w, ch in pieces)
    bad = bad[: len(pieces) // 4]
    starts = [0]  # byte start of every character, and the end
    for ch in text:
        starts.append(starts[-1] + len(ch.encode()))
    inserted = sorted((starts[offset % len(starts)], byte) for offset, byte in bad)
    corrupt = bytearray(text.encode())
    for at, byte in reversed(inserted):
        corrupt.insert(at, byte)
    data = bytes(corrupt)
    decoded = decode_bytes(data)
    assert decoded.encoding == "utf-8"
    assert decoded.text == data.decode("utf-8", "replace")
    assert decoded.lossy
    assert decoded.bad_bytes == len(inserted)
    # The first inserted byte sits at its place plus the insertions before it (none).
    assert decoded.first_bad_byte == inserted[0][0]
    assert decoded.text.replace("\ufffd", "") == text
