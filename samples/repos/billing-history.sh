#!/bin/sh
# billing-history.sh DIR: make DIR a git repository holding the history of
# `billing`, a small Python invoicing package with a pytest suite: fourteen
# commits over the first half of 2024 with fixed authors and dates, so the
# commit ids are the same on every machine.  Features come with their
# tests, bug fixes with a regression test; refactors, docs and a tests-only
# commit do not change both code and tests.  One fix (the nightly import
# crash) is only findable with the production log and the ops thread in
# billing-context/, whose context.json names that commit.
set -eu
[ $# -eq 1 ] || { echo "usage: billing-history.sh DIR" >&2; exit 2; }
d=$1
mkdir -p "$d"
git -C "$d" init -q -b main
export GIT_COMMITTER_NAME GIT_COMMITTER_EMAIL GIT_AUTHOR_NAME GIT_AUTHOR_EMAIL
export GIT_AUTHOR_DATE GIT_COMMITTER_DATE
# commit WHO DATE MESSAGE: everything in DIR, as WHO (maria or tom) on DATE
commit() {
  case $1 in
    maria) GIT_AUTHOR_NAME="Maria Keller" GIT_AUTHOR_EMAIL=maria@billing.example ;;
    tom) GIT_AUTHOR_NAME="Tom Okafor" GIT_AUTHOR_EMAIL=tom@billing.example ;;
  esac
  GIT_COMMITTER_NAME=$GIT_AUTHOR_NAME GIT_COMMITTER_EMAIL=$GIT_AUTHOR_EMAIL
  GIT_AUTHOR_DATE=$2 GIT_COMMITTER_DATE=$2
  git -C "$d" add -A
  git -C "$d" commit -q -m "$3"
}
mkdir -p "$d/billing" "$d/tests"

# ---- 1: the first import --------------------------------------------------
cat > "$d/pyproject.toml" <<'EOF'
[project]
name = "billing"
version = "0.1.0"
description = "Amounts, invoices and the CRM feed"
requires-python = ">=3.8"

[tool.pytest.ini_options]
testpaths = ["tests"]
pythonpath = ["."]
EOF
cat > "$d/README.md" <<'EOF'
# billing

Amounts of money, parsed and formatted.

    python3 -m pytest
EOF
cat > "$d/billing/__init__.py" <<'EOF'
"""billing: amounts, invoices and the CRM feed."""
EOF
cat > "$d/billing/money.py" <<'EOF'
"""Amounts of money: parsing what people type and formatting for display."""
from decimal import Decimal, InvalidOperation, ROUND_HALF_UP

CENT = Decimal("0.01")


def parse_amount(text):
    """Parse an amount such as "12.50" or "$12.50" into a Decimal."""
    cleaned = text.strip().lstrip("$").strip()
    try:
        value = Decimal(cleaned)
    except InvalidOperation:
        raise ValueError("not an amount: %r" % text) from None
    return value.quantize(CENT, rounding=ROUND_HALF_UP)


def format_amount(value, symbol="$"):
    """Format an amount as "$1,234.50"."""
    value = Decimal(value).quantize(CENT, rounding=ROUND_HALF_UP)
    return "%s%s" % (symbol, "{:,.2f}".format(value))
EOF
cat > "$d/tests/test_money.py" <<'EOF'
from decimal import Decimal

import pytest

from billing.money import format_amount, parse_amount


def test_parse_plain():
    assert parse_amount("12.5") == Decimal("12.50")


def test_parse_with_symbol_and_spaces():
    assert parse_amount("  $ 7.25 ") == Decimal("7.25")


def test_parse_rounds_to_the_cent():
    assert parse_amount("0.125") == Decimal("0.13")


def test_parse_rejects_words():
    with pytest.raises(ValueError):
        parse_amount("twelve")


def test_format_groups_thousands():
    assert format_amount(Decimal("1234.5")) == "$1,234.50"


def test_format_other_symbol():
    assert format_amount(3, symbol="EUR ") == "EUR 3.00"
EOF
commit maria 2024-01-08T09:12:00Z "Initial import: parse and format amounts"

# ---- 2: invoices (a feature with its tests) ---------------------------------
cat > "$d/billing/invoice.py" <<'EOF'
"""Invoices: lines of quantity times unit price, and their total."""
from dataclasses import dataclass, field
from decimal import Decimal

from .money import parse_amount


@dataclass
class Line:
    description: str
    quantity: int
    unit_price: Decimal

    @property
    def amount(self):
        return self.unit_price * self.quantity


@dataclass
class Invoice:
    number: str
    lines: list = field(default_factory=list)

    def add(self, description, quantity, unit_price):
        """Add a line; unit_price may be text such as "$9.99"."""
        if isinstance(unit_price, str):
            unit_price = parse_amount(unit_price)
        self.lines.append(Line(description, quantity, Decimal(unit_price)))
        return self

    def total(self):
        """The sum of the lines."""
        return sum((line.amount for line in self.lines), Decimal("0.00"))
EOF
cat > "$d/tests/test_invoice.py" <<'EOF'
from decimal import Decimal

from billing.invoice import Invoice


def test_total_of_lines():
    inv = Invoice("INV-1").add("widget", 3, "$2.50").add("setup", 1, Decimal("10"))
    assert inv.total() == Decimal("17.50")


def test_empty_invoice_total():
    assert Invoice("INV-2").total() == Decimal("0.00")


def test_line_amount():
    inv = Invoice("INV-3").add("hours", 4, "80")
    assert inv.lines[0].amount == Decimal("320.00")
EOF
commit tom 2024-01-15T14:30:00Z "Add invoices with lines and a total"

# ---- 3: a refactor (no test changes) -----------------------------------------
cat > "$d/billing/money.py" <<'EOF'
"""Amounts of money: parsing what people type and formatting for display."""
from decimal import Decimal, InvalidOperation, ROUND_HALF_UP

CENT = Decimal("0.01")


def _quantize(value):
    """value to the cent, halves away from zero."""
    return Decimal(value).quantize(CENT, rounding=ROUND_HALF_UP)


def parse_amount(text):
    """Parse an amount such as "12.50" or "$12.50" into a Decimal."""
    cleaned = text.strip().lstrip("$").strip()
    try:
        value = Decimal(cleaned)
    except InvalidOperation:
        raise ValueError("not an amount: %r" % text) from None
    return _quantize(value)


def format_amount(value, symbol="$"):
    """Format an amount as "$1,234.50"."""
    return "%s%s" % (symbol, "{:,.2f}".format(_quantize(value)))
EOF
commit maria 2024-01-22T10:05:00Z "money: one rounding helper for parse and format"

# ---- 4: a bug fix with a regression test ---------------------------------------
cat > "$d/billing/money.py" <<'EOF'
"""Amounts of money: parsing what people type and formatting for display."""
from decimal import Decimal, InvalidOperation, ROUND_HALF_UP

CENT = Decimal("0.01")


def _quantize(value):
    """value to the cent, halves away from zero."""
    return Decimal(value).quantize(CENT, rounding=ROUND_HALF_UP)


def parse_amount(text):
    """Parse an amount such as "12.50" or "$12.50" into a Decimal."""
    cleaned = text.strip().lstrip("$").strip()
    try:
        value = Decimal(cleaned)
    except InvalidOperation:
        raise ValueError("not an amount: %r" % text) from None
    return _quantize(value)


def format_amount(value, symbol="$"):
    """Format an amount as "$1,234.50", a negative one as "-$5.00"."""
    value = _quantize(value)
    sign = "-" if value < 0 else ""
    return "%s%s%s" % (sign, symbol, "{:,.2f}".format(abs(value)))
EOF
cat >> "$d/tests/test_money.py" <<'EOF'


def test_format_negative_puts_the_sign_first():
    assert format_amount(Decimal("-5")) == "-$5.00"
    assert format_amount(Decimal("-1234.5")) == "-$1,234.50"
EOF
commit tom 2024-02-05T16:45:00Z "Fix the sign of negative amounts: -\$5.00, not \$-5.00

Credit notes showed \"\$-5.00\" on the printed invoice."

# ---- 5: docs only -------------------------------------------------------------------
cat > "$d/README.md" <<'EOF'
# billing

Amounts of money, parsed and formatted, and invoices made of lines.

```python
from billing.invoice import Invoice
Invoice("INV-1").add("widget", 3, "$2.50").total()   # Decimal('7.50')
```

Run the tests with `python3 -m pytest`.
EOF
commit maria 2024-02-12T11:20:00Z "README: the invoice API"

# ---- 6: a feature -----------------------------------------------------------------------
cat > "$d/billing/invoice.py" <<'EOF'
"""Invoices: lines of quantity times unit price, and their total."""
from dataclasses import dataclass, field
from decimal import Decimal

from .money import _quantize, parse_amount


@dataclass
class Line:
    description: str
    quantity: int
    unit_price: Decimal

    @property
    def amount(self):
        return self.unit_price * self.quantity


@dataclass
class Invoice:
    number: str
    lines: list = field(default_factory=list)
    discount_percent: Decimal = Decimal("0")

    def add(self, description, quantity, unit_price):
        """Add a line; unit_price may be text such as "$9.99"."""
        if isinstance(unit_price, str):
            unit_price = parse_amount(unit_price)
        self.lines.append(Line(description, quantity, Decimal(unit_price)))
        return self

    def subtotal(self):
        """The sum of the lines."""
        return sum((line.amount for line in self.lines), Decimal("0.00"))

    def discount(self):
        """What the discount takes off the subtotal, to the cent."""
        return _quantize(self.subtotal() * Decimal(self.discount_percent) / 100)

    def total(self):
        """The subtotal less the discount."""
        return self.subtotal() - self.discount()
EOF
cat >> "$d/tests/test_invoice.py" <<'EOF'


def test_discount_comes_off_the_total():
    inv = Invoice("INV-4", discount_percent=Decimal("10")).add("widget", 4, "$2.50")
    assert inv.subtotal() == Decimal("10.00")
    assert inv.discount() == Decimal("1.00")
    assert inv.total() == Decimal("9.00")


def test_discount_rounds_to_the_cent():
    inv = Invoice("INV-5", discount_percent=Decimal("15")).add("item", 1, "0.99")
    assert inv.discount() == Decimal("0.15")
EOF
commit tom 2024-02-26T09:40:00Z "Invoices take a percentage discount"

# ---- 7: the CRM feed (a feature) ---------------------------------------------------------
cat > "$d/billing/feed.py" <<'EOF'
"""The CRM's nightly feed of invoice lines, and the CSV the accounts get."""
import csv
import io

from .invoice import Invoice
from .money import format_amount


def read_feed(text):
    """Invoices from the feed: one "number;description;quantity;unit price"
    per line; blank lines and # comments are skipped."""
    invoices = {}
    for row in text.splitlines():
        if not row.strip() or row.startswith("#"):
            continue
        number, description, quantity, price = [f.strip() for f in row.split(";")]
        inv = invoices.setdefault(number, Invoice(number))
        inv.add(description, int(quantity), price)
    return list(invoices.values())


def to_csv(invoices):
    """number,lines,total for each invoice, with a header."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["number", "lines", "total"])
    for inv in invoices:
        w.writerow([inv.number, len(inv.lines), format_amount(inv.total())])
    return out.getvalue()
EOF
cat > "$d/tests/test_feed.py" <<'EOF'
from decimal import Decimal

from billing.feed import read_feed, to_csv

FEED = """# number;description;quantity;unit price
INV-10;widget;2;$3.00
INV-10;setup;1;25
INV-11;hours;3;80.00
"""


def test_feed_groups_lines_by_invoice():
    invs = read_feed(FEED)
    assert [i.number for i in invs] == ["INV-10", "INV-11"]
    assert invs[0].total() == Decimal("31.00")


def test_csv_has_a_header_and_a_row_per_invoice():
    assert to_csv(read_feed(FEED)) == (
        "number,lines,total\nINV-10,2,$31.00\nINV-11,1,$240.00\n")
EOF
commit maria 2024-03-01T13:15:00Z "Read the CRM's nightly feed and write the accounts CSV"

# ---- 8: a refactor ----------------------------------------------------------------------------
cat > "$d/billing/feed.py" <<'EOF'
"""The CRM's nightly feed of invoice lines, and the CSV the accounts get."""
import csv
import io

from .invoice import Invoice
from .money import format_amount

HEADER = ["number", "lines", "total"]


def _rows(text):
    """The fields of each line that is not blank or a # comment."""
    for row in text.splitlines():
        if row.strip() and not row.startswith("#"):
            yield [f.strip() for f in row.split(";")]


def read_feed(text):
    """Invoices from the feed: one "number;description;quantity;unit price"
    per line; blank lines and # comments are skipped."""
    invoices = {}
    for number, description, quantity, price in _rows(text):
        invoices.setdefault(number, Invoice(number)).add(description, int(quantity), price)
    return list(invoices.values())


def to_csv(invoices):
    """number,lines,total for each invoice, with a header."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(HEADER)
    for inv in invoices:
        w.writerow([inv.number, len(inv.lines), format_amount(inv.total())])
    return out.getvalue()
EOF
commit tom 2024-03-05T17:02:00Z "feed: split the row reader out of read_feed"

# ---- 9: the fix that needs the production log -----------------------------------------------
cat > "$d/billing/money.py" <<'EOF'
"""Amounts of money: parsing what people type and formatting for display."""
from decimal import Decimal, InvalidOperation, ROUND_HALF_UP

CENT = Decimal("0.01")


def _quantize(value):
    """value to the cent, halves away from zero."""
    return Decimal(value).quantize(CENT, rounding=ROUND_HALF_UP)


def _ungroup(text):
    """Drop the thousands grouping: whichever of '.' and ',' comes last is
    the decimal separator ("1,234.50" and "1.234,50" are both 1234.50)."""
    if text.rfind(",") > text.rfind("."):
        return text.replace(".", "").replace(",", ".")
    return text.replace(",", "")


def parse_amount(text):
    """Parse an amount such as "12.50", "$1,234.50" or "1.234,50" into a
    Decimal."""
    cleaned = _ungroup(text.strip().lstrip("$").strip())
    try:
        value = Decimal(cleaned)
    except InvalidOperation:
        raise ValueError("not an amount: %r" % text) from None
    return _quantize(value)


def format_amount(value, symbol="$"):
    """Format an amount as "$1,234.50", a negative one as "-$5.00"."""
    value = _quantize(value)
    sign = "-" if value < 0 else ""
    return "%s%s%s" % (sign, symbol, "{:,.2f}".format(abs(value)))
EOF
cat >> "$d/tests/test_feed.py" <<'EOF'


def test_the_row_that_stopped_the_nightly_import():
    invs = read_feed("INV-20931;Wartungsvertrag Q2;1;1.234,50\n")
    assert invs[0].total() == Decimal("1234.50")
EOF
cat >> "$d/tests/test_money.py" <<'EOF'


def test_parse_grouped_amounts():
    assert parse_amount("$1,234.50") == Decimal("1234.50")
    assert parse_amount("1.234,50") == Decimal("1234.50")
    assert parse_amount("2.000.000,00") == Decimal("2000000.00")
EOF
commit tom 2024-03-12T10:31:00Z "Fix the nightly import crash

The import stopped on a row from one of the new accounts and wrote no
invoices that night (ops thread and production log in the ticket).
Closes #41."

# ---- 10: sales tax (a feature) -----------------------------------------------------------------
cat > "$d/billing/tax.py" <<'EOF'
"""Sales tax by region."""
from decimal import Decimal

RATES = {
    "CA": Decimal("0.0725"),
    "NY": Decimal("0.04"),
    "OR": Decimal("0"),
    "TX": Decimal("0.0625"),
}


def tax_for(amount, region):
    """The tax on amount in region (a two-letter code), to the cent."""
    if region not in RATES:
        raise KeyError("no tax rate for region %r" % region)
    return (Decimal(amount) * RATES[region]).quantize(Decimal("0.01"))
EOF
cat > "$d/tests/test_tax.py" <<'EOF'
from decimal import Decimal

import pytest

from billing.tax import tax_for


def test_tax_in_new_york():
    assert tax_for(Decimal("100.00"), "NY") == Decimal("4.00")


def test_no_tax_in_oregon():
    assert tax_for(Decimal("99.99"), "OR") == Decimal("0.00")


def test_unknown_region():
    with pytest.raises(KeyError):
        tax_for(Decimal("1"), "ZZ")
EOF
commit maria 2024-04-02T08:55:00Z "Add sales tax by region"

# ---- 11: a bug fix with a regression test ---------------------------------------------------------
cat > "$d/billing/tax.py" <<'EOF'
"""Sales tax by region."""
from decimal import Decimal

from .money import _quantize

RATES = {
    "CA": Decimal("0.0725"),
    "NY": Decimal("0.04"),
    "OR": Decimal("0"),
    "TX": Decimal("0.0625"),
}


def tax_for(amount, region):
    """The tax on amount in region (a two-letter code), to the cent, halves
    rounded up as the tax office does."""
    if region not in RATES:
        raise KeyError("no tax rate for region %r" % region)
    return _quantize(Decimal(amount) * RATES[region])
EOF
cat >> "$d/tests/test_tax.py" <<'EOF'


def test_half_cents_round_up():
    # 0.40 * 6.25 % = 0.025: the tax office wants 0.03, not the banker's 0.02
    assert tax_for(Decimal("0.40"), "TX") == Decimal("0.03")
EOF
commit tom 2024-04-16T15:20:00Z "tax: round half cents up, not to even

Audit found Texas invoices a cent short on some small lines."

# ---- 12: a refactor -------------------------------------------------------------------------------------
cat > "$d/billing/invoice.py" <<'EOF'
"""Invoices: lines of quantity times unit price, and their total."""
from dataclasses import dataclass, field
from decimal import Decimal

from .money import _quantize, parse_amount

ZERO = Decimal("0.00")


@dataclass
class Line:
    description: str
    quantity: int
    unit_price: Decimal

    @property
    def amount(self):
        return self.unit_price * self.quantity


@dataclass
class Invoice:
    number: str
    lines: list = field(default_factory=list)
    discount_percent: Decimal = Decimal("0")

    def add(self, description, quantity, unit_price):
        """Add a line; unit_price may be text such as "$9.99"."""
        price = parse_amount(unit_price) if isinstance(unit_price, str) else unit_price
        self.lines.append(Line(description, quantity, Decimal(price)))
        return self

    def subtotal(self):
        """The sum of the lines."""
        return sum((line.amount for line in self.lines), ZERO)

    def discount(self):
        """What the discount takes off the subtotal, to the cent."""
        return _quantize(self.subtotal() * Decimal(self.discount_percent) / 100)

    def total(self):
        """The subtotal less the discount."""
        return self.subtotal() - self.discount()
EOF
commit maria 2024-05-06T12:10:00Z "invoice: name the zero, read add() in one line"

# ---- 13: tests only ------------------------------------------------------------------------------------------
cat >> "$d/tests/test_invoice.py" <<'EOF'


def test_discount_on_an_empty_invoice():
    assert Invoice("INV-6", discount_percent=Decimal("50")).total() == Decimal("0.00")
EOF
commit tom 2024-05-20T09:00:00Z "tests: a discount on an empty invoice"

# ---- 14: code and a test that passed before (no failing test to reach) ---------------------------
cat > "$d/billing/tax.py" <<'EOF'
"""Sales tax by region."""
from decimal import Decimal

from .money import _quantize

RATES = {
    "CA": Decimal("0.0725"),
    "NY": Decimal("0.04"),
    "OR": Decimal("0"),
    "TX": Decimal("0.0625"),
}


def tax_for(amount, region):
    """The tax on amount in region (a two-letter code), to the cent, halves
    rounded up as the tax office does."""
    rate = RATES.get(region)
    if rate is None:
        raise KeyError("no tax rate for region %r" % region)
    return _quantize(Decimal(amount) * rate)
EOF
cat >> "$d/tests/test_tax.py" <<'EOF'


def test_every_region_has_a_rate_below_ten_percent():
    for region in ("CA", "NY", "OR", "TX"):
        assert tax_for(Decimal("100"), region) < Decimal("10")
EOF
commit maria 2024-06-03T14:45:00Z "tax: one dictionary lookup; a test over every region"
