"""The CLI's tests build traces the way the runtime's tests do: one fixture, shared from there."""
from tests.runtime.conftest import make_trace  # noqa: F401 - a fixture

