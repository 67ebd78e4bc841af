"""Greetings for people and crowds."""
from .core import farewell, roll_call, welcome  # noqa: F401
