"""The journal (feature ``journal``) against a real filectxd: ``journal_list`` (and
``journal_entries``, page after page), ``journal_diff`` and ``journal_restore``, asynchronous and
through the synchronous wrapper. Skipped, saying so, when the daemon under test has no journal (a
build before it); the feature check before anything is sent runs on any daemon."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import filectx
from filectx import FsError, Session, UnsupportedFeatureError
from filectx.sync import connect as connect_sync
from filectx.wire import JournalEntry

from .conftest import Daemon

NO_JOURNAL = "this filectxd does not announce the feature `journal`: set FILECTXD to a build with it"


@pytest.fixture(scope="module")
def journaled() -> Iterator[Daemon]:
    started = Daemon()
    if not started.has_feature("journal"):
        started.stop()
        pytest.skip(NO_JOURNAL)
    yield started
    started.stop()


async def session(daemon: Daemon, *roots: Path, **options: object) -> Session:
    return await filectx.connect(socket=daemon.socket, roots=list(roots) or [daemon.root], **options)  # type: ignore[arg-type]


async def test_journal_list_shows_writes_and_edits_newest_first(journaled: Daemon) -> None:
    (journaled.root / "list").mkdir()
    start = time.time() * 1000
    async with await session(journaled) as s:
        created = await s.file.write("list/notes.txt", "one\ntwo\n")
        edited = await s.file.edit("list/notes.txt", "two", "TWO")
        replaced = await s.file.write("list/notes.txt", "one\nTWO\nthree\n")
        await s.file.read("list/notes.txt", owner="helper")
        by_helper = await s.file.edit("list/notes.txt", "three", "3", owner="helper")

        listed = await s.journal_list("list/notes.txt")
        assert listed.get("cursor") is None
        entries = listed["entries"]
        assert [(e["operation"], e.get("before"), e.get("after")) for e in entries] == [
            ("edit", replaced["version"], by_helper["version"]),
            ("write", edited["version"], replaced["version"]),
            ("edit", created["version"], edited["version"]),
            ("create", None, created["version"]),
        ]
        canonical = os.path.realpath(journaled.root / "list" / "notes.txt")
        for e in entries:
            assert e["path"] == canonical and e["displayPath"] == "list/notes.txt"
            assert e["sessionId"] == s.session_id and e.get("clientName") == "filectx-python"
            assert e["restorable"] is True
            assert start - 1000 <= e["time"] <= time.time() * 1000 + 1000
        assert [e["seq"] for e in entries] == sorted((e["seq"] for e in entries), reverse=True)
        assert len({e["entry"] for e in entries}) == 4
        assert (entries[2].get("added"), entries[2].get("removed")) == (1, 1)
        assert entries[3].get("added") == 2
        assert entries[0].get("owner") == "helper" and entries[1].get("owner") is None

        # Filters: by owner, by session, by time; a folder holds its files' entries.
        helpers = await s.journal_list("list", owner="helper")
        assert [e["entry"] for e in helpers["entries"]] == [entries[0]["entry"]]
        mine = await s.journal_list("list", session_id=s.session_id)
        assert [e["entry"] for e in mine["entries"]] == [e["entry"] for e in entries]
        since = entries[1]["time"]
        recent = (await s.journal_list("list", since=since))["entries"]
        assert len(recent) >= 2 and all(e["time"] >= since for e in recent)
        assert (await s.journal_list("list", session_id="no-such-session"))["entries"] == []

        status = await s.status()
        assert status.get("journal") is True
        assert status.get("journalEntries", 0) >= 4 and status.get("journalBytes", 0) > 0


async def test_journal_diff_and_restore_put_the_old_content_back_as_an_entry(journaled: Daemon) -> None:
    (journaled.root / "undo").mkdir()
    path = journaled.root / "undo" / "x.txt"
    async with await session(journaled) as s:
        created = await s.file.write("undo/x.txt", "alpha\nbeta\n")
        edited = await s.file.edit("undo/x.txt", "beta", "gamma")
        edit, create = (await s.journal_list("undo/x.txt"))["entries"]
        assert edit["operation"] == "edit"

        diff = await s.journal_diff(edit["entry"])
        assert diff["truncated"] is False
        lines = diff["diff"].splitlines()
        assert lines[0].startswith("--- ") and lines[0].endswith("x.txt (before)")
        assert lines[1].startswith("+++ ") and lines[1].endswith("x.txt (after)")
        assert lines[2].startswith("@@ -") and lines[2].endswith(" @@")
        assert "-beta" in lines and "+gamma" in lines
        assert "-alpha" not in lines and "+alpha" not in lines
        assert "+alpha" in (await s.journal_diff(create["entry"]))["diff"].splitlines()

        restored = await s.journal_restore(edit["entry"])
        assert restored["displayPath"] == "undo/x.txt" and restored.get("version") == created["version"]
        assert path.read_text() == "alpha\nbeta\n"
        assert (await s.file.read("undo/x.txt"))["lines"] == ["alpha", "beta"]
        restore = (await s.journal_list("undo/x.txt"))["entries"][0]
        assert restore["entry"] == restored["entry"] and restore["operation"] == "restore"
        assert (restore.get("before"), restore.get("after")) == (edited["version"], created["version"])
        assert restore["seq"] > edit["seq"]

        # The restore is undone like any change: the edit is back.
        redone = await s.journal_restore(restored["entry"])
        assert redone.get("version") == edited["version"] and path.read_text() == "alpha\ngamma\n"

        # Restoring the creation deletes the file; restoring that deletion recreates it.
        await s.journal_restore((await s.journal_list("undo/x.txt"))["entries"][0]["entry"])
        removed = await s.journal_restore(create["entry"])
        assert removed.get("version") is None and not path.exists()
        deletion = (await s.journal_list("undo/x.txt"))["entries"][0]
        assert deletion["entry"] == removed["entry"] and deletion.get("after") is None
        recreated = await s.journal_restore(deletion["entry"])
        assert recreated.get("version") == created["version"] and path.read_text() == "alpha\nbeta\n"

        for call in (s.journal_diff("999999999"), s.journal_restore("999999999")):
            with pytest.raises(FsError) as unknown:
                await call
            assert unknown.value.code == "FS_NOT_FOUND"


async def test_restoring_over_a_later_change_is_stale_with_its_diff_unless_forced(journaled: Daemon) -> None:
    (journaled.root / "stale").mkdir()
    path = journaled.root / "stale" / "y.txt"
    async with await session(journaled) as s:
        await s.file.write("stale/y.txt", "one\n")
        await s.file.edit("stale/y.txt", "one", "two")
        edit = (await s.journal_list("stale/y.txt"))["entries"][0]
        await s.file.write("stale/y.txt", "three\n")

        with pytest.raises(FsError) as stale:
            await s.journal_restore(edit["entry"])
        assert stale.value.code == "FS_STALE_VERSION"
        diff = stale.value.data.get("diff")
        assert isinstance(diff, str)
        assert "-two" in diff.splitlines() and "+three" in diff.splitlines()
        assert path.read_text() == "three\n"

        forced = await s.journal_restore(edit["entry"], force=True)
        assert path.read_text() == "one\n"
        restore = (await s.journal_list("stale/y.txt"))["entries"][0]
        assert restore["entry"] == forced["entry"] and restore["operation"] == "restore"


async def test_paths_outside_the_roots_are_refused_and_never_listed_nor_restored(journaled: Daemon) -> None:
    mine_dir = journaled.root / "mine"
    theirs_dir = journaled.root / "theirs"
    mine_dir.mkdir()
    theirs_dir.mkdir()
    async with await session(journaled, mine_dir) as mine, await session(journaled, theirs_dir) as theirs:
        await theirs.file.write("secret.txt", "v1\n")
        await theirs.file.write("secret.txt", "v2\n")
        their_entry = (await theirs.journal_list())["entries"][0]
        await mine.file.write("own.txt", "mine\n")

        for outside in (str(theirs_dir), "/etc"):
            with pytest.raises(FsError) as refused:
                await mine.journal_list(outside)
            assert refused.value.code == "FS_OUTSIDE_ROOT"
        listed = [e async for e in mine.journal_entries()]
        assert any(e["displayPath"] == "own.txt" for e in listed)
        mine_real = os.path.realpath(mine_dir)
        assert all(e["path"].startswith(mine_real + os.sep) for e in listed), [e["path"] for e in listed]
        with pytest.raises(FsError) as hidden:
            await mine.journal_diff(their_entry["entry"])
        assert hidden.value.code == "FS_NOT_FOUND"
        with pytest.raises(FsError) as kept:
            await mine.journal_restore(their_entry["entry"], force=True)
        assert kept.value.code in ("FS_NOT_FOUND", "FS_OUTSIDE_ROOT")
    assert (theirs_dir / "secret.txt").read_text() == "v2\n"


async def test_paging_with_limit_and_cursor_visits_every_entry_once(journaled: Daemon) -> None:
    (journaled.root / "pages").mkdir()
    async with await session(journaled) as s:
        for i in range(7):
            await s.file.write(f"pages/f{i}.txt", f"{i}\n")
        pages: list[list[JournalEntry]] = []
        cursor: str | None = None
        while True:
            page = await s.journal_list("pages", limit=3, cursor=cursor)
            pages.append(page["entries"])
            cursor = page.get("cursor")
            assert len(pages) <= 7, "the cursor never ends"
            if cursor is None:
                break
        assert [len(p) for p in pages] == [3, 3, 1]
        seen = [e for p in pages for e in p]
        assert [e["displayPath"] for e in seen] == [f"pages/f{i}.txt" for i in range(6, -1, -1)]
        assert len({e["entry"] for e in seen}) == 7 and all(e["operation"] == "create" for e in seen)
        assert [e["entry"] async for e in s.journal_entries("pages", limit=2)] == [e["entry"] for e in seen]


def test_the_synchronous_wrapper_lists_diffs_and_restores(journaled: Daemon) -> None:
    (journaled.root / "sync").mkdir()
    path = journaled.root / "sync" / "z.txt"
    with connect_sync(socket=journaled.socket, roots=[journaled.root], timeout=30) as s:
        s.file.write("sync/z.txt", "before\n")
        s.file.edit("sync/z.txt", "before", "after")
        entries = list(s.journal_entries("sync", limit=1))
        assert [e["operation"] for e in entries] == ["edit", "create"]
        assert "+after" in s.journal_diff(entries[0]["entry"])["diff"].splitlines()
        restored = s.journal_restore(entries[0]["entry"])
        assert path.read_text() == "before\n"
        assert s.journal_list("sync", limit=1)["entries"][0]["entry"] == restored["entry"]
        s.file.write("sync/z.txt", "later\n")
        with pytest.raises(FsError) as stale:
            s.journal_restore(entries[0]["entry"])
        assert stale.value.code == "FS_STALE_VERSION"
        s.journal_restore(entries[0]["entry"], force=True)
        assert path.read_text() == "before\n"


async def test_without_the_journal_the_calls_fail_before_anything_is_sent(daemon: Daemon) -> None:
    """On a daemon run with ``--no-journal`` (or one of a build before the journal) the feature
    is absent and the journal calls never leave the client."""
    off = Daemon(["--no-journal"]) if daemon.has_feature("journal") else None
    try:
        async with await session(off or daemon) as s:
            assert not s.has_feature("journal")
            await s.file.write("no-journal.txt", "x\n")
            for call in (s.journal_list("a.txt"), s.journal_diff("7"), s.journal_restore("7", force=True)):
                with pytest.raises(UnsupportedFeatureError) as refused:
                    await call
                assert refused.value.feature == "journal"
            with pytest.raises(UnsupportedFeatureError):
                await s.journal_entries().__anext__()
            # Nothing was sent that the daemon could have refused: the session goes on.
            status = await s.status()
            assert not status.get("journal") and status.get("journalEntries", 0) == 0
    finally:
        if off is not None:
            off.stop()
