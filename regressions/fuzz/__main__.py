"""``python -m regressions.fuzz``: see ``regressions.fuzz.driver``."""
from __future__ import annotations

import sys

from regressions.fuzz.driver import main

sys.exit(main())
