"""A screenshot of the HTML report taken by headless Chromium, so a run shows what its readers will see.

The report is plain HTML; only a real browser proves it renders (tables, no raw Markdown, nothing cut off).
``screenshot`` loads the page with ``--headless`` in a throw-away profile and writes a PNG; ``rendered_dom``
returns the DOM after parsing (``--dump-dom``), which tests read. The browser is ``$DLA_CHROMIUM`` or the first
of ``chromium``, ``chromium-browser``, ``google-chrome`` on ``PATH`` (``make install`` installs Debian's).
Either returns a reason instead of raising: a missing browser must not cost the report.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
#: Width of the screenshot; the height follows the page (measured from the rendered DOM's length).
WIDTH = 1400
TIMEOUT = 120


def find_browser() -> str | None:
    env = os.environ.get("DLA_CHROMIUM", "").strip()
    if env:
        return env if shutil.which(env) else None
    return next((p for p in map(shutil.which, BROWSERS) if p), None)


def _run(args: list[str]) -> tuple[subprocess.CompletedProcess | None, str]:
    browser = find_browser()
    if browser is None:
        return None, "no headless Chromium (install Debian's chromium, or set DLA_CHROMIUM)"
    with tempfile.TemporaryDirectory(prefix="dla-chromium-") as profile:
        cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
               f"--user-data-dir={profile}", *args]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT,
                                  stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return None, f"Chromium did not finish within {TIMEOUT} s"
        except OSError as exc:
            return None, f"Chromium did not start: {exc}"
    return proc, ""


def rendered_dom(page: Path) -> tuple[str | None, str]:
    """The page's DOM as Chromium parsed it, or (None, reason)."""
    proc, reason = _run(["--dump-dom", Path(page).resolve().as_uri()])
    if proc is None:
        return None, reason
    if proc.returncode != 0 or "<html" not in proc.stdout:
        return None, f"Chromium exited {proc.returncode}: {proc.stderr.strip().splitlines()[-1:] or ''}"
    return proc.stdout, ""


def page_height(dom: str) -> int:
    """A height that holds the page: rows and headings take about 28 px, with room to spare."""
    rows = dom.count("<tr") + dom.count("<li") + dom.count("<h2") + dom.count("<p")
    return max(900, min(30000, 300 + 30 * rows + 500 * dom.count("<img")))


def screenshot(page: Path, png: Path) -> str:
    """Write ``png`` from ``page``; returns "" on success, else why not (the PNG is then absent)."""
    dom, reason = rendered_dom(page)
    if dom is None:
        return reason
    png = Path(png)
    tmp = png.with_name(png.name + ".tmp.png")
    proc, reason = _run([f"--window-size={WIDTH},{page_height(dom)}", f"--screenshot={tmp}", Path(page).resolve().as_uri()])
    if proc is None:
        return reason
    if not tmp.is_file() or tmp.stat().st_size == 0:
        return f"Chromium wrote no screenshot (exit {proc.returncode})"
    tmp.replace(png)
    return ""
