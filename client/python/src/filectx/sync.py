"""A thin synchronous wrapper over the asyncio client: :func:`connect` → :class:`SyncSession`,
with the same methods, arguments, results and errors as :class:`filectx.Session`.

Each session runs the asyncio client on an event loop of its own, in a daemon thread; every
method blocks until the daemon answers. With ``timeout=`` (seconds, per call) a call that takes
longer is cancelled at the daemon (``$/cancelRequest``) and raises :class:`~filectx.FsError`
``FS_ABORTED``, whose message says, for a call that changes files, whether the change happened.
So does a call interrupted by ``KeyboardInterrupt`` (which is then re-raised).

Listeners (:meth:`SyncSession.on_did_change`) run on the session's loop thread and must not
block; a gate handler given as a plain function runs in a worker thread.

    from filectx.sync import connect

    with connect(roots=["/home/me/project"]) as session:
        print(session.file.read("README.md", limit=10)["lines"])
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import inspect
import os
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Sequence
from types import TracebackType
from typing import Any, Final, TypeVar, cast

from . import session as aio
from ._channel import DEFAULT_MAX_FRAME_BYTES
from .errors import FsError, TransportError, cancelled_outcome
from .gate import GateOnTimeout, GateOperation, WriteIntentParams, WriteIntentResult
from .stream import TextStream
from .wire import (
    CallToolResult,
    ClientInfo,
    DaemonStatus,
    DenyParams,
    DiagnosticsMode,
    EditResult,
    FileDidChange,
    FileStatResult,
    FsInfo,
    InitializeResult,
    JournalDiffResult,
    JournalEntry,
    JournalListResult,
    JournalRestoreResult,
    LspDiagnosticsResult,
    ReadResult,
    ResolveResult,
    StaleEdits,
    TextChunk,
    ToolName,
    ToolsListResult,
    WriteExpectation,
    WriteResult,
)

T = TypeVar("T")

SyncGateHandler = Callable[[WriteIntentParams], "WriteIntentResult | bool"]
"""A gate handler for the synchronous client: a plain function (run in a worker thread) or an
async callable (run on the session's loop)."""


def _cancelled_message(task: asyncio.Task[Any]) -> str:
    """What a cancelled call said about its outcome (the client's CancelledError message)."""
    try:
        task.result()
    except asyncio.CancelledError as error:
        return cancelled_outcome(error) or "the call was cancelled"
    return "the call was cancelled"


class _Runner:
    """An event loop in a daemon thread, and a way to run coroutines on it from other threads."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="filectx-sync", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Runs ``coroutine`` on the loop and returns its result; see the module's doc for
        ``timeout`` and interrupts."""
        if threading.current_thread() is self._thread:
            coroutine.close()
            raise RuntimeError("a SyncSession method was called from its own loop thread (from a listener?)")
        if self.loop.is_closed():
            coroutine.close()
            raise TransportError("the session was closed")
        outcome: concurrent.futures.Future[T] = concurrent.futures.Future()
        started: list[asyncio.Task[T]] = []

        def finished(task: asyncio.Task[T]) -> None:
            if task.cancelled():
                outcome.set_exception(FsError("FS_ABORTED", _cancelled_message(task), {"code": "FS_ABORTED"}))
            elif (error := task.exception()) is not None:
                outcome.set_exception(error)
            else:
                outcome.set_result(task.result())

        def start() -> None:
            task = self.loop.create_task(coroutine)
            started.append(task)
            task.add_done_callback(finished)

        self.loop.call_soon_threadsafe(start)

        def cancel() -> None:
            if started:
                started[0].cancel()

        try:
            return outcome.result(timeout)
        except BaseException as interrupted:
            if outcome.done():
                raise  # the call's own result: its error
            self.loop.call_soon_threadsafe(cancel)
            if isinstance(interrupted, concurrent.futures.TimeoutError):
                # The call ends promptly once cancelled (a write waits a few seconds at most to
                # learn whether it landed); it may also have finished meanwhile.
                return outcome.result()
            # KeyboardInterrupt and the like: let the call settle, then re-raise.
            with contextlib.suppress(BaseException):
                outcome.result()
            raise

    def stop(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()


def connect(
    *,
    roots: Sequence[str | os.PathLike[str]],
    socket: str | os.PathLike[str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    tools: Sequence[ToolName] | None = None,
    read_only: bool | None = None,
    deny: DenyParams | None = None,
    read_max_bytes: int | None = None,
    resumable: bool | None = None,
    resume: str | None = None,
    dedup_reads: bool | None = None,
    stale_edits: StaleEdits | None = None,
    json_budget: bool | None = None,
    diagnostics: DiagnosticsMode | None = None,
    client_info: ClientInfo | None = None,
    stream_buffer_chunks: int = aio.DEFAULT_STREAM_BUFFER_CHUNKS,
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
    timeout: float | None = None,
) -> SyncSession:
    """Connects and opens a session, as :func:`filectx.connect` (same arguments, same errors);
    ``timeout`` bounds each later call (see the module's doc)."""
    runner = _Runner()
    try:
        session = runner.run(
            aio.connect(
                roots=roots,
                socket=socket,
                cwd=cwd,
                tools=tools,
                read_only=read_only,
                deny=deny,
                read_max_bytes=read_max_bytes,
                resumable=resumable,
                resume=resume,
                dedup_reads=dedup_reads,
                stale_edits=stale_edits,
                json_budget=json_budget,
                diagnostics=diagnostics,
                client_info=client_info,
                stream_buffer_chunks=stream_buffer_chunks,
                max_frame_bytes=max_frame_bytes,
            )
        )
    except BaseException:
        runner.stop()
        raise
    return SyncSession(runner, session, timeout)


class _Part:
    def __init__(self, owner: SyncSession) -> None:
        self._owner = owner

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return self._owner._run(coroutine)


class SyncTools(_Part):
    """:class:`filectx.ToolsApi`, blocking."""

    def list(self) -> ToolsListResult:
        return self._run(self._owner._session.tools.list())

    def call(self, name: str, arguments: dict[str, Any] | None = None, *, owner: str | None = None) -> CallToolResult:
        return self._run(self._owner._session.tools.call(name, arguments, owner=owner))


class SyncFile(_Part):
    """:class:`filectx.FileApi`, blocking."""

    def read(
        self,
        path: str,
        *,
        offset: int | None = None,
        limit: int | None = None,
        max_line_chars: int | None = None,
        owner: str | None = None,
    ) -> ReadResult:
        api = self._owner._session.file
        return self._run(api.read(path, offset=offset, limit=limit, max_line_chars=max_line_chars, owner=owner))

    def write(self, path: str, content: str, *, owner: str | None = None) -> WriteResult:
        return self._run(self._owner._session.file.write(path, content, owner=owner))

    def edit(
        self, path: str, old_string: str, new_string: str, *, replace_all: bool | None = None, owner: str | None = None
    ) -> EditResult:
        api = self._owner._session.file
        return self._run(api.edit(path, old_string, new_string, replace_all=replace_all, owner=owner))

    def stat(self, path: str, *, owner: str | None = None) -> FileStatResult:
        return self._run(self._owner._session.file.stat(path, owner=owner))


class SyncFs(_Part):
    """:class:`filectx.FsApi`, blocking."""

    def resolve(self, path: str) -> ResolveResult:
        return self._run(self._owner._session.fs.resolve(path))

    def stat(self, path: str) -> FsInfo | None:
        return self._run(self._owner._session.fs.stat(path))

    def read_text(self, path: str, *, offset: int | None = None, limit: int | None = None) -> ReadResult:
        return self._run(self._owner._session.fs.read_text(path, offset=offset, limit=limit))

    def write_text(
        self, path: str, content: str, expect: WriteExpectation, *, keep_conventions: bool | None = None
    ) -> WriteResult:
        api = self._owner._session.fs
        return self._run(api.write_text(path, content, expect, keep_conventions=keep_conventions))

    def edit_text(
        self, path: str, old_string: str, new_string: str, *, expected_version: str, replace_all: bool | None = None
    ) -> EditResult:
        api = self._owner._session.fs
        return self._run(
            api.edit_text(path, old_string, new_string, expected_version=expected_version, replace_all=replace_all)
        )

    def stream_text(self, path: str, *, offset: int | None = None, chunk_lines: int | None = None) -> SyncTextStream:
        stream = self._run(self._owner._session.fs.stream_text(path, offset=offset, chunk_lines=chunk_lines))
        return SyncTextStream(self._owner._runner, stream)


class SyncTextStream:
    """:class:`filectx.TextStream`, blocking: iterate it once with ``for``; leaving the loop
    early cancels it at the daemon (at once with ``with``, else when the loop's iterator is
    collected: at once in CPython)."""

    def __init__(self, runner: _Runner, stream: TextStream) -> None:
        self._runner = runner
        self._stream = stream

    @property
    def cancelled(self) -> bool:
        """Whether ``fs/streamCancel`` was sent for this stream."""
        return self._stream.cancelled

    def __iter__(self) -> Iterator[TextChunk]:
        iterator = aiter(self._stream)
        try:
            while True:
                try:
                    chunk = self._runner.run(_anext(iterator))
                except StopAsyncIteration:
                    return
                yield chunk
        finally:
            if not self._runner.loop.is_closed():
                self._runner.run(_aclose(iterator))

    def cancel(self) -> bool:
        """As :meth:`filectx.TextStream.cancel`."""
        return self._runner.run(self._stream.cancel())

    def close(self) -> None:
        """Cancels the stream unless it ended."""
        self._runner.run(self._stream.aclose())

    def __enter__(self) -> SyncTextStream:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None) -> None:
        self.close()


async def _anext(iterator: Any) -> TextChunk:
    chunk: TextChunk = await iterator.__anext__()
    return chunk


async def _aclose(iterator: Any) -> None:
    await iterator.aclose()


class SyncGate:
    """:class:`filectx.Gate`, blocking."""

    def __init__(self, owner: SyncSession, gate: aio.Gate) -> None:
        self._owner = owner
        self._gate = gate
        self.gate_id: Final = gate.gate_id

    def unregister(self) -> None:
        self._owner._run(self._gate.unregister())


class SyncGateApi(_Part):
    """:class:`filectx.GateApi`, blocking."""

    def register(
        self,
        paths: Sequence[str],
        handler: SyncGateHandler | Callable[[WriteIntentParams], Awaitable[WriteIntentResult | bool]],
        *,
        operations: Sequence[GateOperation] | None = None,
        name: str | None = None,
        timeout_ms: int | None = None,
        on_timeout: GateOnTimeout | None = None,
    ) -> SyncGate:
        """As :meth:`filectx.GateApi.register`; a plain function ``handler`` runs in a worker
        thread (a withdrawn intent's answer is then dropped)."""
        if inspect.iscoroutinefunction(handler):
            decide = cast(Callable[[WriteIntentParams], Awaitable["WriteIntentResult | bool"]], handler)
        else:
            plain = cast(SyncGateHandler, handler)

            async def decide(intent: WriteIntentParams) -> WriteIntentResult | bool:
                return await asyncio.to_thread(plain, intent)

        api = self._owner._session.gate
        gate = self._run(
            api.register(paths, decide, operations=operations, name=name, timeout_ms=timeout_ms, on_timeout=on_timeout)
        )
        return SyncGate(self._owner, gate)


class SyncChangeStream:
    """:class:`filectx.ChangeStream`, blocking: ``for change in session.changes()``, or
    :meth:`next` with a timeout."""

    def __init__(self, runner: _Runner, stream: aio.ChangeStream) -> None:
        self._runner = runner
        self._stream = stream

    def next(self, timeout: float | None = None) -> FileDidChange:
        """The next change; raises ``TimeoutError`` when none came within ``timeout`` seconds,
        ``StopIteration`` once the stream ended."""
        try:
            return self._runner.run(asyncio.wait_for(self._stream.__anext__(), timeout))
        except StopAsyncIteration:
            raise StopIteration from None
        except asyncio.TimeoutError:
            raise TimeoutError(f"no file/didChange within {timeout} s") from None

    def __iter__(self) -> SyncChangeStream:
        return self

    def __next__(self) -> FileDidChange:
        return self.next()

    def close(self) -> None:
        self._runner.loop.call_soon_threadsafe(self._stream.close)

    def __enter__(self) -> SyncChangeStream:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None) -> None:
        self.close()


class SyncSession:
    """:class:`filectx.Session`, blocking. Build it with :func:`connect`; use it as ``with`` to
    close it at the end."""

    def __init__(self, runner: _Runner, session: aio.Session, timeout: float | None) -> None:
        self._runner = runner
        self._session = session
        self.timeout = timeout
        """Seconds each call may take before it is cancelled (``None``: no limit)."""
        self.tools: Final = SyncTools(self)
        self.file: Final = SyncFile(self)
        self.fs: Final = SyncFs(self)
        self.gate: Final = SyncGateApi(self)

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return self._runner.run(coroutine, self.timeout)

    @property
    def session(self) -> aio.Session:
        """The asyncio session underneath (use it only on its loop: :attr:`loop`)."""
        return self._session

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The session's event loop (running in its own thread)."""
        return self._runner.loop

    @property
    def info(self) -> InitializeResult:
        return self._session.info

    @property
    def features(self) -> frozenset[str]:
        return self._session.features

    @property
    def session_id(self) -> str:
        return self._session.session_id

    @property
    def resume_token(self) -> str | None:
        return self._session.resume_token

    @property
    def closed(self) -> bool:
        return self._session.closed

    def has_feature(self, feature: str) -> bool:
        return self._session.has_feature(feature)

    def require(self, feature: str) -> None:
        self._session.require(feature)

    def status(self) -> DaemonStatus:
        return self._run(self._session.status())

    def context_reset(self, owner: str | None = None) -> None:
        self._run(self._session.context_reset(owner))

    def journal_list(
        self,
        path: str | None = None,
        *,
        session_id: str | None = None,
        owner: str | None = None,
        since: int | None = None,
        cursor: str | None = None,
        limit: int | None = None,
    ) -> JournalListResult:
        return self._run(
            self._session.journal_list(
                path, session_id=session_id, owner=owner, since=since, cursor=cursor, limit=limit
            )
        )

    def journal_entries(
        self,
        path: str | None = None,
        *,
        session_id: str | None = None,
        owner: str | None = None,
        since: int | None = None,
        limit: int | None = None,
    ) -> Iterator[JournalEntry]:
        """As :meth:`filectx.Session.journal_entries`: one ``journal/list`` call a page, each
        under :attr:`timeout`."""
        cursor: str | None = None
        while True:
            page = self.journal_list(path, session_id=session_id, owner=owner, since=since, cursor=cursor, limit=limit)
            yield from page["entries"]
            cursor = page.get("cursor")
            if cursor is None:
                return

    def journal_diff(self, entry: str) -> JournalDiffResult:
        return self._run(self._session.journal_diff(entry))

    def journal_restore(self, entry: str, force: bool = False, owner: str | None = None) -> JournalRestoreResult:
        return self._run(self._session.journal_restore(entry, force, owner))

    def lsp_diagnostics(self, path: str) -> LspDiagnosticsResult:
        return self._run(self._session.lsp_diagnostics(path))

    def on_did_change(self, listener: Callable[[FileDidChange], None]) -> aio.Subscription:
        """As :meth:`filectx.Session.on_did_change`; ``listener`` runs on the loop thread."""

        async def add() -> aio.Subscription:
            return self._session.on_did_change(listener)

        subscription = self._runner.run(add())

        def dispose() -> None:
            if not self._runner.loop.is_closed():
                self._runner.loop.call_soon_threadsafe(subscription.dispose)

        return aio.Subscription(dispose)

    def changes(self, buffer: int = aio.DEFAULT_CHANGE_BUFFER) -> SyncChangeStream:
        """As :meth:`filectx.Session.changes`."""

        async def make() -> aio.ChangeStream:
            return self._session.changes(buffer)

        return SyncChangeStream(self._runner, self._runner.run(make()))

    def close(self) -> None:
        """Ends the session politely and stops its loop thread. Harmless when called again."""
        if self._runner.loop.is_closed():
            return
        try:
            self._runner.run(self._session.close())
        finally:
            self._runner.stop()

    def __enter__(self) -> SyncSession:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None) -> None:
        self.close()


__all__ = [
    "SyncChangeStream",
    "SyncFile",
    "SyncFs",
    "SyncGate",
    "SyncGateApi",
    "SyncSession",
    "SyncTextStream",
    "SyncTools",
    "connect",
]
