"""The write gate's client side (feature ``gate``) against a real filectxd: the handler is an
async callable whose answer decides, refusals reach writers as ``FS_PERMISSION_DENIED`` with
``data["gate"]``, a withdrawn intent cancels the handler's task. Skipped, saying so, when the
daemon under test has no gates (a build before them)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import filectx
from filectx import FsError, Session, WriteIntentParams
from filectx.gate import WriteIntentResult

from .conftest import Daemon


@pytest.fixture(scope="module")
def gated() -> Iterator[Daemon]:
    started = Daemon()
    if not started.has_feature("gate"):
        started.stop()
        pytest.skip("this filectxd has no write gates (feature `gate`): set FILECTXD to a build with them")
    (started.root / "src").mkdir()
    yield started
    started.stop()


async def session(daemon: Daemon, **options: object) -> Session:
    return await filectx.connect(socket=daemon.socket, roots=[daemon.root], **options)  # type: ignore[arg-type]


def src(daemon: Daemon) -> str:
    return str(daemon.root / "src")


async def test_an_allowed_write_lands_after_the_handler_saw_its_diff(gated: Daemon) -> None:
    seen: list[WriteIntentParams] = []

    async def review(intent: WriteIntentParams) -> WriteIntentResult:
        seen.append(intent)
        assert not Path(intent["path"]).exists() or intent["operation"] != "create"
        return {"allow": True, "reason": "looks fine"}

    async with await session(gated) as gatekeeper, await session(gated) as writer:
        gate = await gatekeeper.gate.register([src(gated)], review, name="review", operations=["create", "edit"])
        listed = (await gatekeeper.status()).get("gates", [])
        assert [(g["gateId"], g.get("name"), g["operations"]) for g in listed] == [
            (gate.gate_id, "review", ["create", "edit"])
        ]
        assert listed[0]["sessionId"] == gatekeeper.session_id and listed[0]["onTimeout"] == "deny"
        created = await writer.file.write("src/allowed.txt", "hi\n")
        assert created["operation"] == "create"
        intent = seen[-1]
        assert intent["gateId"] == gate.gate_id and intent["sessionId"] == writer.session_id
        assert intent["path"] == str(gated.root / "src" / "allowed.txt")
        assert intent["operation"] == "create" and intent["bytes"] == 3 and "+hi\n" in intent["diff"]
        assert intent.get("clientName") == "filectx-python" and "oldVersion" not in intent
        assert intent["newVersion"] == created["version"]
        # Not among the gate's operations: an update is not asked.
        await writer.file.write("src/allowed.txt", "again\n")
        assert len(seen) == 1
        await writer.file.read("src/allowed.txt", owner="sub")
        await writer.file.edit("src/allowed.txt", "again", "edited", owner="sub")
        assert seen[-1]["operation"] == "edit" and seen[-1].get("owner") == "sub"
        assert seen[-1].get("oldVersion") is not None
        await gate.unregister()
        await writer.file.write("src/after.txt", "free\n")
        assert len(seen) == 2
    assert (gated.root / "src" / "allowed.txt").read_text() == "edited\n"


async def test_a_refusal_reaches_the_writer_with_data_gate(gated: Daemon) -> None:
    (gated.root / "src" / "keep.txt").write_text("one\n")

    async def deny(intent: WriteIntentParams) -> WriteIntentResult:
        return {"allow": False, "reason": "keep the English names"}

    async with await session(gated) as gatekeeper, await session(gated) as writer:
        gate = await gatekeeper.gate.register([src(gated)], deny, name="review")
        await writer.file.read("src/keep.txt")
        with pytest.raises(FsError) as refused:
            await writer.file.edit("src/keep.txt", "one", "uno")
        assert refused.value.code == "FS_PERMISSION_DENIED"
        data = refused.value.data["gate"]
        assert data["gateId"] == gate.gate_id and data["name"] == "review"
        assert data["reason"] == "keep the English names" and data["outcome"] == "denied"
        tool = await writer.tools.call("edit", {"file_path": "src/keep.txt", "old_string": "one", "new_string": "uno"})
        error = tool.get("error")
        assert tool["isError"] is True and error is not None and error["code"] == "FS_PERMISSION_DENIED"
        assert (
            'Refused by the supervisor\'s gate "review": "keep the English names" (the supervisor\'s words'
            in tool["content"][0]["text"]
        )
        await gate.unregister()
    assert (gated.root / "src" / "keep.txt").read_text() == "one\n"


async def test_a_bool_answer_and_a_failing_handler(gated: Daemon) -> None:
    answers = iter([False, True])

    async def by_bool(intent: WriteIntentParams) -> bool:
        return next(answers)

    async def broken(intent: WriteIntentParams) -> bool:
        raise RuntimeError("the reviewer crashed")

    async with await session(gated) as gatekeeper, await session(gated) as writer:
        gate = await gatekeeper.gate.register([src(gated)], by_bool)
        with pytest.raises(FsError) as refused:
            await writer.file.write("src/bool.txt", "b\n")
        assert refused.value.data["gate"]["outcome"] == "denied"
        assert (await writer.file.write("src/bool.txt", "b\n"))["operation"] == "create"
        await gate.unregister()
        failing = await gatekeeper.gate.register([src(gated)], broken)
        with pytest.raises(FsError) as crashed:
            await writer.file.write("src/broken.txt", "x\n")
        assert "the gate's handler failed: the reviewer crashed" in crashed.value.data["gate"]["reason"]
        await failing.unregister()
    assert not (gated.root / "src" / "broken.txt").exists()


async def test_a_withdrawn_intent_cancels_the_handler(gated: Daemon) -> None:
    asked = asyncio.Event()
    withdrawn = asyncio.Event()

    async def silent(intent: WriteIntentParams) -> bool:
        asked.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            withdrawn.set()
            raise
        return True

    async with await session(gated) as gatekeeper, await session(gated) as writer:
        gate = await gatekeeper.gate.register([src(gated)], silent, timeout_ms=300, on_timeout="deny")
        with pytest.raises(FsError) as late:
            await writer.file.write("src/late.txt", "x\n")
        assert late.value.data["gate"]["outcome"] == "timeout"
        await asyncio.wait_for(withdrawn.wait(), 10)
        # The writer cancels its own write while the gate deliberates: the daemon withdraws the
        # intent, and the handler's task is cancelled again.
        asked.clear()
        withdrawn.clear()
        await gate.unregister()
        gate = await gatekeeper.gate.register([src(gated)], silent)
        pending = asyncio.create_task(writer.file.write("src/cancelled.txt", "x\n"))
        await asyncio.wait_for(asked.wait(), 10)
        pending.cancel()
        with pytest.raises(asyncio.CancelledError) as cancelled:
            await pending
        assert "nothing was changed" in (filectx.cancelled_outcome(cancelled.value) or "")
        await asyncio.wait_for(withdrawn.wait(), 10)
        await gate.unregister()
    assert not (gated.root / "src" / "late.txt").exists()
    assert not (gated.root / "src" / "cancelled.txt").exists()


async def test_a_closed_gatekeeper_fails_its_intents_closed(gated: Daemon) -> None:
    asked = asyncio.Event()

    async def slow(intent: WriteIntentParams) -> bool:
        asked.set()
        await asyncio.sleep(3600)
        return True

    writer = await session(gated)
    gatekeeper = await session(gated)
    try:
        await gatekeeper.gate.register([src(gated)], slow)
        pending = asyncio.create_task(writer.file.write("src/closed.txt", "x\n"))
        await asyncio.wait_for(asked.wait(), 10)
        await gatekeeper.close()
        with pytest.raises(FsError) as refused:
            await asyncio.wait_for(pending, 10)
        assert refused.value.data["gate"]["outcome"] == "disconnected"
        # No gate covers the file any more.
        assert (await writer.file.write("src/closed.txt", "x\n"))["operation"] == "create"
    finally:
        await writer.close()
        await gatekeeper.close()


def test_a_sync_session_gate_runs_a_plain_function(gated: Daemon) -> None:
    from filectx.sync import connect

    with connect(socket=gated.socket, roots=[gated.root]) as gatekeeper, connect(
        socket=gated.socket, roots=[gated.root]
    ) as writer:
        def short_only(intent: WriteIntentParams) -> WriteIntentResult:
            assert threading.current_thread() is not threading.main_thread()
            return {"allow": intent["bytes"] < 10, "reason": "too long"}

        gate = gatekeeper.gate.register([src(gated)], short_only)
        assert writer.file.write("src/short.txt", "short\n")["operation"] == "create"
        with pytest.raises(FsError) as refused:
            writer.file.write("src/long.txt", "much too long\n")
        assert refused.value.data["gate"]["reason"] == "too long"
        gate.unregister()
