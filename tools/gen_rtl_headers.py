#!/usr/bin/env python3
"""Regenerate rtl/generated/ or write a config's dla_config.vh; the generator is tb.rtl_headers."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tb.rtl_headers import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
