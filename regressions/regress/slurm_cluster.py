"""A private single-node Slurm on this machine, for testing the Slurm launcher for real.

``SlurmCluster`` generates everything in its own temporary directory and never reads or writes
``/etc/slurm``, ``/etc/munge`` or a system Slurm's state:

- authentication: its own ``munged`` with a fresh key on a private socket (``AuthInfo=socket=...``), so a
  system munged and its key are never used. ``auth/none`` also works on Slurm 22.05 but is not the
  default: it lets any local user submit jobs under any uid (root included) to a cluster running as root,
  and Slurm 23.11 removed it. It remains the fallback when ``munged`` is absent on Slurm < 23.11;
- ``slurmctld`` and ``slurmd`` on free TCP ports (picked at start, so a system Slurm on 6817/6818 or a
  parallel test's cluster never collides), one node named after this host at 127.0.0.1 with this host's
  CPUs, one partition, ``proctrack/pgid`` + ``task/none`` (no cgroups), no accounting;
- the daemons run in the foreground (``-D``) as children of this process and get SIGTERM if it dies.

If the Slurm daemons are missing, root with ``apt-get`` installs Debian's ``slurm-wlm`` (slurmctld, slurmd,
slurm-client; munge comes with them; no recommends) once, under a lock shared by parallel pytest workers;
anything else raises ``SlurmUnavailable`` whose message says why (tests turn it into a skip).
"""
from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

#: Debian's metapackage of slurmctld, slurmd and slurm-client (each depends on munge).
DEBIAN_PACKAGES = ("slurm-wlm",)
DAEMONS = ("slurmctld", "slurmd")
CLIENTS = ("sbatch", "squeue", "sinfo", "scancel", "scontrol")
#: ``slurmctld``/``slurmd`` live in sbin, which a non-login PATH may miss.
_SEARCH_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/usr/bin", "/sbin", "/bin",
                                "/usr/local/sbin", "/usr/local/bin"])
INSTALL_LOCK = Path(tempfile.gettempdir()) / "dla-slurm-install.lock"
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0
#: Tries with fresh ports when a daemon finds its port taken after all (a race with another program).
PORT_ATTEMPTS = 3


class SlurmUnavailable(RuntimeError):
    """Slurm cannot run here: not installed and not installable, or not root. Tests skip on it."""


class SlurmStartError(RuntimeError):
    """Slurm is there but the cluster did not come up; the message carries the daemons' log tails.
    Tests fail on it (a broken configuration must not pass for a machine without Slurm)."""


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def which(name: str) -> str | None:
    return shutil.which(name, path=_SEARCH_PATH)


def _missing() -> list[str]:
    return [name for name in (*DAEMONS, *CLIENTS) if which(name) is None]


def ensure_installed(progress: Callable[[str], None] = _stderr) -> None:
    """Install the Slurm daemons with apt-get when they are missing and this process may (root, Debian).

    Parallel pytest workers serialise on ``INSTALL_LOCK``; the one that waited finds them installed."""
    if not _missing():
        return
    if os.geteuid() != 0:
        raise SlurmUnavailable(f"Slurm is not installed ({', '.join(_missing())} missing) and installing it "
                               "needs root")
    apt = which("apt-get")
    if apt is None:
        raise SlurmUnavailable(f"Slurm is not installed ({', '.join(_missing())} missing) and there is no "
                               "apt-get to install it with")
    with open(INSTALL_LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _missing():
            return
        progress(f"installing Slurm for the single-node test cluster: apt-get install {' '.join(DEBIAN_PACKAGES)}")
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        steps = ([apt, "-qq", "update"],
                 [apt, "install", "-y", "-qq", "--no-install-recommends", *DEBIAN_PACKAGES])
        for cmd in steps:
            done = subprocess.run(cmd, env=env, capture_output=True, text=True)
            if done.returncode != 0:
                tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-5:])
                raise SlurmUnavailable(f"installing Slurm failed: {' '.join(cmd)} exited {done.returncode}\n{tail}")
    if _missing():
        raise SlurmUnavailable(f"{', '.join(_missing())} still missing after installing {' '.join(DEBIAN_PACKAGES)}")


def slurm_version() -> tuple[int, int]:
    """(major, minor) of the installed ``slurmctld``, e.g. (22, 5) for "slurm-wlm 22.05.8"."""
    out = subprocess.run([which("slurmctld") or "slurmctld", "-V"], capture_output=True, text=True).stdout
    m = re.search(r"(\d+)\.(\d+)", out)
    if not m:
        raise SlurmUnavailable(f"cannot read the Slurm version from `slurmctld -V`: {out.strip()!r}")
    return int(m[1]), int(m[2])


def free_ports(count: int) -> list[int]:
    """TCP ports nothing listens on now (bound on all interfaces, as slurmctld/slurmd bind them)."""
    socks, ports = [], []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("", 0))
            socks.append(s)
            ports.append(s.getsockname()[1])
    finally:
        for s in socks:
            s.close()
    return ports


def _die_with_parent() -> None:
    """Child-side: SIGTERM when the test process dies, so a killed pytest leaves no daemon behind."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return f"({path.name}: absent)"
    return "\n".join(text.rstrip().splitlines()[-lines:])


def running(pid: int) -> bool:
    """Whether ``pid`` is a live process. A zombie is not: an exited slurmstepd is re-parented to PID 1,
    which in some containers never reaps it."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


class SlurmCluster:
    """Single-node Slurm in a temporary directory; a context manager.

        with SlurmCluster() as cluster:
            subprocess.run(["sbatch", ...], env={**os.environ, **cluster.env})

    ``env`` is what a Slurm client needs to talk to this cluster (``SLURM_CONF``); ``processes()`` lists
    every live process belonging to it (daemons, job steps, jobs), which is empty after ``stop()``.
    """

    def __init__(self, *, auth: str | None = None, partition: str = "regress", install: bool = True,
                 progress: Callable[[str], None] = _stderr, keep_dir: bool = False) -> None:
        if install:
            ensure_installed(progress)
        elif _missing():
            raise SlurmUnavailable(f"Slurm is not installed ({', '.join(_missing())} missing)")
        if os.geteuid() != 0:
            # slurmd must run as root to start jobs (setuid to the submitter, process groups, spool).
            raise SlurmUnavailable("a single-node Slurm test cluster needs root (slurmd runs as root)")
        self.version = slurm_version()
        if auth is None:
            auth = "munge" if which("munged") else "none"
        if auth == "none" and self.version >= (23, 11):
            raise SlurmUnavailable(f"munged is missing and Slurm {self.version[0]}.{self.version[1]:02d} has no "
                                   "auth/none")
        if auth == "munge" and which("munged") is None:
            raise SlurmUnavailable("munged is missing (Debian package munge)")
        if auth not in ("munge", "none"):
            raise ValueError(f"auth must be 'munge' or 'none', not {auth!r}")
        self.auth = auth
        self.partition = partition
        self.node = socket.gethostname().split(".")[0]
        self.cpus = os.cpu_count() or 1
        self.keep_dir = keep_dir
        self.dir: Path | None = None
        self._procs: dict[str, subprocess.Popen] = {}
        self._stopped = False

    # ---- paths and environment -------------------------------------------------------------------
    @property
    def conf(self) -> Path:
        assert self.dir is not None, "cluster not started"
        return self.dir / "slurm.conf"

    @property
    def env(self) -> dict[str, str]:
        """Variables a Slurm client (sbatch, squeue, ...) needs on top of ``os.environ``."""
        return {"SLURM_CONF": str(self.conf)}

    def client_env(self) -> dict[str, str]:
        # SBATCH_*/SLURM_* of an enclosing Slurm job (pytest run as a farm job) must not leak into ours.
        base = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SBATCH_", "SQUEUE_"))}
        return {**base, **self.env}

    # ---- configuration ---------------------------------------------------------------------------
    def _munge_key(self) -> Path:
        key_dir = self.dir / "munge-key"
        key_dir.mkdir(mode=0o700)
        key = key_dir / "munge.key"
        fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400)
        with os.fdopen(fd, "wb") as f:
            f.write(secrets.token_bytes(1024))
        return key

    def _slurm_conf(self, ctld_port: int, slurmd_port: int) -> str:
        d = self.dir
        auth = (["AuthType=auth/munge", f"AuthInfo=socket={d / 'munge' / 'munge.socket'}", "CredType=cred/munge"]
                if self.auth == "munge" else ["AuthType=auth/none", "CredType=cred/none"])
        lines = [
            "# Generated by regressions.regress.slurm_cluster: a private single-node test cluster.",
            f"ClusterName=dla{os.getpid()}",
            f"SlurmctldHost={self.node}(127.0.0.1)",
            f"SlurmctldPort={ctld_port}",
            f"SlurmdPort={slurmd_port}",
            "SlurmUser=root",
            "SlurmdUser=root",
            *auth,
            f"StateSaveLocation={d / 'state'}",
            f"SlurmdSpoolDir={d / 'spool'}",
            f"SlurmctldPidFile={d / 'slurmctld.pid'}",
            f"SlurmdPidFile={d / 'slurmd.pid'}",
            f"SlurmctldLogFile={d / 'slurmctld.log'}",
            f"SlurmdLogFile={d / 'slurmd.log'}",
            f"PlugStackConfig={d / 'plugstack.conf'}",
            "ProctrackType=proctrack/pgid",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none",
            "SwitchType=switch/none",
            "MpiDefault=none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_CPU",
            # Start tasks as soon as they are submitted or a CPU frees up (defaults wait up to seconds).
            "SchedulerParameters=batch_sched_delay=0,sched_min_interval=0",
            "ReturnToService=2",
            "KillWait=5",
            "SlurmctldDebug=info",
            "SlurmdDebug=info",
            # RealMemory stays small: a configured size above the real one drains the node.
            f"NodeName={self.node} NodeAddr=127.0.0.1 CPUs={self.cpus} RealMemory=100 State=UNKNOWN",
            f"PartitionName={self.partition} Nodes={self.node} Default=YES MaxTime=INFINITE State=UP",
        ]
        return "\n".join(lines) + "\n"

    # ---- processes -------------------------------------------------------------------------------
    def _spawn(self, name: str, cmd: list[str]) -> None:
        out = open(self.dir / f"{name}.out", "wb")
        env = {**self.client_env(), "SLURM_CONF": str(self.conf)}
        self._procs[name] = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                             env=env, cwd=self.dir, preexec_fn=_die_with_parent,
                                             # a terminal's Ctrl-C reaches only the test, which stops
                                             # the cluster in order (jobs first, then the daemons)
                                             start_new_session=True)
        out.close()

    def _logs(self) -> str:
        parts = []
        for name in self._procs:
            parts.append(f"--- {name} output ---\n{tail(self.dir / f'{name}.out')}")
        for name in ("slurmctld.log", "slurmd.log"):
            if (self.dir / name).exists():
                parts.append(f"--- {name} ---\n{tail(self.dir / name)}")
        return "\n".join(parts)

    def _check_alive(self) -> None:
        for name, proc in self._procs.items():
            if proc.poll() is not None:
                raise SlurmStartError(f"{name} exited with status {proc.returncode} while starting "
                                       f"(config {self.conf})\n{self._logs()}")

    def run(self, *args: str, check: bool = True, timeout: float = 30.0) -> subprocess.CompletedProcess:
        """A Slurm client command against this cluster (``run("sinfo", "-h")``)."""
        return subprocess.run([which(args[0]) or args[0], *args[1:]], env=self.client_env(), capture_output=True,
                              text=True, check=check, timeout=timeout)

    def node_state(self) -> str:
        try:
            done = self.run("sinfo", "-h", "-N", "-n", self.node, "-o", "%T", check=False, timeout=5)
        except subprocess.TimeoutExpired:
            return ""
        return done.stdout.strip() if done.returncode == 0 else ""

    def start(self) -> SlurmCluster:
        # Short path: the munge socket path must fit a sockaddr_un (108 bytes).
        self.dir = Path(tempfile.mkdtemp(prefix="dla-slurm-"))
        os.chmod(self.dir, 0o755)  # the munge socket must be reachable by every client
        try:
            for sub in ("state", "spool", "munge"):
                (self.dir / sub).mkdir()
            (self.dir / "plugstack.conf").write_text("")
            if self.auth == "munge":
                key = self._munge_key()
                self._spawn("munged", [which("munged"), "--foreground", "--force",
                                       f"--socket={self.dir / 'munge' / 'munge.socket'}", f"--key-file={key}",
                                       f"--log-file={self.dir / 'munge' / 'munged.log'}",
                                       f"--pid-file={self.dir / 'munge' / 'munged.pid'}",
                                       f"--seed-file={self.dir / 'munge' / 'munged.seed'}"])
                self._wait(lambda: (self.dir / "munge" / "munge.socket").exists(), "munged to create its socket")
            for attempt in range(PORT_ATTEMPTS):
                try:
                    self._start_slurm()
                    break
                except SlurmStartError as e:
                    # Another program took a port between free_ports() and the daemon's bind: new ports.
                    if "Address already in use" not in str(e) or attempt == PORT_ATTEMPTS - 1:
                        raise
                    self._terminate("slurmd", "slurmctld")
        except BaseException:
            self.stop()
            raise
        return self

    def _start_slurm(self) -> None:
        self.ports = tuple(free_ports(2))
        self.conf.write_text(self._slurm_conf(*self.ports))
        for log in ("slurmctld.log", "slurmd.log"):
            (self.dir / log).unlink(missing_ok=True)
        self._spawn("slurmctld", [which("slurmctld"), "-D", "-f", str(self.conf)])
        self._spawn("slurmd", [which("slurmd"), "-D", "-f", str(self.conf), "-N", self.node])
        self._wait(lambda: self.node_state() == "idle", f"node {self.node} to be idle in sinfo")

    def _terminate(self, *names: str) -> None:
        """SIGTERM the named daemons, SIGKILL after ``STOP_TIMEOUT_S``."""
        for name in names:
            proc = self._procs.pop(name, None)
            if proc is None or proc.poll() is not None:
                continue
            proc.terminate()
            try:
                proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def _wait(self, ready: Callable[[], bool], what: str, timeout: float = START_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        while not ready():
            self._check_alive()
            if time.monotonic() > deadline:
                raise SlurmStartError(f"timed out after {timeout:.0f} s waiting for {what} (config {self.conf})\n"
                                       f"{self._logs()}")
            time.sleep(0.2)

    def processes(self) -> list[int]:
        """Live processes of this cluster: its daemons plus every process whose environment names its
        slurm.conf (slurmstepd and the jobs inherit ``SLURM_CONF``)."""
        pids = {p.pid for p in self._procs.values() if p.poll() is None}
        if self.dir is not None:
            marker = f"SLURM_CONF={self.conf}".encode() + b"\0"
            for entry in Path("/proc").iterdir():
                if not entry.name.isdigit() or int(entry.name) == os.getpid():
                    continue
                with contextlib.suppress(OSError):
                    if marker in (entry / "environ").read_bytes() + b"\0" and running(int(entry.name)):
                        pids.add(int(entry.name))
        return sorted(pids)

    def stop(self) -> None:
        """Cancel every job, stop the daemons (SIGTERM, then SIGKILL), kill leftovers, remove the directory."""
        if self.dir is None or self._stopped:
            return
        self._stopped = True
        if self._procs.get("slurmctld") and self._procs["slurmctld"].poll() is None:
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                jobs = self.run("squeue", "-h", "-o", "%A", check=False, timeout=10).stdout.split()
                if jobs:
                    self.run("scancel", *sorted(set(jobs)), check=False, timeout=10)
                    deadline = time.monotonic() + STOP_TIMEOUT_S
                    while time.monotonic() < deadline and self.run("squeue", "-h", check=False, timeout=10).stdout:
                        time.sleep(0.2)
        # slurmd before slurmctld (no "node down" churn), munged last (both talk to it while stopping).
        self._terminate("slurmd", "slurmctld", "munged")
        leftovers = self.processes()
        for pid in leftovers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while any(running(pid) for pid in leftovers) and time.monotonic() < deadline:
            time.sleep(0.05)
        if not self.keep_dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> SlurmCluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def cluster_fixture(scope: str = "session", name: str = "slurm_cluster", **kwargs):
    """A pytest fixture yielding a started ``SlurmCluster``; skips with the reason when Slurm cannot run.

        slurm_cluster = cluster_fixture()          # in a test module or conftest
    """
    import pytest

    @pytest.fixture(scope=scope, name=name)
    def _fixture(pytestconfig: pytest.Config) -> Iterator[SlurmCluster]:
        def progress(line: str) -> None:
            # Past pytest's capture: an install takes a while and should not look like a hang.
            capture = pytestconfig.pluginmanager.getplugin("capturemanager")
            with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
                _stderr(line)

        try:
            cluster = SlurmCluster(**{"progress": progress, **kwargs}).start()
        except SlurmUnavailable as e:
            pytest.skip(f"no single-node Slurm: {e}")
        try:
            yield cluster
        finally:
            cluster.stop()

    return _fixture
