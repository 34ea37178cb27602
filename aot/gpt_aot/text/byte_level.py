"""GPT-2's byte-level alphabet: every byte as one printable Unicode character.

vocab.json, merges.txt and Hugging Face's ByteLevel tokenizers spell token
bytes this way (a space is "Ġ"), so that a token is a plain JSON string and a
merge line splits at the space. The canonical form stores the bytes themselves;
these two maps convert between the spellings.
"""

from functools import cache


@cache
def byte_to_char() -> dict[int, str]:
    """GPT-2's bytes_to_unicode(): printable Latin-1 bytes map to themselves,
    the other 68 to U+0100 onwards, in byte order."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + extra)
            extra += 1
    return table


@cache
def char_to_byte() -> dict[str, int]:
    return {c: b for b, c in byte_to_char().items()}


def to_chars(token: bytes) -> str:
    table = byte_to_char()
    return "".join(table[b] for b in token)


def to_bytes(token: str) -> bytes | None:
    """The bytes a byte-level string spells, or None when some character is
    outside the alphabet (the string is then plain text, e.g. a special token)."""
    table = char_to_byte()
    try:
        return bytes(table[c] for c in token)
    except KeyError:
        return None
