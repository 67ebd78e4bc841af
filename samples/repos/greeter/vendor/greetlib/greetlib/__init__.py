"""Phrases for greetings."""

__version__ = "1.0"

_WORDS = {"hello": "Hello", "bye": "Bye", "farewell": "Farewell"}


def title_case(name):
    """Words of name capitalised, surrounding spaces dropped."""
    return " ".join(w[:1].upper() + w[1:].lower() for w in name.split())


def phrase(kind, name):
    """The greeting of that kind for name: phrase("hello", "Ada") is "Hello, Ada"."""
    return "%s, %s" % (_WORDS[kind], name)
