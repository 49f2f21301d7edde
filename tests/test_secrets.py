"""A storage URL's password reaches the database and nothing else: no file under ``runs/<study>/`` (manifest,
report, tables, Ray's experiment folder; every byte of every file is searched), no console line, no error
message. A URL without a password takes it from ``NAS_STORAGE_PASSWORD`` or libpq's password file, and a
study started with the password in its URL resumes with it from the environment.

The PostgreSQL tests use a real server (``tests/postgres_server.py``) with a role that must give its password.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import optuna
import pytest
from cheap_search import cheap_settings
from postgres_server import PostgresServer
from processes import free_port
from rich.console import Console
from typer.testing import CliRunner

from nas.api import run_search
from nas.cli.commands import app
from nas.study.storage import open_storage

# a password that must be escaped in a URL (":", "@", "/") and in a password file (":")
PASSWORD = "Nas-s3cret:p@ss/wd"
ENCODED = quote(PASSWORD, safe="")
# every form it could be written in: as given, as in a URL, and its start (a cut-off copy)
FORMS = (PASSWORD, ENCODED, "Nas-s3cret")
SEARCH = [
    "--space",
    "sasa",
    "--evaluator",
    "complexity",
    "--objectives",
    "macs,params",
    "--macs-img-size",
    "32",
]
runner = CliRunner()


def _leaks(text: str | bytes) -> list[str]:
    data = text.encode() if isinstance(text, str) else text
    return [form for form in FORMS if form.encode() in data]


def _files_holding_it(run_dir: Path) -> dict[str, list[str]]:
    """Every file under ``run_dir`` (hidden ones, Ray's, binary ones) whose bytes hold a form of it."""
    found = {}
    for path in sorted(run_dir.rglob("*")):
        if path.is_file() and (forms := _leaks(path.read_bytes())):
            found[str(path.relative_to(run_dir))] = forms
    return found


@pytest.fixture(autouse=True)
def _no_password_around(monkeypatch: pytest.MonkeyPatch) -> None:
    """No password from the machine running the tests: each test gives its own."""
    for name in ("NAS_STORAGE_PASSWORD", "PGPASSWORD", "PGPASSFILE"):
        monkeypatch.delenv(name, raising=False)


# --- the rule that hides it ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (f"postgresql://bob:{ENCODED}@db:5432/nas", "postgresql://bob:***@db:5432/nas"),
        (f"postgresql+psycopg://bob:{ENCODED}@db/nas?sslmode=require", "postgresql+psycopg://bob:***@db/nas?sslmode=require"),
        (f"mysql+pymysql://bob:{ENCODED}@[::1]:3306/nas", "mysql+pymysql://bob:***@[::1]:3306/nas"),
        (f"postgresql://:{ENCODED}@db/nas", "postgresql://:***@db/nas"),
        (f"postgresql://bob:{PASSWORD}@db/nas", "postgresql://bob:***@db/nas"),  # unescaped "@", "/", ":"
        (f"postgresql:/bob:{ENCODED}@db/nas", "postgresql:/bob:***@db/nas"),  # malformed, still hidden
        (f"postgresql://bob@db/nas?sslmode=require&password={ENCODED}", "postgresql://bob@db/nas?sslmode=require&password=***"),
        (f"mysql+pymysql://bob@db/nas?passwd={ENCODED}&charset=utf8", "mysql+pymysql://bob@db/nas?passwd=***&charset=utf8"),
        (f"sqlite:////tmp/study.db?password={ENCODED}", "sqlite:////tmp/study.db?password=***"),
        (f"--storage=postgresql://bob:{ENCODED}@db/nas", "--storage=postgresql://bob:***@db/nas"),  # argv
        ("postgresql://bob:***@db/nas", "postgresql://bob:***@db/nas"),  # once redacted, it stays so
    ],
)  # fmt: skip
def test_redact_hides_every_password_and_keeps_the_rest(url: str, shown: str) -> None:
    from nas.study.credentials import redact

    assert redact(url) == shown
    assert not _leaks(redact(url))


@pytest.mark.parametrize(
    "text",
    [
        "postgresql://bob@db:5432/nas",
        "postgresql://db:5432/nas?sslmode=require",
        "sqlite:////home/me/runs/s/study.db",
        "journal:/home/me/runs/shared.log",
        "/home/me/runs/s/shared.log",
        "ray://head.example:10001",  # a Ray address is no secret
        "auto",
        "--storage",
        "macs:min",
        "2026-01-02T03:04:05+00:00",
        "imagefolder:/data/imagenet",
    ],
)
def test_redact_leaves_text_without_a_password_as_it_is(text: str) -> None:
    from nas.study.credentials import redact

    assert redact(text) == text


def test_scrub_hides_the_password_wherever_a_driver_message_repeats_it() -> None:
    from nas.study.credentials import scrub

    url = f"postgresql://bob:{PASSWORD}@db/nas"  # the driver reads "Nas-s3cret:p" and a host "ss/wd@db"
    message = f"failed to resolve host 'ss/wd@db'; URL {url}; password {PASSWORD}, {ENCODED}; env hunter22"
    clean = scrub(message, url, ["hunter22"])
    assert not _leaks(clean) and "ss/wd" not in clean and "hunter22" not in clean
    assert "postgresql://bob:***@db/nas" in clean


def test_the_password_goes_to_the_driver_not_into_the_url_optuna_keeps(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from nas.study.credentials import split_password

    assert split_password(f"postgresql+psycopg://bob:{ENCODED}@db/nas?sslmode=require") == (
        "postgresql+psycopg://bob@db/nas?sslmode=require",
        PASSWORD,
    )
    assert split_password(f"postgresql+psycopg://bob@db/nas?password={ENCODED}") == (
        "postgresql+psycopg://bob@db/nas",
        PASSWORD,
    )
    assert split_password("postgresql+psycopg://bob@db/nas") == ("postgresql+psycopg://bob@db/nas", None)
    monkeypatch.setenv("NAS_STORAGE_PASSWORD", "from-env")
    assert split_password("postgresql+psycopg://bob@db/nas")[1] == "from-env"
    assert split_password(f"postgresql+psycopg://bob:{ENCODED}@db/nas")[1] == PASSWORD  # the URL's wins
    assert split_password("postgresql+psycopg://db/nas")[1] is None  # no user: libpq's defaults decide


# --- files, console and messages -------------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore:Query string argument")  # SQLAlchemy: pysqlite takes no password
def test_a_search_writes_its_storage_password_to_no_file_and_no_console_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite ignores a password parameter (it has none to check), so this runs anywhere; the PostgreSQL
    test below does the same against a server that checks it."""
    run_dir = tmp_path / "t"
    url = f"sqlite:///{run_dir / 'study.db'}?password={ENCODED}"
    argv = ["nas", "search", "--storage", url, f"--storage={url}", "--budget", "4trials"]
    monkeypatch.setattr(sys, "argv", argv)  # what the manifest records as the command line
    out = io.StringIO()
    settings = cheap_settings(tmp_path, storage=url, budget="4trials")
    assert not _leaks(repr(settings))  # a traceback or log line that prints the settings
    outcome = run_search(settings, Console(file=out, width=200))
    assert (outcome.trials["state"] == "COMPLETE").sum() == 4 and outcome.report is not None
    assert not _leaks(out.getvalue())
    assert _files_holding_it(run_dir) == {}
    manifest = json.loads((run_dir / "manifest.json").read_text())
    shown = f"sqlite:///{run_dir / 'study.db'}?password=***"
    assert manifest["storage"] == manifest["settings"]["storage"] == shown
    assert manifest["machine"]["argv"] == [
        "nas",
        "search",
        "--storage",
        shown,
        f"--storage={shown}",
        *argv[5:],
    ]


def test_a_report_hides_the_password_of_a_manifest_written_before_it_was_hidden(tmp_path: Path) -> None:
    from nas.study.manifest import update_manifest
    from results.report import write_report

    run_search(cheap_settings(tmp_path, budget="3trials"), Console(file=io.StringIO()))
    old = f"postgresql://bob:{ENCODED}@db/nas"

    def as_before(manifest: dict) -> None:
        manifest["storage"] = manifest["settings"]["storage"] = old
        manifest["machine"]["argv"] = ["nas", "search", "--storage", old]

    update_manifest(tmp_path / "t", as_before)
    report = write_report(tmp_path / "t").read_text()
    assert not _leaks(report) and "postgresql://bob:***@db/nas" in report


def test_an_unreachable_storage_names_its_url_with_the_password_hidden(tmp_path: Path) -> None:
    url = f"postgresql://bob:{ENCODED}@127.0.0.1:{free_port()}/nas"
    result = runner.invoke(app, ["search", *SEARCH, "--runs-dir", str(tmp_path), "--storage", url])
    assert result.exit_code == 2
    assert f"storage: cannot open postgresql://bob:***@127.0.0.1:{url.rsplit(':', 1)[1]}" in result.output
    assert not _leaks(result.output)


@pytest.mark.parametrize(
    "url",
    [
        f"postgresql://bob:{PASSWORD}@127.0.0.1:1/nas",  # "@" unescaped: the driver gets a host "ss/wd@..."
        "postgresql://bob:Nas-s3cret{x}@127.0.0.1:1/nas",  # Optuna formats its URL: "{x}" was a KeyError 'x'
        f"postgresql://bob@127.0.0.1:1/nas?password={ENCODED}&nonsense=1",
        f"postgresql:/bob:{ENCODED}@127.0.0.1:1/nas",  # not a URL SQLAlchemy parses
    ],
)
def test_a_malformed_url_with_a_password_fails_without_showing_it(tmp_path: Path, url: str) -> None:
    with pytest.raises(ValueError, match=r"^storage: cannot open ") as err:
        open_storage(cheap_settings(tmp_path, storage=url))
    assert not _leaks(str(err.value)) and "ss/wd" not in str(err.value), str(err.value)


# --- Ray -------------------------------------------------------------------------------------------------


def test_a_ray_search_refuses_a_storage_url_without_showing_its_password(tmp_path: Path) -> None:
    """The Ray backend keeps its study in runs/<study>/ray and the ledger, so a storage URL would be ignored:
    it is refused before anything is written, and the message does not repeat it."""
    url = f"postgresql://bob:{ENCODED}@127.0.0.1:1/nas"
    refusal = "storage: a Ray search keeps its study in the run folder"
    with pytest.raises(ValueError, match=refusal) as refused:
        run_search(cheap_settings(tmp_path, storage=url, backend="ray", budget="3trials"))
    assert not _leaks(str(refused.value)) and "bob" not in str(refused.value)
    assert not any(tmp_path.iterdir())


# --- a real PostgreSQL server that checks the password ---------------------------------------------------


@pytest.fixture(scope="module")
def bob(postgres: PostgresServer) -> str:
    """The URL (without password) of a role that must log in with PASSWORD."""
    return postgres.add_user("bob", PASSWORD)


def _search(url: str, runs: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    environ = {
        k: v for k, v in os.environ.items() if k not in ("NAS_STORAGE_PASSWORD", "PGPASSWORD", "PGPASSFILE")
    }
    command = [sys.executable, "-m", "nas", "search", *SEARCH, "--runs-dir", str(runs), "--study", "pw"]
    return subprocess.run(
        [*command, "--storage", url, *args],
        env={**environ, **env},
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.integration
def test_a_postgresql_search_keeps_its_password_secret_and_resumes_with_it_from_the_environment(
    bob: str, tmp_path: Path
) -> None:
    with_password = bob.replace("bob@", f"bob:{ENCODED}@")
    shown = bob.replace("bob@", "bob:***@")
    run_dir = tmp_path / "pw"
    first = _search(with_password, tmp_path, "--budget", "4trials")
    assert first.returncode == 0, first.stderr[-3000:]
    assert not _leaks(first.stdout + first.stderr)
    assert _files_holding_it(run_dir) == {}
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["storage"] == manifest["settings"]["storage"] == shown
    assert shown in manifest["machine"]["argv"]

    # `nas report` reads the study again with the manifest's URL (password hidden) and the environment's
    environ = {
        k: v for k, v in os.environ.items() if k not in ("NAS_STORAGE_PASSWORD", "PGPASSWORD", "PGPASSFILE")
    }
    report = [sys.executable, "-m", "nas", "report", "pw", "--runs-dir", str(tmp_path)]
    for env, note in (({"NAS_STORAGE_PASSWORD": PASSWORD}, False), ({}, True)):
        shown_report = subprocess.run(
            report, env={**environ, **env}, capture_output=True, text=True, timeout=300
        )
        assert shown_report.returncode == 0, shown_report.stderr[-3000:]
        assert ("no password supplied" in shown_report.stderr) == note, shown_report.stderr
        assert not _leaks(shown_report.stdout + shown_report.stderr)
    assert _files_holding_it(run_dir) == {}

    resumed = _search(bob, tmp_path, "--budget", "6trials", "--resume", NAS_STORAGE_PASSWORD=PASSWORD)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert not _leaks(resumed.stdout + resumed.stderr)
    assert "6 trials complete" in resumed.stdout  # the same study, continued
    assert _files_holding_it(run_dir) == {}
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert len(manifest["sessions"]) == 2
    assert manifest["storage"] == manifest["settings"]["storage"] == bob  # the last session's URL
    assert (run_dir / "report.html").exists()

    refused = _search(bob, tmp_path, "--budget", "7trials", "--resume")  # no password from anywhere
    assert refused.returncode == 2
    assert "no password supplied; give it in the URL, NAS_STORAGE_PASSWORD" in refused.stderr


@pytest.mark.integration
def test_a_password_file_lets_a_url_without_a_password_connect_unless_others_may_read_it(
    bob: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture
) -> None:
    """libpq's own password file (psycopg reads it; nas adds nothing): host:port:database:user:password,
    "*" for any, "\\:" for a colon in a field."""
    escaped = PASSWORD.replace("\\", "\\\\").replace(":", "\\:")
    pgpass = tmp_path / "pgpass"
    pgpass.write_text(f"otherhost:*:*:bob:wrong\n127.0.0.1:*:bob:bob:{escaped}\n")
    pgpass.chmod(0o600)
    monkeypatch.setenv("PGPASSFILE", str(pgpass))
    storage, shown = open_storage(cheap_settings(tmp_path, storage=bob))
    optuna.study.get_all_study_names(storage)  # connected as bob
    assert shown == bob

    pgpass.chmod(0o640)  # libpq ignores a file others may read, and says so
    with pytest.raises(ValueError, match="no password supplied; give it in the URL") as err:
        optuna.study.get_all_study_names(open_storage(cheap_settings(tmp_path, storage=bob))[0])
    assert not _leaks(str(err.value))
    assert "has group or world access" in capfd.readouterr().err


@pytest.mark.integration
def test_a_wrong_password_is_refused_without_showing_either(bob: str, tmp_path: Path) -> None:
    url = bob.replace("bob@", "bob:Nas-s3cret-wrong@")
    with pytest.raises(ValueError, match="password authentication failed") as err:
        open_storage(cheap_settings(tmp_path, storage=url))
    assert "Nas-s3cret" not in str(err.value) and "bob:***@" in str(err.value)
