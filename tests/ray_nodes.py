"""Real Ray nodes for the tests: ``ray start --block`` on localhost with free ports of their own and token
authentication, so a cluster the user runs is never touched, stopped by SIGTERM to their own ``ray start``
(never ``ray stop``, which stops every node on the machine)."""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from processes import free_port, free_ports, stop

RAY = str(Path(sys.executable).with_name("ray"))


def cluster_env(folder: Path) -> dict[str, str]:
    """The environment of every process of a test cluster: its own auth token, no usage stats, the venv."""
    token = folder / "auth_token"
    if not token.exists():
        token.write_text(secrets.token_hex(32))
    env = {
        **os.environ,
        "RAY_USAGE_STATS_ENABLED": "0",
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN_PATH": str(token),
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
    }
    env.pop("RAY_ADDRESS", None)
    return env


class RayNode:
    """One node: the head (``address`` None) or a worker joining ``address`` (give it the head's ``env``:
    its auth token); ``num_cpus`` CPUs."""

    def __init__(
        self,
        folder: Path,
        name: str,
        address: str | None = None,
        num_cpus: int = 1,
        env: dict[str, str] | None = None,
    ) -> None:
        self.folder, self.name, self.join, self.num_cpus = folder, name, address, num_cpus
        self.env = env or cluster_env(folder)
        self.gcs_port = free_port() if address is None else None
        self.dashboard_port = free_port() if address is None else None
        self.proc: subprocess.Popen | None = None
        self.log_path = folder / f"{name}.log"
        # a temp dir per node (short: Unix socket paths under it must stay under 108 characters); nodes
        # sharing one, as they would on one machine by default, delete each other's files when they stop
        self.temp_dir = Path(tempfile.mkdtemp(prefix="ray-", dir="/tmp"))

    @property
    def address(self) -> str:
        """The GCS address (``host:port``) drivers and worker nodes join."""
        return self.join or f"127.0.0.1:{self.gcs_port}"

    @property
    def dashboard(self) -> str:
        return f"http://127.0.0.1:{self.dashboard_port}"

    def start(self) -> RayNode:
        named = {
            "node-manager-port": free_port(),
            "object-manager-port": free_port(),
            "metrics-export-port": free_port(),
            "dashboard-agent-listen-port": free_port(),
            "dashboard-agent-grpc-port": free_port(),
            "runtime-env-agent-port": free_port(),
        }
        if self.join is None:
            named["ray-client-server-port"] = free_port()
        # the workers' range holds none of the others (Ray refuses to start, "used by other components")
        worker_low = free_ports(41)
        ports = [f"--{option}={port}" for option, port in named.items()]
        ports += [f"--min-worker-port={worker_low}", f"--max-worker-port={worker_low + 40}"]
        if self.join is None:
            role = [
                "--head",
                f"--port={self.gcs_port}",
                "--dashboard-host=127.0.0.1",
                f"--dashboard-port={self.dashboard_port}",
            ]
        else:
            role = [f"--address={self.join}"]
        command = [RAY, "start", "--block", "--node-ip-address=127.0.0.1", f"--num-cpus={self.num_cpus}"]
        command += ["--object-store-memory=100000000", "--disable-usage-stats", f"--temp-dir={self.temp_dir}"]
        command += [*role, *ports]
        log = self.log_path.open("w")
        self.proc = subprocess.Popen(
            command, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        log.close()
        return self

    @property
    def node_id(self) -> str:
        """The node's Ray id (hex), from the port files its raylet names after it ('' until it starts)."""
        found = sorted((self.temp_dir / "session_latest").glob("metrics_export_port_*"))
        return found[0].name.rsplit("_", 1)[1] if found else ""

    def log(self) -> str:
        return self.log_path.read_text()[-4000:] if self.log_path.exists() else ""

    def kill(self) -> None:
        """SIGKILL to every process of the node at once, as if its machine were lost: no draining, the
        trials running there die mid-trial."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        for pid in _pids_mentioning(str(self.temp_dir)):  # workers the raylet put in groups of their own
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def stop(self) -> None:
        """SIGTERM to ``ray start --block``, which stops the processes it started."""
        stop(self.proc, signal.SIGTERM)
        shutil.rmtree(self.temp_dir, ignore_errors=True)


def _pids_mentioning(text: str) -> list[int]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if text in cmdline.read_bytes().decode(errors="replace"):
                found.append(int(cmdline.parent.name))
        except OSError:
            continue
    return [pid for pid in found if pid != os.getpid()]


def alive_nodes(address: str, env: dict[str, str]) -> int:
    """How many nodes the cluster at ``address`` reports alive (``ray status``; 0 while unreachable)."""
    status = subprocess.run(
        [RAY, "status", f"--address={address}"], env=env, capture_output=True, text=True, timeout=60
    )
    if "Active:" not in status.stdout:
        return 0
    section = status.stdout.split("Active:", 1)[1].split("Pending:", 1)[0]
    return len(re.findall(r"node_[0-9a-f]+", section))


def wait_for_nodes(head: RayNode, count: int, timeout: float = 600) -> None:
    deadline = time.time() + timeout
    while alive_nodes(head.address, head.env) < count:
        if head.proc is not None and head.proc.poll() is not None:
            raise RuntimeError(f"the Ray head exited: {head.log()}")
        if time.time() > deadline:
            raise TimeoutError(f"the Ray cluster did not reach {count} nodes: {head.log()}")
        time.sleep(1)
