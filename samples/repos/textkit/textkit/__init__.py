"""textkit: small text, unit and date helpers."""

__version__ = "0.3.1"
__all__ = ["strings", "units", "dates"]
