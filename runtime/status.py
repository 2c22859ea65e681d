"""A status line for long jobs on a terminal: one line on stderr, rewritten in place ("pass 5/9: lower",
"task 1200/400000: conv1"), so a compile of a huge layer or a run of a big batch shows it is moving. Off
when stderr is not a terminal (CI logs, pipes): those get only the real output."""
from __future__ import annotations

import shutil
import sys
import time
from typing import TextIO

#: Fewest seconds between two redraws: a run of many tiny tasks must not spend its time drawing.
REDRAW_S = 0.1


class StatusLine:
    def __init__(self, stream: TextIO | None = None, enabled: bool | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.current = ""
        self._drawn = 0.0
        self._start = time.monotonic()

    def show(self, text: str, force: bool = False) -> None:
        """Replace the line with ``text`` (and the seconds so far)."""
        self.current = text
        now = time.monotonic()
        if not self.enabled or (not force and now - self._drawn < REDRAW_S):
            return
        self._drawn = now
        width = shutil.get_terminal_size((100, 24)).columns - 1
        self.stream.write("\r\x1b[K" + f"[{now - self._start:.0f} s] {text}"[:width])
        self.stream.flush()

    def clear(self) -> None:
        """Remove the line before normal output."""
        if self.enabled and self._drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._drawn = 0.0
