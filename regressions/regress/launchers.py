"""The launchers by name: ``--launcher`` offers exactly these. Adding a launcher is one line here (a class
implementing ``regressions.regress.launcher.Launcher``)."""
from __future__ import annotations

from regressions.regress.launcher import Launcher
from regressions.regress.local import LocalLauncher
from regressions.regress.slurm import SlurmLauncher

LAUNCHERS: dict[str, type[Launcher]] = {
    "local": LocalLauncher,
    "slurm": SlurmLauncher,
}
