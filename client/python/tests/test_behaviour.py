"""What a harness relies on, through the real socket: streams broken off, stale edits with their
diff, outside changes announced, owners and sessions kept apart, resume, dedup, cancellation,
and the daemon going away mid-call."""

from __future__ import annotations

import asyncio
import fcntl
import os
import re
import signal
from collections.abc import Awaitable, Callable, Iterator

import pytest

import filectx
from filectx import FsError, RpcError, Session, StreamError, TransportError
from filectx.wire import FileDidChange

from .conftest import Daemon


async def session(daemon: Daemon, **options: object) -> Session:
    return await filectx.connect(socket=daemon.socket, roots=[daemon.root], **options)  # type: ignore[arg-type]


async def next_change(changes: filectx.ChangeStream, match: Callable[[FileDidChange], bool]) -> FileDidChange:
    """The next ``file/didChange`` that ``match`` accepts, or a failure after 10 s."""

    async def find() -> FileDidChange:
        async for change in changes:
            if match(change):
                return change
        raise AssertionError("the change notifications ended")

    return await asyncio.wait_for(find(), 10)


async def eventually(condition: Callable[[], bool]) -> None:
    """Waits (up to 10 s) until ``condition`` holds."""
    await eventually_async(lambda: _ready(condition()))


async def _ready(value: bool) -> bool:
    return value


async def eventually_async(condition: Callable[[], Awaitable[bool]]) -> None:
    """Waits (up to 10 s) until ``condition`` holds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 10
    while not await condition():
        assert loop.time() < deadline, "the condition did not come true within 10 s"
        await asyncio.sleep(0.01)


async def busy_slots(s: Session, count: int) -> bool:
    """Whether ``count`` of the daemon's file-work slots are taken."""
    return (await s.status()).get("fileSlotsBusy") == count


async def settle() -> None:
    """Lets the loop run what a finished loop scheduled (an async generator's finalizer)."""
    for _ in range(10):
        await asyncio.sleep(0)


async def test_a_stream_broken_off_early_is_cancelled_at_the_daemon(daemon: Daemon) -> None:
    (daemon.root / "long.txt").write_text("\n".join(str(n) for n in range(1, 200_001)))
    async with await session(daemon) as s:
        stream = await s.fs.stream_text("long.txt", chunk_lines=1)
        seen = 0
        async for chunk in stream:
            assert chunk["lines"] == ["1"]
            seen += 1
            break
        assert seen == 1
        await settle()
        # The loop's end sent fs/streamCancel; the daemon answered that it stopped a running stream.
        assert stream.cancelled
        assert await stream.cancel() is True
        read = await s.file.read("long.txt", offset=199_999)
        assert read["lines"] == ["199999", "200000"]
        # `async with` cancels at once, whatever the loop did.
        async with await s.fs.stream_text("long.txt", chunk_lines=1) as scoped:
            async for chunk in scoped:
                break
        assert scoped.cancelled and await scoped.cancel() is True


async def test_a_stream_whose_task_is_cancelled_is_cancelled_at_the_daemon(daemon: Daemon) -> None:
    (daemon.root / "task.txt").write_text("\n".join(str(n) for n in range(100_000)))
    async with await s_(daemon) as s:
        stream = await s.fs.stream_text("task.txt", chunk_lines=1)
        first = asyncio.Event()

        async def consume() -> None:
            async for _ in stream:
                first.set()
                await asyncio.sleep(3600)

        task = asyncio.create_task(consume())
        await asyncio.wait_for(first.wait(), 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await settle()
        assert stream.cancelled and await stream.cancel() is True


async def s_(daemon: Daemon, **options: object) -> Session:
    return await session(daemon, **options)


async def test_a_reader_that_falls_behind_gets_a_stream_error(daemon: Daemon) -> None:
    (daemon.root / "lag.txt").write_text("\n".join(str(n) for n in range(5000)))
    async with await session(daemon, stream_buffer_chunks=4) as s:
        stream = await s.fs.stream_text("lag.txt", chunk_lines=1)
        # Read nothing while the chunks arrive, until the fifth unread one cancels the stream.
        await eventually(lambda: stream.cancelled)
        delivered = 0
        with pytest.raises(StreamError) as lagged:
            async for _ in stream:
                delivered += 1
        assert lagged.value.lagged and delivered == 4
        assert stream.cancelled
        assert (await s.status())["sessions"] >= 1


async def test_a_file_changed_mid_stream_ends_it_with_fs_stale_version(daemon: Daemon) -> None:
    # Over 16 MiB, so that the daemon streams it from the file rather than from a copy in memory.
    path = daemon.root / "moving.txt"
    path.write_text(("y" * 40 + "\n") * 600_000)
    try:
        async with await session(daemon, stream_buffer_chunks=100_000) as s:
            stream = await s.fs.stream_text("moving.txt", chunk_lines=100)
            iterator = aiter(stream)
            first = await anext(iterator)
            with open(path, "a") as more:
                more.write("more\n")
            with pytest.raises(FsError) as stale:
                while True:
                    chunk = await anext(iterator)
                    assert chunk["version"] == first["version"]
            assert stale.value.code == "FS_STALE_VERSION"
            assert stale.value.data["version"] == first["version"]
            assert stale.value.data["nextLine"] > 100 and (stale.value.data["nextLine"] - 1) % 100 == 0
    finally:
        path.unlink()


async def test_a_stale_edit_is_refused_with_the_diff_and_counts_as_read(daemon: Daemon) -> None:
    path = daemon.root / "stale.txt"
    path.write_text("one\ntwo\nthree\n")
    async with await session(daemon) as s:
        await s.file.read("stale.txt")
        path.write_text("one\ntwo\nthree\nfour\n")  # another process
        with pytest.raises(FsError) as refused:
            await s.file.edit("stale.txt", "two", "TWO")
        error = refused.value
        assert error.code == "FS_STALE_VERSION" and error.rpc_code == -31009
        diff = error.data["diff"]
        assert diff.startswith("--- stale.txt (as you last saw it)\n+++ stale.txt (now)\n")
        assert re.search(r"\n\+four\n?$", diff)
        assert error.data["reauthorized"] is True
        assert isinstance(error.data["currentVersion"], str)
        # Re-authorized: the same edit now goes through without a read.
        await s.file.edit("stale.txt", "two", "TWO")
    assert path.read_text() == "one\nTWO\nthree\nfour\n"


async def test_a_change_by_another_process_is_announced(daemon: Daemon) -> None:
    path = daemon.root / "watched.txt"
    path.write_text("before\n")
    async with await session(daemon) as s:
        changes = s.changes()
        read = await s.file.read("watched.txt")
        path.write_text("after\n")
        change = await next_change(changes, lambda c: c["displayPath"] == "watched.txt")
        assert change["path"] == str(path)
        assert isinstance(change["version"], str) and change["version"] != read["version"]
        assert "owner" not in change
        now = await s.fs.stat("watched.txt")
        assert now is not None and now["version"] == change["version"]


async def test_two_owners_of_one_session_are_kept_apart(daemon: Daemon) -> None:
    (daemon.root / "owners.txt").write_text("shared\n")
    async with await session(daemon) as s:
        changes = s.changes()
        await s.file.read("owners.txt", owner="planner")
        for owner in ("coder", None):
            with pytest.raises(FsError) as refused:
                await s.file.write("owners.txt", "x\n", owner=owner)
            assert refused.value.code == "FS_NOT_OBSERVED"
        await s.file.read("owners.txt", owner="coder")
        # The coder's edit makes the planner's record stale: the planner is told, by name.
        await s.file.edit("owners.txt", "shared", "coded", owner="coder")
        planner = await next_change(changes, lambda c: c.get("owner") == "planner")
        assert planner["displayPath"] == "owners.txt"
        with pytest.raises(FsError) as stale:
            await s.file.edit("owners.txt", "coded", "planned", owner="planner")
        assert stale.value.code == "FS_STALE_VERSION"
        # The refusal showed the planner the whole diff, which re-authorized it.
        assert stale.value.data["reauthorized"] is True
        assert (await s.file.stat("owners.txt", owner="planner"))["fresh"] is True
        assert (await s.file.stat("owners.txt", owner="coder"))["fresh"] is True


async def test_resume_takes_over_an_ended_session_once(daemon: Daemon) -> None:
    path = daemon.root / "resume.txt"
    path.write_text("kept\n")
    first = await session(daemon, resumable=True)
    token = first.resume_token
    assert token is not None and re.fullmatch(r"[0-9a-f]{64}", token)
    await first.file.read("resume.txt", owner="agent")
    await first.close()

    async with await session(daemon, resume=token, resumable=True) as second:
        assert second.resume_token not in (None, token)
        # Authorized by the first session's read, without reading again.
        await second.file.edit("resume.txt", "kept", "resumed", owner="agent")
    assert path.read_text() == "resumed\n"
    with pytest.raises(RpcError) as refused:
        await session(daemon, resume=token)
    assert refused.value.code == -32602 and refused.value.is_resume_refused
    assert refused.value.data == {"resume": "refused"}


async def test_dedup_reads_sends_the_same_text_once_per_owner(daemon: Daemon) -> None:
    (daemon.root / "dedup.txt").write_text("a fairly long line of text\n" * 30)
    async with await session(daemon, dedup_reads=True) as s:

        async def text(owner: str | None = None) -> str:
            result = await s.tools.call("read", {"file_path": "dedup.txt"}, owner=owner)
            return result["content"][0]["text"]

        assert re.match(r"^1\ta fairly long line", await text("a"))
        assert (await text("a")).startswith("(Unchanged: you already have this text of dedup.txt from line 1.")
        # Another owner has not received it.
        assert re.match(r"^1\ta fairly long line", await text("b"))
        # After a context reset the text is sent again.
        assert (await text("b")).startswith("(Unchanged")
        await s.context_reset("b")
        assert re.match(r"^1\ta fairly long line", await text("b"))
        # file/read, the harness's layer, is never deduplicated.
        assert len((await s.file.read("dedup.txt", owner="a"))["lines"]) == 30


async def test_stale_edits_merge_applies_an_edit_over_a_change_elsewhere(daemon: Daemon) -> None:
    def lines(**changed: str) -> str:
        return "".join(changed.get(f"l{i}", f"line {i}") + "\n" for i in range(1, 21))

    path = daemon.root / "merge.txt"
    outside = lines(l2="two")
    for stale_edits in ("refuse", "merge"):
        async with await session(daemon, stale_edits=stale_edits) as s:
            assert filectx.Features.STALE_EDITS in s.features
            path.write_text(lines())
            await s.tools.call("read", {"file_path": "merge.txt"})
            path.write_text(outside)
            edit = await s.tools.call("edit", {"file_path": "merge.txt", "old_string": "line 15\n", "new_string": "fifteen\n"})
            text = edit["content"][0]["text"]
            if stale_edits == "merge":
                assert not edit["isError"], text
                assert "\nApplied over an outside change since your last read" in text
                assert path.read_text() == lines(l2="two", l15="fifteen")
            else:
                assert edit["isError"], text
                assert path.read_text() == outside


async def test_two_sessions_are_isolated(daemon: Daemon) -> None:
    path = daemon.root / "iso.txt"
    path.write_text("a\n")
    async with await session(daemon) as a, await session(daemon) as b:
        a_changes = a.changes()
        await a.file.read("iso.txt")
        # a's read does not authorize b.
        with pytest.raises(FsError) as unobserved:
            await b.file.write("iso.txt", "b\n")
        assert unobserved.value.code == "FS_NOT_OBSERVED"
        await b.file.read("iso.txt")
        b_heard: list[FileDidChange] = []
        listening = b.on_did_change(b_heard.append)
        await b.file.write("iso.txt", "b\n")
        # a is told of b's write; b is not told of its own.
        assert (await next_change(a_changes, lambda c: c["path"] == str(path)))["displayPath"] == "iso.txt"
        assert b_heard == []
        listening.dispose()
        with pytest.raises(FsError) as stale:
            await a.file.edit("iso.txt", "a", "c")
        assert stale.value.code == "FS_STALE_VERSION"
    # A session rooted elsewhere cannot reach this root at all.
    elsewhere_root = daemon.dir / "elsewhere"
    elsewhere_root.mkdir()
    async with await filectx.connect(socket=daemon.socket, roots=[elsewhere_root]) as elsewhere:
        with pytest.raises(FsError) as outside:
            await elsewhere.file.read(str(path))
        assert outside.value.code == "FS_OUTSIDE_ROOT"


@pytest.fixture
def slot_daemon() -> Iterator[Daemon]:
    """A daemon with two file-work slots, so that one session holds at most one of them."""
    started = Daemon(["--file-slots", "2", "--lock-timeout", "30"])
    yield started
    started.stop()


async def test_cancelling_a_call_sends_cancel_request_and_the_daemon_withdraws_it(slot_daemon: Daemon) -> None:
    daemon = slot_daemon
    locked = daemon.root / "locked.txt"
    locked.write_text("locked\n")
    async with await session(daemon) as s:
        await s.file.read("locked.txt")
        with open(locked, "rb") as held:
            fcntl.flock(held, fcntl.LOCK_EX)  # another process's lock: the write waits, holding a slot
            blocked = asyncio.create_task(s.file.write("locked.txt", "written\n"))
            await eventually_async(lambda: busy_slots(s, 1))
            assert not blocked.done()
            # This session holds all its slots: the next call waits for one, and can be withdrawn.
            waiting = asyncio.create_task(s.file.write("waiting.txt", "never\n"))
            await asyncio.sleep(0.3)
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError) as cancelled:
                await waiting
            assert "file/write was cancelled before it started: nothing was changed" in (filectx.cancelled_outcome(cancelled.value) or "")
            tool = asyncio.create_task(s.tools.call("write", {"file_path": "tool.txt", "content": "never\n"}))
            await asyncio.sleep(0.3)
            tool.cancel()
            with pytest.raises(asyncio.CancelledError) as tool_cancelled:
                await tool
            assert "tools/call was cancelled before it started" in (filectx.cancelled_outcome(tool_cancelled.value) or "")
            # A timeout cancels the call the same way (asyncio.wait_for, or asyncio.timeout). The
            # read is of a file over 64 KiB read for the first time: file work, which waits for a
            # slot (a smaller or already cached one is answered at once, without a slot).
            (daemon.root / "big.txt").write_text("line\n" * 20_000)
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(s.file.read("big.txt"), 0.3)
            fcntl.flock(held, fcntl.LOCK_UN)
        assert (await asyncio.wait_for(blocked, 10))["operation"] == "update"
        assert (await s.file.read("locked.txt"))["lines"] == ["written"]
    assert not (daemon.root / "waiting.txt").exists()
    assert not (daemon.root / "tool.txt").exists()


async def test_a_cancelled_read_ends_at_once_even_when_the_daemon_does_not_answer(own_daemon: Daemon) -> None:
    (own_daemon.root / "r.txt").write_text("r\n")
    async with await session(own_daemon) as s:
        own_daemon.freeze()
        try:
            pending = asyncio.create_task(s.fs.read_text("r.txt"))
            await asyncio.sleep(0.05)
            pending.cancel()
            with pytest.raises(asyncio.CancelledError):
                await asyncio.wait_for(pending, 2)
        finally:
            own_daemon.thaw()
        assert (await s.file.read("r.txt"))["lines"] == ["r"]


async def test_a_cancelled_write_says_what_happened(own_daemon: Daemon) -> None:
    async with await session(own_daemon) as s:
        own_daemon.freeze()
        try:
            pending = asyncio.create_task(s.file.write("w.txt", "landed\n"))
            await asyncio.sleep(0.05)
            pending.cancel()
            await asyncio.sleep(0.05)
        finally:
            own_daemon.thaw()
        with pytest.raises(asyncio.CancelledError) as cancelled:
            await pending
    message = filectx.cancelled_outcome(cancelled.value) or ""
    landed = (own_daemon.root / "w.txt").exists()
    if landed:
        assert "ran to its end: its change was made" in message
        assert (own_daemon.root / "w.txt").read_text() == "landed\n"
    else:
        assert "cancelled before it started: nothing was changed" in message


async def test_the_daemon_going_away_mid_call_fails_calls_and_streams(own_daemon: Daemon) -> None:
    (own_daemon.root / "g.txt").write_text("\n".join(str(n) for n in range(50_000)))
    # Room for every chunk: the stream must end because the daemon went away, never because
    # this test read it too slowly while the daemon was still sending.
    s = await session(own_daemon, stream_buffer_chunks=100_000)
    changes = s.changes()
    stream = await s.fs.stream_text("g.txt", chunk_lines=1)
    iterator = aiter(stream)
    await anext(iterator)
    own_daemon.freeze()
    pending = asyncio.create_task(s.status())
    await asyncio.sleep(0.05)
    own_daemon.signal(signal.SIGKILL)
    with pytest.raises(TransportError):
        await asyncio.wait_for(pending, 10)
    await asyncio.wait_for(s.wait_closed(), 10)
    assert s.closed
    # The stream ends with the same error once its buffered chunks are read.
    with pytest.raises(TransportError):
        while True:
            await anext(iterator)
    with pytest.raises(TransportError):
        await s.file.read("g.txt")
    with pytest.raises(TransportError):
        await anext(changes)
    await s.close()  # harmless


async def test_close_does_not_hang_on_a_daemon_that_does_not_answer(own_daemon: Daemon) -> None:
    s = await session(own_daemon)
    own_daemon.freeze()
    try:
        loop = asyncio.get_running_loop()
        started = loop.time()
        await asyncio.wait_for(s.close(), 10)
        assert loop.time() - started < 6  # the shutdown's grace, then the hang-up's
        assert s.closed
        with pytest.raises(TransportError, match="the session was closed"):
            await s.status()
    finally:
        own_daemon.thaw()


async def test_a_stream_given_up_before_its_answer_is_cancelled_when_it_comes(own_daemon: Daemon) -> None:
    (own_daemon.root / "late.txt").write_text("\n".join(str(n) for n in range(200_000)))
    async with await session(own_daemon) as s:
        chunks = 0

        def count(_: object) -> None:
            nonlocal chunks
            chunks += 1

        s.on_notification("fs/textChunk", count)
        own_daemon.freeze()
        try:
            pending = asyncio.create_task(s.fs.stream_text("late.txt", chunk_lines=1))
            await asyncio.sleep(0.05)
            pending.cancel()
            with pytest.raises(asyncio.CancelledError):
                await pending
        finally:
            own_daemon.thaw()
        # The daemon started the stream when it read the request; the late answer cancels it.
        # What it had queued (at most its 8 MiB budget per connection) still arrives; then no
        # more, far before the file's 200,000 chunks.
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 20
        seen = -1
        while chunks != seen:
            assert loop.time() < deadline, "the stream's chunks kept coming"
            seen = chunks
            await asyncio.sleep(0.5)
        assert seen < 150_000
        assert (await s.file.read("late.txt", offset=200_000))["lines"] == ["199999"]


async def test_streams_cancelled_right_after_they_start_all_stop(own_daemon: Daemon) -> None:
    # The daemon may answer a cancel that comes right after the stream's answer `false` (its
    # subscription was not ready yet) and stream on; the client then cancels again at the next
    # chunk. Either way no stream runs to the end of the file.
    (own_daemon.root / "quick.txt").write_text("\n".join(str(n) for n in range(200_000)))
    async with await session(own_daemon) as s:
        chunks = 0

        def count(_: object) -> None:
            nonlocal chunks
            chunks += 1

        s.on_notification("fs/textChunk", count)
        for _ in range(30):
            stream = await s.fs.stream_text("quick.txt", chunk_lines=1)
            await stream.cancel()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 20
        seen = -1
        while chunks != seen:
            assert loop.time() < deadline, "the streams' chunks kept coming"
            seen = chunks
            await asyncio.sleep(0.5)
        assert seen < 150_000
