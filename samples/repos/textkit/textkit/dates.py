"""Date and duration helpers that need nothing beyond the standard library."""

import datetime as _dt
import re

_DURATION_RE = re.compile(r"(\d+)([dhms])")
_SECONDS = {"d": 86400, "h": 3600, "m": 60, "s": 1}


def is_leap_year(year):
    """True for Gregorian leap years."""
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)


def days_in_month(year, month):
    """Number of days in ``month`` (1-12) of ``year``."""
    if not 1 <= month <= 12:
        raise ValueError("month must be in 1..12")
    if month == 2:
        return 29 if is_leap_year(year) else 28
    return 30 if month in (4, 6, 9, 11) else 31


def parse_duration(text):
    """Seconds in a compact duration such as ``'1h30m'`` or ``'2d 4h'``."""
    text = text.replace(" ", "")
    if not text or _DURATION_RE.sub("", text):
        raise ValueError("bad duration: %r" % text)
    return sum(int(n) * _SECONDS[u] for n, u in _DURATION_RE.findall(text))


def format_duration(seconds):
    """Compact duration for ``seconds``: ``5400`` -> ``'1h30m'``; ``0`` -> ``'0s'``."""
    if seconds < 0:
        raise ValueError("negative duration")
    parts = []
    for unit in "dhms":
        n, seconds = divmod(seconds, _SECONDS[unit])
        if n:
            parts.append("%d%s" % (n, unit))
    return "".join(parts) or "0s"


def iso_week(date):
    """ISO week number (1-53) of a ``datetime.date``."""
    return date.isocalendar()[1]


def add_months(date, months):
    """``date`` moved by ``months``, clamping the day to the target month's length."""
    index = date.month - 1 + months
    year, month = date.year + index // 12, index % 12 + 1
    day = min(date.day, days_in_month(year, month))
    return _dt.date(year, month, day)


def weekday_name(date):
    """English name of the weekday of ``date``."""
    return ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday",
            "Saturday", "Sunday"][date.weekday()]


def _easter_month_day(year):
    """Month and day of Gregorian Easter (anonymous algorithm)."""
    a = year % 19
    b, c = divmod(year, 100)
    d, e = divmod(b, 4)
    f = (b + 8) // 25
    g = (b - f + 1) // 3
    h = (19 * a + b - d - g + 15) % 30
    i, k = divmod(c, 4)
    ell = (32 + 2 * e + 2 * i - h - k) % 7
    m = (a + 11 * h + 22 * ell) // 451
    month = (h + ell - 7 * m + 114) // 31
    day = (h + ell - 7 * m + 114) % 31 + 1
    return month, day


def easter(year):
    """Date of Western (Gregorian) Easter Sunday in ``year``."""
    month, day = _easter_month_day(year)
    return _dt.date(year, month, day)


def business_days_between(start, end):
    """Weekdays in the half-open range ``[start, end)``."""
    if end < start:
        return -business_days_between(end, start)
    days = (end - start).days
    full_weeks, rest = divmod(days, 7)
    count = full_weeks * 5
    for offset in range(rest):
        if (start.weekday() + offset) % 7 < 5:
            count += 1
    return count


def humanize_delta(seconds):
    """Rough English age for ``seconds`` ago: ``'just now'``, ``'5 minutes ago'``, ..."""
    if seconds < 45:
        return "just now"
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size:
            n = int(seconds // size)
            return "%d %s%s ago" % (n, unit, "" if n == 1 else "s")
    return "1 minute ago"


def quarter(date):
    """Calendar quarter (1-4) of ``date``."""
    return (date.month - 1) // 3 + 1
