"""Strings that stress a byte-level BPE encoder where implementations tend to
differ: whitespace runs, contractions, digits of every script, scripts without
spaces, combining marks, emoji sequences, ligatures, control characters and
very long words. `HARD_STRINGS` holds well over 200 of them."""

CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d"]

WHITESPACE = [
    " ",
    "  ",
    "   ",
    "\t",
    "\n",
    "\n\n",
    "\r\n",
    " \n ",
    "a  b",
    "a   b",
    "a\tb",
    "a \t b",
    "a\n\nb",
    "a \n\n b",
    "  leading",
    "trailing  ",
    "   both   ",
    "\n leading newline",
    "line\n",
    "line \n",
    "x\u00a0y",
    "x\u2009y",
    "x\u3000y",
    "x\u2028y",
    "x\u2029y",
    "x\u0085y",
    "x \u0085 y",
    "\u200b",
    "x\u200by",
    "\u1680a",
    "a\u202f b",
    "\x0b\x0c",
    " \x0b ",
    "end with spaces   ",
    "\t\t\tindented",
    "    def f():\n        return 1\n",
]

CASES = ["Hello", "hello", "HELLO", "hELLo"]

DIGITS = [
    "0",
    "12",
    "123",
    "1234",
    "12345",
    "3.14159",
    "1,000,000",
    "2026-11-25",
    "v1.2.3",
    "0x1F600",
    "1e-5",
    "٠١٢٣٤٥٦٧٨٩",
    "۰۱۲۳",
    "०१२३४",
    "০১২৩",
    "๐๑๒๓",
    "１２３",
    "①②③",
    "Ⅻ",
    "½ ¾",
    "x²",
    "𝟘𝟙𝟚",
    "፩፪",
    "〇一二",
    " 42",
    "a1b2c3",
    "1st 2nd 3rd",
    "100%",
    "$5.99",
    "€10",
    "-7",
    "+1 (555) 010-9999",
]

SCRIPTS = [
    "日本語のテキストです。",
    "中文文本，没有空格。",
    "한국어 텍스트입니다",
    "Привет, мир!",
    "Ελληνικά κείμενα",
    "مرحبا بالعالم",
    "السَّلَامُ عَلَيْكُمْ",
    "שלום עולם",
    "नमस्ते दुनिया",
    "ভাষা",
    "தமிழ்",
    "ภาษาไทยไม่มีช่องว่าง",
    "ພາສາລາວ",
    "မြန်မာ",
    "ქართული",
    "Հայերեն",
    "አማርኛ",
    "ᚠᚢᚦᚨᚱᚲ",
    "𐌰𐌱𐌲",
    "ꦗꦮ",
    "Tiếng Việt có dấu",
    "Ä Ö Ü ß ẞ",
    "ǅemal",
    "İstanbul ıi",
    "Ωmega ω",
    "Dž dž DŽ",
]

COMBINING = [
    "e\u0301",
    "cafe\u0301",
    "n\u0303",
    "a\u0300\u0301\u0302\u0303",
    "Z\u0351\u0352\u0353\u0354\u0355",
    "\u0301",
    " \u0301",
    "\u0301abc",
    "क्षि",
    "ﷺ",
    "e\u0301\u0301\u0301\u0301",
    "ḁ̶̢",
    "a\u034fb",
    "x\u20dd",
]

EMOJI = [
    "👍",
    "👍🏽",
    "👍🏿 ok",
    "👨‍👩‍👧‍👦",
    "👩🏽‍💻",
    "🏳️‍🌈",
    "🇩🇪🇫🇷",
    "❤️",
    "❤\ufe0e",
    "☺️",
    "🧑🏻‍🤝‍🧑🏿",
    "🤷‍♀️",
    "1️⃣",
    "#️⃣",
    "🏴󠁧󠁢󠁳󠁣󠁴󠁿",
    "emoji👍in👍text",
    "👍👍👍👍👍👍",
    " 👍",
    "😀😃😄😁",
    "🫠🫨",
]

LIGATURES = ["ﬁ", "ﬂ", "ﬃ", "ﬁnance", "Æsir æ", "œuvre", "ĳ", "ǆ", "Å vs Å", "ﬀ ﬅ ﬆ", "㎏ ㎞", "™ ℠ ©"]

CONTROL = [
    "\x00",
    "a\x00b",
    "\x01\x02\x03",
    "\x07bell",
    "\x1b[31mred\x1b[0m",
    "\x7f",
    "\u0080\u009f",
    "\u0080",
    "\u009f",
    "\ufeffBOM",
    "\ufffd",
    "\uffff",
    "\U0010fffd",
    "\u200e\u200f",
    "\u202etxet",
    "\ue000",
    "<|endoftext|>",
    "<|endoftext|> after",
    "text<|endoftext|>text",
    "<|endoftext",
    "|>",
    "<||>",
]

LONG = [
    "a" * 1000,
    "ab" * 700,
    "Pneumonoultramicroscopicsilicovolcanoconiosis" * 20,
    "🙂" * 300,
    " " * 2000 + "x",
    "\n" * 500,
    "x" + " " * 1500,
    "日本" * 500,
    "1234567890" * 150,
    "https://example.com/" + "path/" * 200 + "?q=" + "z" * 300,
    "".join(chr(0x4E00 + i) for i in range(800)),
    "-" * 1200,
    "=_" * 600,
]

MIXED = [
    "Don't stop—won't stop.",
    "I'M HERE, YOU'RE THERE",
    "rock 'n' roll",
    "'quoted'",
    "''",
    "'",
    "it''s",
    "Mr. O'Neil's cat's toy",
    "ʼs",
    "’s",
    "don’t",
    "C++ and C#",
    "e.g., i.e., etc.",
    "<html><body>x</body></html>",
    "def f(x):\n\treturn x**2  # square",
    "SELECT * FROM t WHERE a='b';",
    '{"key": [1, 2, 3]}',
    "@user #tag",
    "email@example.com",
    "🙂 :-) ;-) ^_^",
    "...",
    "?!?!",
    "¡Hola! ¿Qué tal?",
    "«guillemets»",
    "„Anführungszeichen“",
    "The quick brown fox jumps over the lazy dog.",
    "\tMixed \n whitespace \r\n and text ",
]


def _contractions() -> list[str]:
    out = []
    for c in CONTRACTIONS:
        for case in (c, c.upper()):
            out += [f"it{case}", f"IT{case}", f"you{case} here", f" {case}", f"x {case}x", f"{case}"]
    return out


def _cased() -> list[str]:
    return [f"{word} world" for word in CASES] + [f" {word}" for word in CASES] + [word * 3 for word in CASES]


HARD_STRINGS = (
    WHITESPACE + DIGITS + SCRIPTS + COMBINING + EMOJI + LIGATURES + CONTROL + LONG + MIXED + _contractions() + _cased()
)
