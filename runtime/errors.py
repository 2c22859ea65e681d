"""Errors of running a loadable that are not about the file itself (those are ``loadable.format.LoadableError``)."""
from __future__ import annotations


class ExecutionError(Exception):
    """A loadable that cannot run as asked (bad input shape, a hang, an illegal register program); one line."""
