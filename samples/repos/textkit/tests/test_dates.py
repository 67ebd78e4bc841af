import datetime

import pytest

from textkit import dates as d


def test_is_leap_year():
    assert d.is_leap_year(2024)
    assert not d.is_leap_year(1900)
    assert d.is_leap_year(2000)


def test_days_in_month():
    assert d.days_in_month(2023, 2) == 28
    assert d.days_in_month(2024, 2) == 29
    assert d.days_in_month(2024, 4) == 30
    assert d.days_in_month(2024, 12) == 31


def test_days_in_month_bad_month():
    with pytest.raises(ValueError):
        d.days_in_month(2024, 13)


def test_parse_duration():
    assert d.parse_duration("1h30m") == 5400
    assert d.parse_duration("2d 4h") == 2 * 86400 + 4 * 3600


def test_parse_duration_rejects_garbage():
    with pytest.raises(ValueError):
        d.parse_duration("3 weeks")


def test_format_duration():
    assert d.format_duration(5400) == "1h30m"
    assert d.format_duration(0) == "0s"
    assert d.format_duration(90061) == "1d1h1m1s"


def test_iso_week():
    assert d.iso_week(datetime.date(2021, 1, 3)) == 53
    assert d.iso_week(datetime.date(2024, 6, 15)) == 24


def test_add_months_clamps_day():
    assert d.add_months(datetime.date(2024, 1, 31), 1) == datetime.date(2024, 2, 29)


def test_add_months_across_years():
    assert d.add_months(datetime.date(2023, 11, 15), 3) == datetime.date(2024, 2, 15)
    assert d.add_months(datetime.date(2024, 1, 15), -2) == datetime.date(2023, 11, 15)


def test_weekday_name():
    assert d.weekday_name(datetime.date(2024, 7, 4)) == "Thursday"


@pytest.mark.parametrize("year,month,day", [
    (2024, 3, 31), (2025, 4, 20), (2019, 4, 21), (2000, 4, 23),
])
def test_easter(year, month, day):
    assert d.easter(year) == datetime.date(year, month, day)


def test_business_days_between():
    mon = datetime.date(2024, 7, 1)
    assert d.business_days_between(mon, mon + datetime.timedelta(days=7)) == 5
    assert d.business_days_between(mon, mon + datetime.timedelta(days=12)) == 10


def test_business_days_between_reversed():
    mon = datetime.date(2024, 7, 1)
    assert d.business_days_between(mon + datetime.timedelta(days=7), mon) == -5


def test_humanize_delta():
    assert d.humanize_delta(10) == "just now"
    assert d.humanize_delta(300) == "5 minutes ago"
    assert d.humanize_delta(3600) == "1 hour ago"
    assert d.humanize_delta(3 * 86400) == "3 days ago"


def test_quarter():
    assert d.quarter(datetime.date(2024, 1, 1)) == 1
    assert d.quarter(datetime.date(2024, 6, 30)) == 2
    assert d.quarter(datetime.date(2024, 12, 31)) == 4
