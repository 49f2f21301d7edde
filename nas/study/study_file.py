"""A study kept in a SQLite file survives that file being removed while the search runs.

Deleting ``runs/<study>/study.db`` (a clean-up script, a user tidying up) does not stop SQLite: the search's
open connections go on writing into the unlinked file, and at the end, when the trials table is read through
a new connection, a new empty file is all there is: every trial since is gone, silently. :class:`StudyFile`
prevents that. It holds its own read-only connection to the study's file, which keeps the file's data
reachable after an unlink, and a worker asks it before each trial whether the path still names that file.
When it does not, it copies the whole database through that connection (SQLite's online backup) back to the
path, or beside it if something else now lies there, and raises :class:`StudyFileLost`: the search stops
with one sentence and the usual table, manifest and report, written from the restored file; ``--resume``
goes on from there.

Other storages (PostgreSQL, a journal file) are not watched: a database server is not removed by deleting a
file in the run folder.
"""

from __future__ import annotations

import os
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

from nas.core.option_names import option

__all__ = ["StudyFile", "StudyFileLost"]


class StudyFileLost(Exception):
    """The study's SQLite file was removed or replaced while the search ran; the message says where the
    study's records are now; ``restored``: back at the path (the search's table can be read from it)."""

    def __init__(self, message: str, restored: bool = False) -> None:
        super().__init__(message)
        self.restored = restored


class StudyFile:
    """Watches the SQLite file of the storage ``url`` (nothing for other storages); see the module. Only a
    ``restore``-ing watcher copies the study back (a search's first worker; its helpers only stop)."""

    def __init__(self, url: str, restore: bool = True) -> None:
        self.restore = restore
        self.path: Path | None = None
        self._keeper: sqlite3.Connection | None = None
        if not url.startswith("sqlite:///"):
            return
        path = Path(url.removeprefix("sqlite:///"))
        try:
            self._inode = os.stat(path).st_ino
            keeper = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
            keeper.execute("SELECT count(*) FROM sqlite_master").fetchall()  # the file is open from here on
        except (OSError, sqlite3.Error):
            return  # not a file this process can watch (an in-memory or unreadable database)
        self.path, self._keeper = path, keeper

    def check(self) -> None:
        """Raise :class:`StudyFileLost` (after restoring the study) if the path no longer names its file."""
        if self.path is None or self._keeper is None:
            return
        try:
            if os.stat(self.path).st_ino == self._inode:
                return
            target = self._beside()  # something else lies at the path now: it is not overwritten
            what = "replaced"
        except FileNotFoundError:
            target, what = self.path, "removed"
        if not self.restore:
            self.close()
            raise StudyFileLost(f"{self.path} was {what} while the search ran")
        try:
            with sqlite3.connect(target) as copy:
                self._keeper.backup(copy)
            copy.close()
        except (OSError, sqlite3.Error) as err:
            raise StudyFileLost(
                f"{self.path} was {what} while the search ran, and the study could not be restored to "
                f"{target} ({err}); the trials finished since the search started may be lost"
            ) from None
        finally:
            self.close()
        if target == self.path:
            raise StudyFileLost(
                f"{self.path} was {what} while the search ran: the study, every finished trial included, "
                f"is restored to it; continue with {option('resume')}",
                restored=True,
            )
        raise StudyFileLost(
            f"{self.path} was {what} while the search ran: the study, every finished trial included, is "
            f"saved as {target}; move it to {self.path.name} and continue with {option('resume')}"
        )

    def _beside(self) -> Path:
        assert self.path is not None
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        return self.path.with_name(f"{self.path.name}.restored-{stamp}")

    def close(self) -> None:
        if self._keeper is not None:
            self._keeper.close()
            self._keeper = None
