"""The synchronous wrapper against a real filectxd: the same methods, results and errors,
blocking; streams as iterators; a per-call timeout that cancels at the daemon."""

from __future__ import annotations

import fcntl
import threading
import time
from collections.abc import Iterator

import pytest

from filectx import FsError, RpcError, TransportError
from filectx.sync import SyncSession, connect
from filectx.wire import FileDidChange

from .conftest import Daemon


def session(daemon: Daemon, **options: object) -> SyncSession:
    return connect(socket=daemon.socket, roots=[daemon.root], **options)  # type: ignore[arg-type]


def test_every_layer_blocking(daemon: Daemon) -> None:
    path = daemon.root / "sync.txt"
    path.write_text("one\ntwo\n")
    with session(daemon) as s:
        assert s.session_id and "owners" in s.features and s.has_feature("owners")
        assert [tool["name"] for tool in s.tools.list()["tools"]] == ["read", "write", "edit"]
        assert s.tools.call("read", {"file_path": "sync.txt"})["isError"] is False
        read = s.file.read("sync.txt", limit=1)
        assert read["lines"] == ["one"] and read["partial"] is True
        assert s.file.stat("sync.txt")["fresh"] is True
        edited = s.file.edit("sync.txt", "two", "2")
        assert s.file.write("sync.txt", "three\n")["operation"] == "update"
        assert s.fs.resolve("sync.txt")["path"] == str(path)
        info = s.fs.stat("sync.txt")
        assert info is not None and info["version"] != edited["version"]
        text = s.fs.read_text("sync.txt")
        assert text["lines"] == ["three"]
        s.fs.edit_text("sync.txt", "three", "3", expected_version=text["version"])
        s.fs.write_text("sync-new.txt", "n\n", {"kind": "createIfAbsent"})
        s.context_reset()
        assert s.status()["sessions"] >= 1
        with pytest.raises(FsError) as missing:
            s.file.read("missing.txt")
        assert missing.value.code == "FS_NOT_FOUND"
        with pytest.raises(RpcError):
            s.tools.call("glob", {"pattern": "*"})
    assert s.closed
    s.close()  # harmless
    with pytest.raises(TransportError):
        s.status()
    assert path.read_text() == "3\n"


def test_a_stream_is_an_iterator_cancelled_when_the_loop_stops(daemon: Daemon) -> None:
    (daemon.root / "sync-stream.txt").write_text("\n".join(str(n) for n in range(100_000)))
    with session(daemon) as s:
        whole = s.fs.stream_text("sync-stream.txt", offset=99_001, chunk_lines=400)
        assert [chunk["startLine"] for chunk in whole] == [99_001, 99_401, 99_801]
        stream = s.fs.stream_text("sync-stream.txt", chunk_lines=1)
        for chunk in stream:
            assert chunk["lines"] == ["0"]
            break
        # The loop's generator was closed when it was dropped: the cancel is out.
        assert stream.cancelled and stream.cancel() is True
        with s.fs.stream_text("sync-stream.txt", chunk_lines=1) as scoped:
            next(iter(scoped))
        assert scoped.cancelled


def test_changes_block_until_they_come(daemon: Daemon) -> None:
    path = daemon.root / "sync-watched.txt"
    path.write_text("v1\n")
    with session(daemon) as s:
        heard: list[FileDidChange] = []
        arrived = threading.Event()

        def listener(change: FileDidChange) -> None:
            heard.append(change)
            arrived.set()

        listening = s.on_did_change(listener)
        changes = s.changes()
        with pytest.raises(TimeoutError):
            changes.next(timeout=0.1)
        s.file.read("sync-watched.txt")
        path.write_text("v2\n")
        change = changes.next(timeout=10)
        assert change["displayPath"] == "sync-watched.txt"
        assert arrived.wait(10) and heard == [change]
        listening.dispose()
        changes.close()
        with pytest.raises(StopIteration):
            changes.next(timeout=1)


@pytest.fixture
def slot_daemon() -> Iterator[Daemon]:
    started = Daemon(["--file-slots", "2", "--lock-timeout", "30"])
    yield started
    started.stop()


def test_a_timeout_cancels_the_call_at_the_daemon(slot_daemon: Daemon) -> None:
    daemon = slot_daemon
    files = [daemon.root / "locked-1.txt", daemon.root / "locked-2.txt"]
    for path in files:
        path.write_text("locked\n")
    with session(daemon) as first, session(daemon) as second, session(daemon, timeout=0.5) as s:
        writers = list(zip((first, second), files))
        for writer, path in writers:
            writer.file.read(path.name)
        held = [open(path, "rb") for path in files]
        try:
            for handle in held:
                fcntl.flock(handle, fcntl.LOCK_EX)
            # Two writes wait for their locks, each holding one of the daemon's two slots.
            blocked = [
                threading.Thread(target=lambda w=w, p=p: w.file.write(p.name, "held\n"), daemon=True)
                for w, p in writers
            ]
            for thread in blocked:
                thread.start()
            deadline = time.monotonic() + 10
            while s.status().get("fileSlotsBusy") != 2:
                assert time.monotonic() < deadline, "the two writes did not take the two slots"
                time.sleep(0.01)
            # This write waits for a slot until the timeout, and is withdrawn.
            with pytest.raises(FsError) as timed_out:
                s.file.write("waiting.txt", "never\n")
            assert timed_out.value.code == "FS_ABORTED"
            assert "file/write was cancelled before it started: nothing was changed" in str(timed_out.value)
        finally:
            for handle in held:
                handle.close()  # releases the lock
        for thread in blocked:
            thread.join(10)
        assert [path.read_text() for path in files] == ["held\n", "held\n"]
        assert not (daemon.root / "waiting.txt").exists()
        assert s.file.write("waiting.txt", "now\n")["operation"] == "create"


def test_the_daemon_going_away_is_a_transport_error(own_daemon: Daemon) -> None:
    with session(own_daemon) as s:
        own_daemon.stop()
        with pytest.raises(TransportError):
            s.status()
        assert s.closed
