"""Typed errors of the golden model. Each carries enough context to be printed as one line."""
from __future__ import annotations


class DlaError(Exception):
    """Base of every error the golden model raises on purpose."""


class ConfigError(DlaError):
    """An illegal register configuration, named ``UNIT.REGISTER.FIELD`` like a hardware assertion."""

    def __init__(self, where: str, message: str) -> None:
        self.where = where
        super().__init__(f"{where}: {message}")


class UnsupportedError(DlaError):
    """The operation needs a unit or feature this hardware configuration does not have (``N/A``)."""

    def __init__(self, unit: str, message: str) -> None:
        self.unit = unit
        super().__init__(message)


class RegisterError(DlaError):
    """An access to an address or name that no register of the map has."""
