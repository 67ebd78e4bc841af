"""Unit formatting and conversion: bytes, temperatures, lengths, numbers."""

_BINARY = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"]
_DECIMAL = ["B", "kB", "MB", "GB", "TB", "PB"]

_LENGTH_IN_METRES = {
    "mm": 0.001,
    "cm": 0.01,
    "m": 1.0,
    "km": 1000.0,
    "in": 0.0254,
    "ft": 0.3048,
    "yd": 0.9144,
    "mi": 1609.344,
}


def format_bytes(n, binary=True):
    """Human-readable size: ``1536`` -> ``'1.5 KiB'`` (``binary=False``: powers of 1000)."""
    base = 1024 if binary else 1000
    names = _BINARY if binary else _DECIMAL
    value = float(n)
    for name in names:
        if abs(value) < base or name == names[-1]:
            if name == "B":
                return "%d B" % n
            return ("%.1f %s" % (value, name)).replace(".0 ", " ")
        value /= base
    raise AssertionError("unreachable")


def parse_bytes(text):
    """Parse a size such as ``'1.5 KiB'``, ``'2MB'`` or ``'512'`` into bytes."""
    text = text.strip()
    number = text.rstrip("KMGTPiBkb ")
    unit = text[len(number):].strip()
    value = float(number)
    if not unit or unit == "B":
        return int(value)
    table = _BINARY if "i" in unit else _DECIMAL
    base = 1024 if "i" in unit else 1000
    for power, name in enumerate(table):
        if name.lower() == unit.lower():
            return int(round(value * base ** power))
    raise ValueError("unknown unit: %r" % unit)


def celsius_to_fahrenheit(c):
    """Convert degrees Celsius to Fahrenheit."""
    return c * 9.0 / 5.0 + 32.0


def fahrenheit_to_celsius(f):
    """Convert degrees Fahrenheit to Celsius."""
    return (f - 32.0) * 5.0 / 9.0


def _length_factor(unit):
    """Metres per ``unit``; raises ValueError for an unknown unit."""
    try:
        return _LENGTH_IN_METRES[unit]
    except KeyError:
        raise ValueError("unknown length unit: %r" % unit) from None


def convert_length(value, src, dst):
    """Convert a length between units (mm, cm, m, km, in, ft, yd, mi)."""
    return value * _length_factor(src) / _length_factor(dst)


def clamp(x, lo, hi):
    """Limit ``x`` to the closed range ``[lo, hi]``."""
    if lo > hi:
        raise ValueError("empty range")
    return max(lo, min(hi, x))


def percent(part, whole, digits=1):
    """``part`` as a percentage of ``whole``, rounded, as a string with ``%``."""
    if whole == 0:
        return "n/a"
    return "%.*f%%" % (digits, 100.0 * part / whole)


def _group_thousands(digits, sep):
    """Insert ``sep`` every three digits from the right."""
    groups = []
    while len(digits) > 3:
        groups.insert(0, digits[-3:])
        digits = digits[:-3]
    groups.insert(0, digits)
    return sep.join(groups)


def format_number(n, sep=","):
    """Integer with thousands separators: ``1234567`` -> ``'1,234,567'``."""
    sign = "-" if n < 0 else ""
    return sign + _group_thousands(str(abs(int(n))), sep)


_ROMAN = [(1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"),
          (90, "XC"), (50, "L"), (40, "XL"), (10, "X"), (9, "IX"), (5, "V"),
          (4, "IV"), (1, "I")]


def to_roman(n):
    """Roman numeral for ``1 <= n <= 3999``."""
    if not 0 < n < 4000:
        raise ValueError("out of range")
    out = []
    for value, numeral in _ROMAN:
        while n >= value:
            out.append(numeral)
            n -= value
    return "".join(out)


def from_roman(text):
    """Integer value of a Roman numeral (subtractive notation)."""
    values = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}
    total = 0
    for i, c in enumerate(text.upper()):
        v = values[c]
        if i + 1 < len(text) and values[text[i + 1].upper()] > v:
            total -= v
        else:
            total += v
    return total


def ordinal(n):
    """English ordinal: ``1`` -> ``'1st'``, ``12`` -> ``'12th'``, ``23`` -> ``'23rd'``."""
    if 10 <= n % 100 <= 20:
        suffix = "th"
    else:
        suffix = {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return "%d%s" % (n, suffix)
