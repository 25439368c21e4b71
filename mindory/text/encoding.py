"""Bytes -> text for plain-text books: detection, strict decoding, the lossy flag.

The decision, in order (the first rule that applies wins):

1. **Empty** (0 bytes, or nothing but a BOM): :class:`DecodeError` ``"empty file"``.
2. **BOM**: UTF-32 LE/BE (checked before UTF-16, whose LE BOM is a prefix of
   UTF-32 LE's), UTF-8, UTF-16 LE/BE. The BOM is authoritative: the rest is
   decoded with that codec, lossily if it must be. The BOM is not part of the
   text; :attr:`DecodedText.bom` keeps it and byte offsets include it.
3. **Binary**: a NUL byte (in a file without a UTF-16/32 BOM that does not look
   like BOM-less UTF-16 either) or more than 5% C0 control bytes in the first
   64 KiB: :class:`DecodeError` ``"looks like a binary file, not text (...)"``.
   BOM-less UTF-16 is accepted when the whole file decodes strictly in one byte
   order into text without control noise and with a majority of plausible
   characters (the wrong order has almost none).
4. **ASCII** (reported as ``"ascii"``), then strict **UTF-8**.
5. **Damaged UTF-8, by ratio**: if strict UTF-8 fails, the whole file is weighed
   as UTF-8. *Valid* are its well-formed multi-byte sequences; *invalid* are the
   ill-formed pieces a decoder replaces, counted as Python's ``errors="replace"``
   counts them (Unicode's "maximal subparts": a lone 0x80 or 0xFF is one, an
   overlong ``C0 AF`` two, an encoded surrogate ``ED A0 80`` three); a valid
   sequence cut off by the end of the file is replaced too but is not counted
   as invalid (it is evidence of a truncated UTF-8 file, not of another codec).
   The file is UTF-8 with damage, decoded as lossy UTF-8, when valid sequences
   clearly dominate: **at least 4 valid, and at least 8 valid per invalid**.
   Measured on legacy text read as UTF-8 (valid per invalid): whole files GBK
   0.23, Big5 0.17, Big5-HKSCS 0.15, EUC-JP 0.34, Shift_JIS 0.22, EUC-KR 0.25,
   TIS-620 0.29, Cyrillic code pages 0.14 or less, Western code pages 0-0.08;
   the worst 60-byte window of the Big5 corpus file reaches 1.06. A ratio of 8
   leaves a margin of 7 over that window and of 20 over whole files, so this
   rule alone never needs the other readings; a short file with a few damaged
   spots stays below it and is weighed again by rule 7. The counts come from
   one C-speed ``decode("utf-8", "replace")`` of the whole file.
6. **CJK multi-byte codecs** are judged, not trusted: a Big5 file "decodes" as
   GB18030 without a single error, into garbage. Each of gbk, gb18030, cp950,
   big5hkscs, shift_jis, cp932, euc-jp, euc-kr, cp949 decodes a sample (64 KiB
   of the lines that hold non-ASCII bytes) with replacement, and scores
   ``(common - rare - 3 * replaced) / non-ASCII characters``: *common* are the
   ~1,000 most frequent Chinese characters in simplified, traditional and
   Japanese forms, kana, the 2,350 KS X 1001 Hangul syllables and CJK
   punctuation; *rare* are private-use, unassigned, compatibility ideographs
   and C1 controls. A right decoding of CJK prose scores ~0.7-0.9, a wrong one
   (Big5 read as GB18030) below 0.1. Candidates scoring at least 0.4 are tried
   on the FULL file, best score first (ties: the order above, so gbk before
   gb18030, cp950 before big5hkscs, shift_jis before cp932); the first strict
   decode wins. If none decodes strictly, the best is used lossily, provided
   that at most 5% of the non-ASCII bytes are undecodable (else rule 7).
7. **Damaged UTF-8, by what the readings make**: a single-byte code page
   turns every valid UTF-8 sequence into a mojibake pair or triple (``ï`` ->
   ``Ã¯``, ``日`` -> ``æ—¥``). A valid sequence almost never occurs by chance
   in single-byte text (a letter at C2-DF followed by a symbol at 80-BF), and
   when it does it decodes to a character no text around it uses (German
   ``ß“``, DF 93, is NKo U+07D3). So the file is lossy UTF-8 when its
   **plausible** valid sequences (decoding to Latin, Greek or Cyrillic
   letters, Latin-1 symbols, general punctuation, currency, letterlike symbols,
   emoji, or what the CJK judge counts as common; with no U+FFFD beside them,
   where chance pairs inside legacy CJK bytes sit) number **at least 4 and at
   least the damaged characters plus the implausible valid sequences**.
   *Damaged characters*: each run of adjacent invalid pieces counts one per 4
   pieces (a broken character is at most 4 bytes: ``ED A0 80`` is one, a run
   through GBK text many), the cut-off tail none; *implausible*: C1 controls,
   U+0780-U+08FF (Thaana, NKo, Samaritan, ...), private-use and unassigned code
   points, compatibility ideographs, Arabic presentation forms. Other
   decodings (rarer CJK ideographs, Indic, Thai, ...) count on neither side.
   When most plausible sequences sit in ASCII words (an ASCII letter beside
   them: ``café``) this decides before rule 6, since ``é`` (C3 A9) is also a
   common Hangul syllable in cp949 and a Big5 character; otherwise it applies
   when rule 6 finds no CJK reading. Single-byte text fails by far: nearly
   every non-ASCII byte of it is a damaged character (``é`` = E9 before
   ASCII); French, German, Polish, Russian, Ukrainian, Greek, Turkish, Hebrew,
   Arabic sentences in their code pages give 0-15 plausible per 15-79 damaged.
   No character-aligned window of 5-60 characters (400 per size) of the corpus
   GBK, Big5, Big5-HKSCS files, of the corpus Japanese EPUB in Shift_JIS or
   EUC-JP, or of its Chinese EPUB in cp950 or GBK decodes as UTF-8. The counts
   are made only when valid sequences reach a quarter of the invalid pieces
   (else the damaged characters alone outnumber them), so legacy files skip it.
8. **Single-byte codecs**: charset-normalizer's pick on the sample (256 KiB;
   ignored when it recognized no language, as on tiny samples), except that
   Western text prefers cp1252 (when bytes 0x80-0x9F occur and are defined
   there) or latin-1: when charset-normalizer's pick is another Latin-script
   code page that decodes to the same text, or to text with no fewer
   "symbol inside a word" characters (the mark of a wrong Latin code page: ``¹``
   for Polish ``ą`` read as cp1252). Non-Latin picks (Cyrillic, Greek, ...)
   are trusted. The full file must decode strictly, else the next candidate;
   latin-1 closes the list and never fails.

Replacement decoding is piecewise (strict decode, catch
:class:`UnicodeDecodeError`, one U+FFFD per bad range, continue), so every
U+FFFD's byte range is known and :class:`~mindory.text.byte_index.ByteIndex` stays exact; the text equals
what Python's ``errors="replace"`` gives: one U+FFFD per maximal subpart (for
UTF-8: ``80`` -> 1, ``FF`` -> 1, ``C0 AF`` -> 2, ``ED A0 80`` -> 3, a cut-off
``E6 97`` at the end -> 1 for both bytes). :attr:`DecodedText.bad_bytes` counts
the replaced **bytes**, :attr:`DecodedText.bad_sequences` the U+FFFDs made,
:attr:`DecodedText.first_bad_byte` is the file offset (BOM included) of the first
replaced byte. Because maximal subparts are decided by the bytes themselves, the
bytes of any span between two code points, ``data[byte_offset(a):byte_offset(b)]``,
decode with ``errors="replace"`` to exactly ``text[a:b]``. ISO-2022 (7-bit, escape-based) files
are reported as ``"ascii"``; Central European code pages whose decoding is all
letters under cp1252 too (Czech cp1250) are read as cp1252.
"""

from __future__ import annotations

import codecs
import os
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass
from functools import cache, lru_cache

import charset_normalizer

from mindory.errors import DecodeError

__all__ = ["DecodedText", "decode_bytes", "read_text_file"]

SAMPLE_BYTES = 256 * 1024  # what charset-normalizer sees
JUDGE_BYTES = 64 * 1024  # what the CJK judge sees
CHECKPOINT_EVERY = 4096
BINARY_PROBE_BYTES = 64 * 1024
# Damaged UTF-8 (module doc, rule 5): valid multi-byte sequences needed, in all and
# per invalid piece.
DAMAGED_UTF8_MIN_VALID = 4
DAMAGED_UTF8_VALID_PER_INVALID = 8
# Damaged UTF-8 (module doc, rule 7): a broken character is at most this many bytes.
UTF8_MAX_CHAR_BYTES = 4
CJK_MIN_SCORE = 0.4
LOSSY_CJK_MAX_SHARE = 0.05
_PIECE_WINDOW = 8192

# UTF-32 first: b"\xff\xfe\x00\x00" also starts with the UTF-16 LE BOM.
_BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)

# Preference order among CJK candidates with equal scores (a superset after its subset).
_CJK_CODECS = (
    "gbk",
    "gb18030",
    "cp950",
    "big5hkscs",
    "shift_jis",
    "cp932",
    "euc-jp",
    "euc-kr",
    "cp949",
)
_WESTERN = frozenset({"cp1252", "latin-1", "iso8859-15"})
# Spelling of codec names in DecodedText.encoding where codecs.lookup() differs.
_PREFERRED_NAMES = {"iso8859-1": "latin-1", "euc_jp": "euc-jp", "euc_kr": "euc-kr"}

# C0 controls that text does not contain (tab, LF, VT, FF, CR, SUB = DOS end of file
# and ESC = ANSI colours do occur, so they are not counted).
_CONTROL_BYTES = bytes(b for b in range(1, 32) if b not in b"\t\n\x0b\x0c\r\x1a\x1b")
# Apostrophes and joiners that legitimately sit between two letters.
_INWORD_PUNCTUATION = frozenset("'\u2019\u2018\u00b4\u00b7\u2010\u2011-")
_NON_ASCII = re.compile(rb"[\x80-\xff]")
_ASCII_BYTES = bytes(range(128))
_NON_ASCII_CHAR = re.compile(r"[^\x00-\x7f]")
_REPLACEMENT_RUN = re.compile("\ufffd+")

# The ~1,000 most frequent Chinese characters (character frequencies summed over the
# word list of jieba 0.42.1, MIT), followed by their traditional forms (OpenCC
# STCharacters) and Japanese forms (OpenCC JPVariants; OpenCC is Apache-2.0).
# Used only to judge candidate decodings: right CJK decodings are dominated by these.
_COMMON_HANZI = frozenset(
    "一是人了不在有大中国和为这上他个地年来我会以到时要出的生学说道民家子也成行下们于"
    "后就发自之对得主长可过天作分方用多你着部能市等业全里工公经本都而高政法面门动日进"
    "区事代那去心小同北定开产前其军还然起种所如现理机体表力好外与文当两实重新三么只山"
    "水关明从化平建又制南内西没此将员名手最东头者月间无安看见各城十相但已些正口通想度"
    "加第她合院物性战由位常点海意场武使次二向治因立数样身情入原问把路被并利石老教万知"
    "级量任江及应省资委务元美特期世湖回系比气汉总展电科金先声提品设或义王社很统处四首"
    "共马形己儿司太目基领队直计别女权话少流命至报米给打变果书清活几州华解议更称程今决"
    "张导术府才保交放管结师便走达族反再题色五京河接条规式县白它改风光运信受什组听布百"
    "济党指论强做取技黄神选记斯真却职号界件花类何眼兵传带空干农边据集联古广完质阳难增"
    "历史专官每住商即步认车台林必死游举线言皇土团收考求德叫近备研争非具李众连调感转笑"
    "革该持始英克士尔让拉思根格造较际亲单朝红型价校约器字段周亚深候则功属积快图火千准"
    "究往极育装许参半令吃观鱼精办像帝八复影告远群包整构料随划算象容示投势热值夫网望源"
    "息语股铁断派速怎需片爱律纪支早况病境证编越局推满且列觉服双未居除乐企引标确织初青"
    "志率项飞球节察龙响药站施均消客失轻存低甚般击曾防请离落显罗营足素视护副食创余照兴"
    "占巴虽洲村费易试星木黑左宝置跟央识维采六底宫房音环案批切斗富乡另倒若按查故突责严"
    "桥模仅胜杀围席态破承招杨负层须父供续状域似依银范修找九致密终血旅钱赛独细效玉冲获"
    "习医演毛尽脸弹楼艺航陆右协七攻镇检写苏宗章注阿抗弟坐验封紧劳户优财养适陈喜卫排射"
    "哥油刻留急降念云微伤例景拿绝阶座刘刚害印亿沙母酒助闻超审待压升送监策略限竟香配藏"
    "敌呢差仍兰温园树征善波哪词岛止预怕继皮执味份角草男普答益谁船惊核街夏宣掌田久著画"
    "辑奇尼剑吧谈背免孩礼材愿洋春架筑括晚乱乎讲尚良友临激刀夜室既敢邦挥昌板胡欧福港叶"
    "简苦担句岁荆贵娘守辖威宜衣帮块堂额错剧充欢够孙班呼阵销坚练脚退读测吴希宁换版异某"
    "顾曲楚典朱毒菜判救宋茶洪含顺啊鲜败货矿端兄归冷忙买险康评肉吗厂永哈沉散遗停笔假输"
    "牛洞松渐顶训录否述毕督控丰献姑忽爷互亮纳襄登咱钟伯臣雄季脑介鄂召饭暗扩祖齐短烈赶"
    "牌恩诉移诗础露届蒙静喝盘卖植授伊湾博痛减穿逐秘庭陵固禁票灵杂姓泽吸侧庆妈遇追甲馆"
    "补唐炮沿殿刺怪彩俄旧警索岸轮妇载靠附毫怀软骨探雷旁罪枪牙迎序慢盛雨墙恶谷顿危稳熟"
    "瞭國爲這個箇來會時齣學說傢們於後發髮對長過業裏經麪門動進區衕開產軍還種現機體錶與"
    "當噹兩實麼隻祇關從製內沒將員東頭間無見閤戰點場嚮曏數樣問並併萬級應資務迴係繫氣漢"
    "總電聲設義統處馬兒領隊計別彆權話報給變書幾華議稱決張導術朮纔結師達題條規縣牠風運"
    "組聽佈濟黨論強黃選記卻職號類傳帶幹乾農邊據聯廣質陽難歷曆專認車臺檯颱遊舉線團糰備"
    "爭衆連調轉該剋爾讓較際親單紅價約週賙亞則屬積圖韆準極裝許參蔘喫觀魚辦復複覆遠羣構"
    "隨劃勢熱伕網語鐵斷愛紀況證証編侷滿覺雙樂標確織誌項飛節龍響藥葯輕擊請離顯羅營視護"
    "創餘興佔雖費試寶識維採寀宮環鬥鄉責嚴橋僅勝殺圍蓆態楊負層須鬚續狀銀範脩緻終錢賽獨"
    "細衝沖獲穫習醫盡儘臉彈樓藝陸協鎮檢寫蘇甦囌註驗緊勞戶優財養適陳衛唸雲傷絕階劉剛億"
    "聞審壓昇監敵蘭溫園樹徵詞島預繼執誰驚覈畫輯劍談揹禮願築亂講臨揮闆鬍衚歐葉簡擔歲荊"
    "貴孃轄幫塊額錯劇歡夠孫陣銷堅練腳讀測吳寧甯換異顧麴硃順鮮敗貨礦歸買險評嗎廠遺筆輸"
    "鬆漸頂訓錄彔畢豐獻爺納鍾鐘鈡腦飯闇擴齊趕訴詩礎屆矇濛懞靜盤賣灣減祕靈雜澤側慶媽館"
    "補綵舊輪婦載懷軟槍牆惡噁穀頓穩増毎歩収徳曽黒査効蔵晩仮為説発髪対経麺産両実関従戦"
    "様応繋気総処児権変県聴済伝帯辺拠広歴暦専挙団転譲単価亜図観鉄満覚楽竜薬軽撃顕営闘"
    "郷厳囲続銭弾芸検験労戸絶圧徴継剣歳嬢歓読呉麹帰険録豊脳拡斉売霊雑沢懐悪穏"
)


@dataclass(frozen=True)
class DecodedText:
    """A decoded text file and how it was decoded.

    ``text`` excludes the BOM and keeps everything else exactly (CRLF, tabs,
    U+3000). ``replacements`` holds ``(code point of the U+FFFD in text,
    byte_start, byte_end)`` for each undecodable byte range (a maximal subpart,
    as ``errors="replace"`` cuts them), byte offsets counted in the whole file
    (BOM included). ``bad_bytes`` counts the replaced bytes, ``bad_sequences``
    the ranges; ``first_bad_byte`` is where the first range starts.
    """

    text: str
    encoding: str
    bom: bytes = b""
    lossy: bool = False
    bad_bytes: int = 0
    first_bad_byte: int | None = None
    replacements: tuple[tuple[int, int, int], ...] = ()

    @property
    def bad_sequences(self) -> int:
        """How many U+FFFD the decoding made (one per bad byte range)."""
        return len(self.replacements)


def read_text_file(
    path: str | os.PathLike[str], *, max_bytes: int = 256 * 1024 * 1024
) -> tuple[bytes, DecodedText]:
    """Read and decode a text file; DecodeError names the file on any problem."""
    name = os.fspath(path)
    try:
        with open(name, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size > max_bytes:
                raise DecodeError(f"file too large: {size} bytes (limit {max_bytes})", path=name)
            # Read one byte past the limit: st_size can lie (pipes, growing files).
            data = handle.read(max_bytes + 1)
    except OSError as exc:
        raise DecodeError(f"cannot read file: {exc.strerror or exc}", path=name) from exc
    if len(data) > max_bytes:
        raise DecodeError(f"file too large: over {max_bytes} bytes", path=name)
    return data, decode_bytes(data, path=name)


def decode_bytes(data: bytes, *, path: str | None = None) -> DecodedText:
    """Detect the encoding of a text file's bytes and decode them (see module doc)."""
    data = bytes(data)
    if not data:
        raise DecodeError("empty file", path=path)
    for bom, codec in _BOMS:
        if data.startswith(bom):
            if (
                codec == "utf-32-le"
                and not _is_strict(data, len(bom), codec)
                and _is_strict(data, 2, "utf-16-le")
            ):
                continue  # FF FE 00 00 may be UTF-16 LE starting with U+0000
            if len(data) == len(bom):
                raise DecodeError("empty file", path=path)
            if codec == "utf-8":
                _reject_binary(data, len(bom), path, allow_utf16=False)
            return _decode_or_replace(data, codec, bom)

    utf16 = _reject_binary(data, 0, path, allow_utf16=True)
    if utf16 is not None:
        return DecodedText(data.decode(utf16), utf16)
    if data.isascii():
        return DecodedText(data.decode("ascii"), "ascii")
    try:
        return DecodedText(data.decode("utf-8"), "utf-8")
    except UnicodeDecodeError:
        pass
    valid, invalid = _utf8_evidence(data)
    if _is_damaged_utf8(valid, invalid):
        return _decode_or_replace(data, "utf-8", b"")
    # Rule 7's counts: damaged characters are at least invalid / 4, plausible
    # sequences at most valid, so most legacy files are settled without them.
    reading = _utf8_reading(data) if valid * UTF8_MAX_CHAR_BYTES >= invalid else None
    if reading is not None and reading.outweighs and reading.in_latin_words:
        return _decode_or_replace(data, "utf-8", b"")
    sample = _sample(data, SAMPLE_BYTES)
    judge_sample = _non_ascii_lines(data, JUDGE_BYTES)
    utf8_outweighs = reading is not None and reading.outweighs
    return _decode_legacy(data, sample, judge_sample, utf8_outweighs=utf8_outweighs)


def _canonical(name: str) -> str:
    canonical = codecs.lookup(name).name
    return _PREFERRED_NAMES.get(canonical, canonical)


def _is_strict(data: bytes, start: int, codec: str) -> bool:
    try:
        codecs.decode(data[start:], codec)
    except UnicodeDecodeError:
        return False
    return True


def _decode_or_replace(data: bytes, codec: str, bom: bytes) -> DecodedText:
    """Strict decode; failing that, piecewise replacement with exact byte ranges."""
    try:
        return DecodedText(codecs.decode(data[len(bom) :], codec), codec, bom)
    except UnicodeDecodeError:
        pass
    text, replacements = _decode_pieces(data, len(bom), codec)
    return DecodedText(
        text=text,
        encoding=codec,
        bom=bom,
        lossy=True,
        bad_bytes=sum(end - start for _, start, end in replacements),
        first_bad_byte=replacements[0][1],
        replacements=replacements,
    )


def _decode_pieces(
    data: bytes, start: int, codec: str
) -> tuple[str, tuple[tuple[int, int, int], ...]]:
    """Decode with one U+FFFD per bad byte range, recording each range.

    Works in windows: a failed decode costs time in proportion to its input, so
    decoding the whole rest after every error would be quadratic. An error that
    reaches a window's end may be a character cut by the window: decode up to it
    and start the next window there, so every error is judged in full context.
    """
    decode = codecs.lookup(codec).decode
    view = memoryview(data)
    parts: list[str] = []
    replacements: list[tuple[int, int, int]] = []
    pos, cp, window = start, 0, _PIECE_WINDOW
    while pos < len(data):
        end = min(len(data), pos + window)
        try:
            piece, _ = decode(view[pos:end], "strict")
        except UnicodeDecodeError as exc:
            if end < len(data) and pos + exc.end >= end:
                if exc.start == 0:
                    window *= 2  # a bad or cut sequence as long as the window: widen
                    continue
                piece, _ = decode(view[pos : pos + exc.start], "strict")
                parts.append(piece)
                cp += len(piece)
                pos += exc.start
                continue
            bad_start = pos + exc.start
            bad_end = max(pos + exc.end, bad_start + 1)
            piece, _ = decode(view[pos:bad_start], "strict")
            parts.append(piece)
            cp += len(piece)
            parts.append("\ufffd")
            replacements.append((cp, bad_start, bad_end))
            cp += 1
            pos = bad_end
        else:
            parts.append(piece)
            cp += len(piece)
            pos = end
        window = _PIECE_WINDOW
    return "".join(parts), tuple(replacements)


def _reject_binary(data: bytes, start: int, path: str | None, *, allow_utf16: bool) -> str | None:
    """Raise DecodeError for binary data; return a codec for BOM-less UTF-16 text."""
    nul = data.find(b"\x00", start)
    if nul >= 0:
        if allow_utf16:
            codec = _bomless_utf16(data)
            if codec is not None:
                return codec
        raise DecodeError(
            f"looks like a binary file, not text (NUL byte at offset {nul})", path=path
        )
    probe = data[start : start + BINARY_PROBE_BYTES]
    controls = sum(probe.count(byte) for byte in _CONTROL_BYTES)
    if controls * 20 > len(probe):
        first = min(i for i in (probe.find(byte) for byte in _CONTROL_BYTES) if i >= 0)
        raise DecodeError(
            "looks like a binary file, not text "
            f"(control byte 0x{probe[first]:02x} at offset {start + first}; "
            f"{controls} control bytes in the first {len(probe)})",
            path=path,
        )
    return None


def _bomless_utf16(data: bytes) -> str | None:
    """UTF-16 without BOM: a strict decode, no control noise, mostly plausible characters.

    Both byte orders are tried. NUL parity alone does not tell: CJK code units
    like U+4E00 put a NUL on the other side. The wrong order turns ASCII into
    U+xx00 and CJK into byte-swapped noise, so it has far fewer plausible
    characters (ASCII, common CJK, kana, Hangul, letters below U+2000).
    """
    if len(data) % 2:
        return None
    best, best_share = None, 0.5
    for codec in ("utf-16-le", "utf-16-be"):
        try:
            text = data.decode(codec)
        except UnicodeDecodeError:
            continue
        noise = plausible = 0
        for ch, n in Counter(text).items():
            if ch < " ":
                if ch in "\t\n\r\f":
                    plausible += n
                else:
                    noise += n  # NUL and other C0 controls
            elif ch < "\x7f" or (ch < "\u2000" and ch.isalpha()) or _char_class(ch) > 0:
                plausible += n
            elif _char_class(ch) < 0:
                noise += n
        share = plausible / len(text)
        if noise * 100 <= len(text) and share > best_share:
            best, best_share = codec, share
    return best


def _count_non_ascii(data: bytes) -> int:
    return len(data.translate(None, _ASCII_BYTES))


def _utf8_evidence(data: bytes) -> tuple[int, int]:
    """``(valid, invalid)`` of ``data`` read as UTF-8 (module doc, rule 5).

    ``valid``: well-formed multi-byte sequences; ``invalid``: the U+FFFDs that
    ``errors="replace"`` makes (one per maximal subpart), not counting a valid
    sequence cut off by the end of the data.
    """
    text = data.decode("utf-8", "replace")
    literal = data.count(b"\xef\xbf\xbd")  # U+FFFD in the file: a valid sequence
    invalid = text.count("\ufffd") - literal
    ascii_bytes = len(data) - _count_non_ascii(data)  # ASCII is never part of a bad piece
    valid = len(text) - ascii_bytes - invalid
    if _truncated_tail(data):
        invalid -= 1  # its one U+FFFD
    return valid, invalid


def _truncated_tail(data: bytes) -> bool:
    """Whether ``data`` ends in a valid UTF-8 sequence cut short (``E6 97`` of ``E6 97 A5``).

    That is: its last maximal subpart starts with a lead byte and is one U+FFFD
    on its own (``ED A0`` is two: a surrogate is not a valid prefix).
    """
    for k in (3, 2, 1):
        tail = data[-k:]
        if (
            len(tail) == k
            and 0xC2 <= tail[0] <= 0xF4
            and tail.decode("utf-8", "replace") == "\ufffd"
        ):
            return True
    return False


def _is_damaged_utf8(valid: int, invalid: int) -> bool:
    """Not strict UTF-8, but valid multi-byte sequences clearly dominate (rule 5)."""
    return valid >= DAMAGED_UTF8_MIN_VALID and valid >= DAMAGED_UTF8_VALID_PER_INVALID * invalid


@dataclass(frozen=True)
class _Utf8Reading:
    """What reading a file as UTF-8 makes and breaks (module doc, rule 7)."""

    plausible: int  # valid sequences decoding to characters text uses, no U+FFFD beside
    implausible: int  # valid sequences decoding to characters no text uses
    damaged: int  # broken characters: one per run of U+FFFDs per 4 pieces
    glued: int  # of the plausible ones, those with an ASCII letter beside them

    @property
    def outweighs(self) -> bool:
        """The valid sequences at least match what the UTF-8 reading breaks."""
        return (
            self.plausible >= DAMAGED_UTF8_MIN_VALID
            and self.plausible >= self.damaged + self.implausible
        )

    @property
    def in_latin_words(self) -> bool:
        """Most plausible sequences sit in ASCII words ("café"): not CJK prose."""
        return 2 * self.glued >= self.plausible


def _utf8_reading(data: bytes) -> _Utf8Reading:
    text = data.decode("utf-8", "replace")
    plausible = implausible = glued = 0
    for match in _NON_ASCII_CHAR.finditer(text):
        ch, i = match.group(), match.start()
        before = text[i - 1] if i else " "
        after = text[i + 1] if i + 1 < len(text) else " "
        kind = _utf8_char_kind(ch)
        if kind < 0:
            implausible += 1
        elif kind > 0 and before != "\ufffd" and after != "\ufffd":
            # Beside damage it may be a chance pair inside legacy CJK bytes.
            plausible += 1
            glued += before.isascii() and before.isalpha() or after.isascii() and after.isalpha()
    runs = [len(run) for run in _REPLACEMENT_RUN.findall(text)]
    if runs and _truncated_tail(data) and text.endswith("\ufffd"):
        runs[-1] -= 1  # the cut-off last character is not damage (rule 5)
    # A broken character is at most 4 bytes, so a longer run of pieces (legacy CJK
    # text) is several broken characters; ED A0 80 (3 pieces) is one.
    damaged = sum(-(-pieces // UTF8_MAX_CHAR_BYTES) for pieces in runs)
    return _Utf8Reading(plausible, implausible, damaged, glued)


@lru_cache(maxsize=65536)
def _utf8_char_kind(ch: str) -> int:
    """+1 a character text uses, -1 one no text uses, 0 neither (module doc, rule 7).

    ``ch`` is what a valid UTF-8 sequence decoded to (U+FFFD is neither: it is
    the damage, counted apart).
    """
    code = ord(ch)
    kind = _char_class(ch)  # common CJK, kana, Hangul, CJK punctuation; C1, private use
    if kind:
        return kind
    if (
        0x00A0 <= code <= 0x024F  # Latin-1 symbols and letters, Latin Extended-A/B
        or 0x0370 <= code <= 0x04FF  # Greek, Cyrillic
        or 0x1E00 <= code <= 0x1EFF  # Latin Extended Additional (Vietnamese)
        or 0x2000 <= code <= 0x206F  # general punctuation
        or 0x20A0 <= code <= 0x20BF  # currency
        or 0x2100 <= code <= 0x215F  # letterlike symbols (™, №), fractions
        or 0x1F300 <= code <= 0x1FAFF  # emoji
    ):
        return 1
    if (
        0x0780 <= code <= 0x08FF  # Thaana, NKo (DF xx: "ß“" in German), Samaritan, ...
        or 0xFB50 <= code <= 0xFDFF  # Arabic presentation forms
        or 0xFE70 <= code <= 0xFEFF
    ):
        return -1
    return 0


def _sample(data: bytes, size: int) -> bytes:
    """Up to ``size`` bytes from the start of the first line with a non-ASCII byte.

    Cut at line starts: LF (0x0A) is never a trail byte in the legacy codecs we judge.
    """
    found = _NON_ASCII.search(data)
    start = data.rfind(b"\n", 0, found.start()) + 1 if found else 0
    end = start + size
    if end < len(data):
        cut = data.rfind(b"\n", start, end)
        if cut > start + size // 2:
            end = cut + 1
    return data[start:end]


def _non_ascii_lines(data: bytes, size: int) -> bytes:
    """About ``size`` bytes of the lines that hold non-ASCII bytes, in file order.

    ASCII-only lines say nothing about the codec; skipping them lets a sparse
    file (an English novel with a few accented words) be judged on all its
    evidence, not on two characters.
    """
    parts: list[bytes] = []
    total = pos = 0
    while total < size:
        found = _NON_ASCII.search(data, pos)
        if found is None:
            break
        start = max(pos, data.rfind(b"\n", 0, found.start()) + 1)
        end = data.find(b"\n", found.start()) + 1 or len(data)
        parts.append(data[start:end])
        total += end - start
        pos = end
    return b"".join(parts)


def _decode_legacy(
    data: bytes, sample: bytes, judge_sample: bytes, *, utf8_outweighs: bool = False
) -> DecodedText:
    judged = _judge_cjk(judge_sample)
    for codec in judged:
        try:
            return DecodedText(data.decode(codec), codec)
        except UnicodeDecodeError:
            continue
    if judged:
        # Damaged CJK text, unless the damage is so widespread that the judge was fooled.
        decoded = _decode_or_replace(data, judged[0], b"")
        if decoded.bad_bytes <= LOSSY_CJK_MAX_SHARE * _count_non_ascii(data):
            return decoded
    if utf8_outweighs:  # rule 7: better than any single-byte code page
        return _decode_or_replace(data, "utf-8", b"")
    for codec in _single_byte_candidates(sample):
        try:
            return DecodedText(data.decode(codec), codec)
        except UnicodeDecodeError:
            continue
    return DecodedText(data.decode("latin-1"), "latin-1")  # unreachable: latin-1 is last


def _judge_cjk(sample: bytes) -> list[str]:
    """CJK codecs whose decoding of the sample looks like CJK prose, best first."""
    scored: list[tuple[float, int, str]] = []
    for rank, codec in enumerate(_CJK_CODECS):
        score = _cjk_score(sample.decode(codec, "replace"))
        if score >= CJK_MIN_SCORE:
            scored.append((-score, rank, codec))
    return [codec for _, _, codec in sorted(scored)]


def _cjk_score(text: str) -> float:
    counts = Counter(text)
    total = good = rare = replaced = 0
    for ch, n in counts.items():
        if ch < "\x80":
            continue
        total += n
        if ch == "\ufffd":
            replaced += n
            continue
        kind = _char_class(ch)
        if kind > 0:
            good += n
        elif kind < 0:
            rare += n
    return (good - rare - 3 * replaced) / total if total else 0.0


@lru_cache(maxsize=65536)
def _char_class(ch: str) -> int:
    """+1 common in CJK prose, -1 a sign of a wrong decoding, 0 neither."""
    code = ord(ch)
    if (
        ch in _COMMON_HANZI
        or 0x3000 <= code <= 0x30FF  # CJK punctuation, kana
        or 0xFF01 <= code <= 0xFF5E  # fullwidth ASCII forms
        or 0x2010 <= code <= 0x2027  # dashes, quotes, ellipsis
        or ch in _ks_hangul()
    ):
        return 1
    if 0xF900 <= code <= 0xFAFF or 0x2F800 <= code <= 0x2FA1F:
        return -1  # compatibility ideographs: duplicates real text never needs
    if unicodedata.category(ch) in ("Co", "Cn", "Cs", "Cc"):
        return -1
    return 0


@cache
def _ks_hangul() -> frozenset[str]:
    """The 2,350 Hangul syllables of KS X 1001 (EUC-KR rows 0xB0-0xC8): common Korean."""
    pairs = bytes(
        b for lead in range(0xB0, 0xC9) for trail in range(0xA1, 0xFF) for b in (lead, trail)
    )
    return frozenset(pairs.decode("euc-kr"))


def _single_byte_candidates(sample: bytes) -> list[str]:
    """charset-normalizer's pick with the Western preference (module doc, rule 8)."""
    western = _western(sample)
    fallback = [western, "cp1252", "latin-1"]
    top: str | None = None
    for match in charset_normalizer.from_bytes(sample):
        name = _canonical(match.encoding)
        if name.startswith("utf") or name in _CJK_CODECS:
            continue  # UTF-8 already failed; CJK codecs were judged above
        if match.coherence > 0:  # 0: no language recognized (tiny samples): no evidence
            top = name
        break
    if top is None or top in _WESTERN:
        return fallback
    try:
        top_text = sample.decode(top)
    except UnicodeDecodeError:
        return fallback
    western_text = sample.decode(western)
    if top_text == western_text:
        return fallback
    if _is_latin_script(top_text) and _symbols_in_words(western_text) <= _symbols_in_words(
        top_text
    ):
        return [*fallback, top]
    return [top, *fallback]


def _western(sample: bytes) -> str:
    """cp1252 if its 0x80-0x9F punctuation is used (and defined), else latin-1."""
    if re.search(rb"[\x80-\x9f]", sample) is None:
        return "latin-1"
    try:
        sample.decode("cp1252")
    except UnicodeDecodeError:
        return "latin-1"
    return "cp1252"


def _is_latin_script(text: str) -> bool:
    letters = [ch for ch in set(_NON_ASCII_CHAR.findall(text)) if ch.isalpha()]
    latin = sum(1 for ch in letters if unicodedata.name(ch, "").startswith("LATIN"))
    return latin * 10 >= len(letters) * 9


def _symbols_in_words(text: str) -> int:
    """Non-letters between two letters (``wi¹zanie``): wrong Latin code page."""
    count = 0
    for match in _NON_ASCII_CHAR.finditer(text):
        i = match.start()
        ch = text[i]
        if (
            0 < i < len(text) - 1
            and not ch.isalpha()
            and ch not in _INWORD_PUNCTUATION
            and text[i - 1].isalpha()
            and text[i + 1].isalpha()
        ):
            count += 1
    return count
