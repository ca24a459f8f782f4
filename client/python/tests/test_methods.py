"""Every method of the protocol through the client, against a real filectxd."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

import filectx
from filectx import FsError, RpcError, Session, UnsupportedFeatureError

from .conftest import Daemon


async def session(daemon: Daemon, **options: object) -> Session:
    return await filectx.connect(socket=daemon.socket, roots=[daemon.root], **options)  # type: ignore[arg-type]


async def test_initialize_answers_the_session_and_its_features(daemon: Daemon) -> None:
    async with await session(daemon, client_info={"name": "pytest", "version": "1"}) as s:
        assert s.info["protocolVersion"] == filectx.wire.PROTOCOL_VERSION
        assert s.info["serverInfo"]["name"] == "filectxd"
        assert s.session_id == s.info["sessionId"] and s.session_id
        assert s.socket_path == daemon.socket
        assert {"owners", "cancelRequest", "contextReset", "resume", "dedupReads"} <= s.features
        assert s.has_feature("owners") and not s.has_feature("no such feature")
        assert s.info["capabilities"]["tools"] == ["read", "write", "edit"]
        assert s.info["limits"]["readLineLimit"] == 2000
        assert s.resume_token is None
        assert not s.closed
    assert s.closed


async def test_initialize_refusals_are_typed(daemon: Daemon, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    with pytest.raises(FsError) as refused:
        await filectx.connect(socket=daemon.socket, roots=[daemon.root], cwd=outside)
    assert refused.value.code == "FS_OUTSIDE_ROOT"
    assert refused.value.rpc_code == -31007
    with pytest.raises(FsError) as relative:
        await filectx.connect(socket=daemon.socket, roots=["relative/root"])
    assert relative.value.code in ("FS_INVALID_ARGUMENT", "FS_NOT_FOUND")


async def test_tools_list_and_call(daemon: Daemon) -> None:
    (daemon.root / "tools.txt").write_text("one\ntwo\n")
    async with await session(daemon, tools=["read", "edit"]) as s:
        listed = await s.tools.list()
        assert [tool["name"] for tool in listed["tools"]] == ["read", "edit"]
        assert listed["tools"][0]["inputSchema"]["required"] == ["file_path"]
        read = await s.tools.call("read", {"file_path": "tools.txt"})
        assert read["isError"] is False
        assert read["content"][0]["text"].startswith("1\tone\n2\ttwo\n")
        edited = await s.tools.call("edit", {"file_path": "tools.txt", "old_string": "two", "new_string": "2"})
        assert edited["isError"] is False and "Edited tools.txt." in edited["content"][0]["text"]
        failed = await s.tools.call("read", {"file_path": "missing.txt"})
        assert failed["isError"] is True and failed.get("error", {}) == {"name": "FsError", "code": "FS_NOT_FOUND"}
        # A tool the session does not have is a JSON-RPC error, not a tool failure.
        with pytest.raises(RpcError) as unknown:
            await s.tools.call("write", {"file_path": "x", "content": ""})
        assert unknown.value.code == -32602
        as_owner = await s.tools.call("read", {"file_path": "tools.txt"}, owner="helper")
        assert as_owner["isError"] is False
    assert (daemon.root / "tools.txt").read_text() == "one\n2\n"


async def test_file_read_write_edit_stat(daemon: Daemon) -> None:
    path = daemon.root / "file.txt"
    path.write_text("alpha\nbeta\ngamma\n")
    async with await session(daemon) as s:
        before = await s.file.stat("file.txt")
        assert before["exists"] and before["kind"] == "file" and before["fresh"] is False
        assert "observedVersion" not in before
        read = await s.file.read("file.txt", offset=2, limit=1)
        assert (read["startLine"], read["lines"], read["totalLines"], read["partial"]) == (2, ["beta"], 3, True)
        assert read["displayPath"] == "file.txt"
        stat = await s.file.stat("file.txt")
        assert stat["fresh"] is True and stat.get("observedVersion") == read["version"] == stat.get("version")
        edited = await s.file.edit("file.txt", "a", "A", replace_all=True)
        assert edited["replacements"] == 5 and edited["replaceAll"] is True
        assert path.read_text() == "AlphA\nbetA\ngAmmA\n"
        written = await s.file.write("file.txt", "whole\n")
        assert written["operation"] == "update" and written["version"] != edited["version"]
        created = await s.file.write("sub/new.txt", "new\n")
        assert created["operation"] == "create" and created["displayPath"] == "sub/new.txt"
        cut = await s.file.read("file.txt", max_line_chars=2)
        assert cut["lines"] == ["wh"] and cut["truncatedLines"] == [1]
        nothing = await s.file.stat("absent.txt")
        assert nothing["exists"] is False and nothing["kind"] == "none"
        (daemon.root / "unread.txt").write_text("u")
        with pytest.raises(FsError) as unread:
            await s.file.write("unread.txt", "x")
        assert unread.value.code == "FS_NOT_OBSERVED"
        with pytest.raises(FsError) as past:
            await s.file.read("file.txt", offset=9)
        assert past.value.code == "FS_NOT_FOUND" and past.value.data["totalLines"] == 1
        with pytest.raises(FsError) as ambiguous:
            await s.file.write("amb.txt", "x x\n")
            await s.file.edit("amb.txt", "x", "y")
        assert ambiguous.value.code == "FS_AMBIGUOUS_EDIT" and ambiguous.value.data["matches"] == 2
    assert path.read_text() == "whole\n"
    assert (daemon.root / "sub" / "new.txt").read_text() == "new\n"


async def test_fs_provider_layer(daemon: Daemon) -> None:
    path = daemon.root / "fs.txt"
    path.write_text("one\ntwo\n")
    async with await session(daemon) as s:
        resolved = await s.fs.resolve("fs.txt")
        assert resolved == {
            "path": str(path),
            "displayPath": "fs.txt",
            "exists": True,
            "root": str(daemon.root),
        }
        info = await s.fs.stat("fs.txt")
        assert info is not None and info["type"] == "file" and info.get("size") == 8
        folder = await s.fs.stat(".")
        assert folder is not None and folder["type"] == "directory" and folder["version"] is None
        assert await s.fs.stat("nothing-here") is None
        text = await s.fs.read_text("fs.txt", offset=1, limit=5)
        assert text["lines"] == ["one", "two"] and text["version"] == info["version"]
        # fs/readText records nothing: the file layer still needs a read.
        with pytest.raises(FsError) as unobserved:
            await s.file.edit("fs.txt", "one", "1")
        assert unobserved.value.code == "FS_NOT_OBSERVED"
        edited = await s.fs.edit_text("fs.txt", "one", "1", expected_version=text["version"])
        assert edited["replacements"] == 1
        with pytest.raises(FsError) as stale:
            await s.fs.edit_text("fs.txt", "two", "2", expected_version=text["version"])
        assert stale.value.code == "FS_STALE_VERSION"
        replaced = await s.fs.write_text("fs.txt", "r\n", {"kind": "replaceIfVersion", "version": edited["version"]})
        assert replaced["operation"] == "update"
        with pytest.raises(FsError) as exists:
            await s.fs.write_text("fs.txt", "c\n", {"kind": "createIfAbsent"})
        assert exists.value.code == "FS_NOT_OBSERVED"
        created = await s.fs.write_text("fs-new.txt", "c\r\n", {"kind": "createIfAbsent"})
        assert created["operation"] == "create"
        kept = await s.fs.write_text("fs-new.txt", "d\n", {"kind": "any"}, keep_conventions=True)
        assert kept["operation"] == "update"
        with pytest.raises(FsError) as outside:
            await s.fs.resolve("/etc/passwd")
        assert outside.value.code == "FS_OUTSIDE_ROOT"
    assert path.read_text() == "r\n"
    assert (daemon.root / "fs-new.txt").read_bytes() == b"d\r\n"


async def test_fs_stream_text_delivers_every_line_of_one_version(daemon: Daemon) -> None:
    (daemon.root / "stream.txt").write_text("".join(f"line {n}\n" for n in range(1, 2501)))
    async with await session(daemon) as s:
        stream = await s.fs.stream_text("stream.txt", offset=2, chunk_lines=1000)
        chunks = [chunk async for chunk in stream]
        assert [c["startLine"] for c in chunks] == [2, 1002, 2002]
        assert [c["done"] for c in chunks] == [False, False, True]
        assert len({c["version"] for c in chunks}) == 1
        lines = [line for chunk in chunks for line in chunk["lines"]]
        assert lines == [f"line {n}" for n in range(2, 2501)]
        assert stream.version == chunks[0]["version"]
        # The daemon ended it: nothing left to cancel.
        assert await stream.cancel() is False
        with pytest.raises(FsError) as missing:
            await s.fs.stream_text("missing.txt")
        assert missing.value.code == "FS_NOT_FOUND"


async def test_context_reset_and_status(daemon: Daemon) -> None:
    async with await session(daemon) as s:
        await s.context_reset()
        await s.context_reset("sub-agent")
        with pytest.raises(FsError) as bad:
            await s.context_reset("x" * 200)
        assert bad.value.code == "FS_INVALID_ARGUMENT"
        status = await s.status()
        assert status["pid"] == daemon.pid
        assert status["sessions"] >= 1 and status["requests"] >= 1
        assert isinstance(status["version"], str)


async def test_read_only_refuses_writes_at_every_layer(daemon: Daemon) -> None:
    (daemon.root / "ro.txt").write_text("ro\n")
    async with await session(daemon, read_only=True) as s:
        assert s.info["capabilities"]["readOnly"] is True
        read = await s.file.read("ro.txt")
        for attempt in (
            s.file.write("ro.txt", "w\n"),
            s.file.edit("ro.txt", "ro", "rw"),
            s.fs.write_text("ro.txt", "w\n", {"kind": "any"}),
            s.fs.edit_text("ro.txt", "ro", "rw", expected_version=read["version"]),
        ):
            with pytest.raises(FsError) as refused:
                await attempt
            assert refused.value.code == "FS_PERMISSION_DENIED"
    assert (daemon.root / "ro.txt").read_text() == "ro\n"


async def test_missing_features_are_refused_before_sending(daemon: Daemon) -> None:
    async with await session(daemon) as s:
        before = (await s.status())["requests"]
        if not s.has_feature("gate"):
            with pytest.raises(UnsupportedFeatureError) as unsupported:

                async def allow(_: filectx.WriteIntentParams) -> bool:
                    return True

                await s.gate.register([str(daemon.root)], allow)
            assert unsupported.value.feature == "gate"
        # A feature this daemon lacks is refused locally (as for a daemon of an older build).
        object.__setattr__(s, "features", s.features - {"owners"})
        with pytest.raises(UnsupportedFeatureError):
            await s.file.read("x.txt", owner="o")
        assert (await s.status())["requests"] == before + 1


async def test_on_did_change_listener_and_changes_iterator(daemon: Daemon) -> None:
    path = daemon.root / "listened.txt"
    path.write_text("v1\n")
    async with await session(daemon) as s:
        heard: list[filectx.wire.FileDidChange] = []
        arrived = asyncio.Event()

        def listener(change: filectx.wire.FileDidChange) -> None:
            heard.append(change)
            arrived.set()

        subscription = s.on_did_change(listener)
        changes = s.changes()
        await s.file.read("listened.txt")
        path.write_text("v2\n")
        change = await asyncio.wait_for(changes.__anext__(), 10)
        await asyncio.wait_for(arrived.wait(), 10)
        assert change == heard[0]
        assert change["path"] == str(path) and change["displayPath"] == "listened.txt"
        now = await s.fs.stat("listened.txt")
        assert now is not None and change["version"] == now["version"]
        subscription.dispose()
        subscription.dispose()
        await s.file.read("listened.txt")
        os.unlink(path)
        deleted = await asyncio.wait_for(changes.__anext__(), 10)
        assert deleted["version"] is None
        assert len(heard) == 1
    # The iterator ends quietly when the session is closed.
    assert [c async for c in changes] == []


async def test_the_search_tools_when_asked_for(daemon: Daemon) -> None:
    (daemon.root / "search").mkdir()
    (daemon.root / "search" / "needle.txt").write_text("hay\nneedle here\nhay\n")
    async with await session(daemon, tools=["read", "glob", "grep"], read_only=True) as s:
        assert s.info["capabilities"]["tools"] == ["read", "glob", "grep"]
        globbed = await s.tools.call("glob", {"pattern": "**/needle.txt"})
        assert globbed["isError"] is False and "search/needle.txt" in globbed["content"][0]["text"]
        grepped = await s.tools.call("grep", {"pattern": "needle", "path": "search", "output_mode": "content"})
        assert grepped["isError"] is False and "needle.txt\n2\tneedle here" in grepped["content"][0]["text"]
