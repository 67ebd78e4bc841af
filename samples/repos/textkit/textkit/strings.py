"""String helpers: case conversion, slugs, wrapping and friends."""

import re
import unicodedata

_WORD_RE = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")


def _split_words(text):
    """Split identifiers or prose into lowercase words."""
    return [w.lower() for w in _WORD_RE.findall(text)]


def snake_case(text):
    """Convert ``text`` to snake_case.

    >>> snake_case("parseHTTPResponse")
    'parse_http_response'
    """
    return "_".join(_split_words(text))


def camel_case(text):
    """Convert ``text`` to lowerCamelCase."""
    words = _split_words(text)
    if not words:
        return ""
    return words[0] + "".join(w.capitalize() for w in words[1:])


def kebab_case(text):
    """Convert ``text`` to kebab-case."""
    return "-".join(_split_words(text))


def _strip_accents(text):
    """Drop combining marks after NFKD normalization."""
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def slugify(text, sep="-"):
    """Make a URL slug: ASCII letters and digits joined by ``sep``.

    >>> slugify("Crème Brûlée, 2 ways!")
    'creme-brulee-2-ways'
    """
    ascii_text = _strip_accents(text).encode("ascii", "ignore").decode()
    parts = re.findall(r"[a-z0-9]+", ascii_text.lower())
    return sep.join(parts)


def truncate(text, width, ellipsis="..."):
    """Shorten ``text`` to at most ``width`` characters, ending in ``ellipsis``."""
    if width < 0:
        raise ValueError("width must be non-negative")
    if len(text) <= width:
        return text
    if width <= len(ellipsis):
        return ellipsis[:width]
    return text[: width - len(ellipsis)].rstrip() + ellipsis


def wrap(text, width):
    """Greedy word wrap; returns a list of lines no longer than ``width``.

    Words longer than ``width`` are placed on a line of their own.
    """
    if width < 1:
        raise ValueError("width must be positive")
    lines, current = [], ""
    for word in text.split():
        if not current:
            current = word
        elif len(current) + 1 + len(word) <= width:
            current += " " + word
        else:
            lines.append(current)
            current = word
    if current:
        lines.append(current)
    return lines


def count_words(text):
    """Count words (runs of letters, digits or apostrophes)."""
    return len(re.findall(r"[\w']+", text))


def is_palindrome(text):
    """True if ``text`` reads the same backwards, ignoring case and punctuation."""
    letters = [c.lower() for c in text if c.isalnum()]
    return letters == letters[::-1]


def _collapse_runs(text):
    """Collapse runs of whitespace into single spaces."""
    return re.sub(r"\s+", " ", text)


def normalize_space(text):
    """Trim ``text`` and collapse inner whitespace to single spaces."""
    return _collapse_runs(text).strip()


def initials(name):
    """Initials of a personal name: ``"ada king lovelace"`` -> ``"AKL"``."""
    return "".join(part[0].upper() for part in name.split() if part)


def pluralize(word, count):
    """English plural of ``word`` for ``count`` items (regular rules only)."""
    if count == 1:
        return word
    if re.search(r"(s|x|z|ch|sh)$", word):
        return word + "es"
    if re.search(r"[^aeiou]y$", word):
        return word[:-1] + "ies"
    return word + "s"


def levenshtein(a, b):
    """Edit distance between ``a`` and ``b`` (insert, delete, substitute)."""
    if len(a) < len(b):
        a, b = b, a
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            cost = 0 if ca == cb else 1
            current.append(min(previous[j] + 1, current[j - 1] + 1,
                               previous[j - 1] + cost))
        previous = current
    return previous[-1]


def rot13(text):
    """Apply the ROT13 substitution to ASCII letters."""
    out = []
    for c in text:
        if "a" <= c <= "z":
            out.append(chr((ord(c) - 97 + 13) % 26 + 97))
        elif "A" <= c <= "Z":
            out.append(chr((ord(c) - 65 + 13) % 26 + 65))
        else:
            out.append(c)
    return "".join(out)
