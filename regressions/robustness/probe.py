"""The wrapper every attacked `dla` runs under: a small process (stdlib only, run as a script) that caps
the address space, starts the command in a session of its own, waits, and writes the exit status and
``getrusage(RUSAGE_CHILDREN).ru_maxrss`` to a JSON file.

Why a wrapper: Linux carries a process's RSS high-water mark across fork and exec, so a child forked
straight from the sweep (numpy and onnx loaded) would report the sweep's size, not its own.

    python probe.py RESULT.json PIDFILE -- COMMAND...
"""
from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys

ADDRESS_SPACE_LIMIT = 4 << 30


def main(argv: list[str]) -> int:
    result, pidfile, sep, *command = argv
    assert sep == "--" and command, "usage: probe.py RESULT PIDFILE -- COMMAND..."
    os.setsid()  # the attack's processes are then exactly this session (the sweep looks for survivors)
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_LIMIT, ADDRESS_SPACE_LIMIT))
    for sig in (signal.SIGINT, signal.SIGTERM):  # signals are the attack's business, aimed at the child
        signal.signal(sig, signal.SIG_IGN)
    child = subprocess.Popen(command, restore_signals=True,
                             preexec_fn=lambda: [signal.signal(s, signal.SIG_DFL) for s in (signal.SIGINT, signal.SIGTERM)])
    with open(pidfile + ".part", "w") as f:
        f.write(str(child.pid))
    os.replace(pidfile + ".part", pidfile)
    _, status = os.waitpid(child.pid, 0)
    peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    code = os.waitstatus_to_exitcode(status)
    with open(result + ".part", "w") as f:
        json.dump({"exit": code, "peak_rss_kb": peak_kb}, f)
    os.replace(result + ".part", result)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
