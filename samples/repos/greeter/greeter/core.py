"""Greetings built from greetlib's phrases."""
from greetlib import phrase, title_case


def welcome(name):
    """Welcome one person by name: "Hello, Ada Lovelace!"."""
    return phrase("hello", title_case(name)) + "!"


def farewell(name, formal=False):
    """Say goodbye; formally, with "Farewell" and a full stop."""
    if formal:
        return phrase("farewell", title_case(name)) + "."
    return phrase("bye", title_case(name)) + "!"


def roll_call(names):
    """One welcome per line, in alphabetical order of the names."""
    return "\n".join(welcome(n) for n in sorted(names, key=str.lower))
