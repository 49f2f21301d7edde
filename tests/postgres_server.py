"""A real PostgreSQL server for the tests: Debian's binaries (package ``postgresql``), a fresh cluster in a
temporary directory, on a free localhost port, run as the ``postgres`` user when the tests run as root
(PostgreSQL refuses root), stopped and removed afterwards. The machine's own clusters are never touched."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from processes import free_port, stop

__all__ = ["PostgresServer", "postgres_bin"]


def postgres_bin() -> Path | None:
    """The newest installed ``/usr/lib/postgresql/<version>/bin`` (None if PostgreSQL is not installed)."""
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/postgres"), key=lambda p: int(p.parts[-3]))
    return versions[-1].parent if versions else None


class PostgresServer:
    def __init__(self, bin_dir: Path) -> None:
        self.bin = bin_dir
        self.port = free_port()
        self.user = "postgres" if os.geteuid() == 0 else None
        # under /tmp, not pytest's root-only tmp: the postgres user must reach it
        self.root = Path(tempfile.mkdtemp(prefix="nas-pg-", dir="/tmp"))
        self.data = self.root / "data"
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"postgresql://nas@127.0.0.1:{self.port}/nas"

    def _run(self, *command: str) -> None:
        done = subprocess.run(
            [str(self.bin / command[0]), *command[1:]], user=self.user, capture_output=True, text=True
        )
        if done.returncode:
            raise RuntimeError(f"{command[0]} failed: {done.stdout[-2000:]}{done.stderr[-2000:]}")

    def start(self) -> PostgresServer:
        if self.user:
            shutil.chown(self.root, self.user)
        self._run("initdb", "-D", str(self.data), "-U", "nas", "--auth=trust", "-E", "UTF8", "--no-sync")
        log = (self.root / "server.log").open("w")
        self.proc = subprocess.Popen(
            [str(self.bin / "postgres"), "-D", str(self.data), "-p", str(self.port), "-k", str(self.root),
             "-c", "listen_addresses=127.0.0.1", "-c", "max_connections=50"],
            user=self.user, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        log.close()
        deadline = time.time() + 600  # only a server that never starts reaches it, however busy the machine
        while subprocess.run(
            [str(self.bin / "pg_isready"), "-h", "127.0.0.1", "-p", str(self.port)], capture_output=True
        ).returncode:
            if self.proc.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"PostgreSQL did not start: {(self.root / 'server.log').read_text()}")
            time.sleep(0.2)
        self._run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", "nas", "nas")
        return self

    def add_user(self, name: str, password: str) -> str:
        """A login role ``name`` that must give ``password`` (SCRAM) over TCP, owning a database of its name
        (the others keep the cluster's trust); returns its URL, without the password."""
        import psycopg
        from psycopg import sql

        with psycopg.connect(
            host="127.0.0.1", port=self.port, user="nas", dbname="nas", autocommit=True
        ) as db:
            db.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(sql.Identifier(name), password))
            db.execute(sql.SQL("CREATE DATABASE {0} OWNER {0}").format(sql.Identifier(name)))
            hba = self.data / "pg_hba.conf"  # the first matching line wins
            hba.write_text(f"host all {name} 127.0.0.1/32 scram-sha-256\n{hba.read_text()}")
            db.execute("SELECT pg_reload_conf()")
        deadline = time.time() + 30
        while True:  # the reload is asynchronous: wait until a login without the password is refused
            try:
                psycopg.connect(host="127.0.0.1", port=self.port, user=name, dbname=name, password="").close()
            except psycopg.OperationalError:
                break
            if time.time() > deadline:
                raise RuntimeError("PostgreSQL did not reload pg_hba.conf")
            time.sleep(0.1)
        return f"postgresql://{name}@127.0.0.1:{self.port}/{name}"

    def stop(self) -> None:
        stop(self.proc, signal.SIGINT)  # PostgreSQL's "fast" shutdown
        shutil.rmtree(self.root, ignore_errors=True)
