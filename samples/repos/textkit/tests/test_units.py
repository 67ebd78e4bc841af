import pytest

from textkit import units as u


def test_format_bytes_small():
    assert u.format_bytes(512) == "512 B"


def test_format_bytes_binary():
    assert u.format_bytes(1536) == "1.5 KiB"
    assert u.format_bytes(1024 ** 3) == "1 GiB"


def test_format_bytes_decimal():
    assert u.format_bytes(2500000, binary=False) == "2.5 MB"


def test_parse_bytes():
    assert u.parse_bytes("1.5 KiB") == 1536
    assert u.parse_bytes("2MB") == 2000000
    assert u.parse_bytes("512") == 512


def test_parse_bytes_unknown_unit():
    with pytest.raises(ValueError):
        u.parse_bytes("3 kiB!")


def test_celsius_to_fahrenheit():
    assert u.celsius_to_fahrenheit(100) == 212
    assert u.celsius_to_fahrenheit(-40) == -40


def test_fahrenheit_to_celsius():
    assert u.fahrenheit_to_celsius(32) == 0
    assert u.fahrenheit_to_celsius(212) == pytest.approx(100)


def test_convert_length():
    assert u.convert_length(1, "mi", "km") == pytest.approx(1.609344)
    assert u.convert_length(12, "in", "ft") == pytest.approx(1)


def test_convert_length_unknown_unit():
    with pytest.raises(ValueError):
        u.convert_length(1, "parsec", "m")


def test_clamp():
    assert u.clamp(5, 0, 3) == 3
    assert u.clamp(-2, 0, 3) == 0
    assert u.clamp(2, 0, 3) == 2


def test_clamp_empty_range():
    with pytest.raises(ValueError):
        u.clamp(1, 3, 0)


def test_percent():
    assert u.percent(1, 3) == "33.3%"
    assert u.percent(1, 0) == "n/a"


def test_format_number():
    assert u.format_number(1234567) == "1,234,567"
    assert u.format_number(-1000, sep=" ") == "-1 000"
    assert u.format_number(999) == "999"


def test_to_roman():
    assert u.to_roman(1994) == "MCMXCIV"
    assert u.to_roman(3999) == "MMMCMXCIX"


def test_to_roman_out_of_range():
    with pytest.raises(ValueError):
        u.to_roman(0)


def test_from_roman():
    assert u.from_roman("MCMXCIV") == 1994
    assert u.from_roman("xiv") == 14


@pytest.mark.parametrize("n,expected", [
    (1, "1st"), (2, "2nd"), (3, "3rd"), (4, "4th"), (11, "11th"),
    (12, "12th"), (13, "13th"), (21, "21st"), (102, "102nd"),
])
def test_ordinal(n, expected):
    assert u.ordinal(n) == expected
