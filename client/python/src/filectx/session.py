""":func:`connect` and :class:`Session`: one filectx session over one connection, with a typed
method for every method of the protocol.

Features the daemon does not announce in ``capabilities.features`` are refused locally
(:class:`~filectx.UnsupportedFeatureError`) before anything is sent.

Cancellation: cancelling the asyncio task of a call (``task.cancel()``, ``asyncio.timeout``,
``asyncio.wait_for``) sends LSP ``$/cancelRequest {id}``; the daemon withdraws the request if it
has not started its file work yet, and the call raises :class:`asyncio.CancelledError`. A call
that changes files (``file.write``, ``file.edit``, ``fs.write_text``, ``fs.edit_text``,
``tools.call``, ``gate.register``, ``journal_restore``) first waits briefly for the daemon's answer, so that when the
``CancelledError`` arrives the change either happened or never will; its message says which
(:func:`~filectx.cancelled_outcome` reads it on every Python version).
"""

from __future__ import annotations

import asyncio
import inspect
import os
import socket as socketlib
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from types import TracebackType
from typing import Any, Final

from . import gate as gate_wire
from ._channel import DEFAULT_MAX_FRAME_BYTES, Channel, ServerRequestHandler
from .errors import (
    FsError,
    RpcError,
    StreamError,
    TransportError,
    UnsupportedFeatureError,
)
from .features import Features, refused_feature
from .stream import STREAM_CANCEL, TextStream
from .trust import check_folder, check_peer, check_socket_file, socket_path
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
    SubscriptionId,
    TextChunkNotification,
    ToolName,
    ToolsListResult,
    WriteExpectation,
    WriteResult,
)

CLIENT_NAME: Final = "filectx-python"
CLIENT_VERSION: Final = "0.1.0"
CLOSE_GRACE: Final = 2.0
"""Seconds :meth:`Session.close` gives the daemon to answer ``shutdown`` and to hang up."""


DEFAULT_STREAM_BUFFER_CHUNKS: Final = 256
"""Chunks a stream buffers for a slow reader before it is cancelled as lagged."""
DEFAULT_CHANGE_BUFFER: Final = 4096
"""Notifications a :meth:`Session.changes` iterator buffers before it fails as lagged."""


async def connect(
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
    stream_buffer_chunks: int = DEFAULT_STREAM_BUFFER_CHUNKS,
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
) -> Session:
    """Connects to the daemon and opens a session (``initialize``).

    ``socket`` defaults to :func:`filectx.trust.default_socket_path` (``FILECTX_SOCKET``,
    ``$XDG_RUNTIME_DIR/filectx.sock``, ``/tmp/filectx-$UID/filectx.sock``). Only a daemon of this
    user is trusted: the socket's folder must be ours and closed to other writers, and the
    process serving it must run as our effective uid (``SO_PEERCRED``), else nothing is sent.

    The other arguments are ``initialize``'s: ``roots`` (absolute folders the session may
    touch), ``cwd`` (relative paths resolve there; default ``roots[0]``), ``tools`` (the
    model-facing tools; ``glob``/``grep`` need feature ``search``, ``undo`` ``journal``,
    ``diagnostics`` ``diagnostics``, kept only when ``capabilities.diagnostics``), ``read_only``, ``deny``
    (rules added to the daemon's), ``read_max_bytes`` (the ``read`` tool's budget),
    ``resumable`` (ask for a :attr:`Session.resume_token`), ``resume`` (take over an ended
    resumable session's observations), ``dedup_reads``, ``stale_edits`` (``"merge"``: an ``edit``
    tool call whose observation is stale is applied over an outside change that keeps away from
    what it replaces; default ``"refuse"``), ``json_budget`` (``read_max_bytes`` counts the
    tools' text as JSON escapes it), ``diagnostics`` (``"wait"``, the daemon's default: writes,
    edits and restores wait for their file's language server and report what they introduced in
    their result's ``diagnostics``; ``"off"``: they do not).

    Raises :class:`~filectx.UntrustedSocketError` when the socket or its folder could be another
    user's, :class:`~filectx.TransportError` when no daemon answers, :class:`~filectx.FsError`
    when ``initialize`` is refused (a root outside the allowed ones: ``FS_PERMISSION_DENIED``;
    a cwd outside the roots: ``FS_OUTSIDE_ROOT``), :class:`~filectx.RpcError` for a refused
    ``resume`` (``is_resume_refused``), :class:`~filectx.UnsupportedFeatureError` when an option
    needs a feature this daemon lacks.
    """
    path = socket_path(socket)
    await asyncio.to_thread(_check_path, path)
    gates = _GateRegistry()
    channel = await _open(path, max_frame_bytes, {gate_wire.GATE_WRITE_INTENT: gates.decide})
    params: dict[str, Any] = {
        "clientInfo": client_info if client_info is not None else {"name": CLIENT_NAME, "version": CLIENT_VERSION},
        "roots": [os.fspath(root) for root in roots],
    }
    optional: dict[str, Any] = {
        "cwd": os.fspath(cwd) if cwd is not None else None,
        "tools": list(tools) if tools is not None else None,
        "readOnly": read_only,
        "deny": deny,
        "readMaxBytes": read_max_bytes,
        "resumable": resumable,
        "resume": resume,
        "dedupReads": dedup_reads,
        "staleEdits": stale_edits,
        "jsonBudget": json_budget,
        "diagnostics": diagnostics,
    }
    params.update({key: value for key, value in optional.items() if value is not None})
    try:
        info: InitializeResult = await channel.request("initialize", params)
    except BaseException as error:
        channel.abort("initialize failed")
        refused = refused_feature(params, error)
        if refused is not None:
            raise refused from error
        raise
    return Session(channel, path, info, gates, stream_buffer_chunks)


def _check_path(path: str) -> None:
    check_folder(path)
    check_socket_file(path)


async def _open(path: str, max_frame_bytes: int, server_requests: dict[str, ServerRequestHandler]) -> Channel:
    sock = socketlib.socket(socketlib.AF_UNIX, socketlib.SOCK_STREAM)
    sock.setblocking(False)
    try:
        await asyncio.get_running_loop().sock_connect(sock, path)
    except OSError as error:
        sock.close()
        hint = ""
        if isinstance(error, (FileNotFoundError, ConnectionRefusedError)):
            hint = " (is filectxd running? start it with `filectxd`, or give the socket of a running one)"
        raise TransportError(f"cannot connect to filectxd at {path}: {error.strerror or error}{hint}") from error
    try:
        check_peer(sock, path)
        # Frames are read with readuntil/readexactly; the limit bounds only the header search.
        reader, writer = await asyncio.open_unix_connection(sock=sock, limit=64 * 1024)
    except BaseException:
        sock.close()
        raise
    return Channel(reader, writer, server_requests, max_frame_bytes=max_frame_bytes)


class _GateRegistry:
    """The gates of one session and their handlers."""

    def __init__(self) -> None:
        self.handlers: dict[str, gate_wire.GateHandler] = {}

    async def decide(self, params: Any) -> gate_wire.WriteIntentResult:
        """Answers one ``gate/writeIntent``; cancelled when the daemon withdraws it."""
        gate_id = params.get("gateId") if isinstance(params, dict) else None
        handler = self.handlers.get(gate_id) if isinstance(gate_id, str) else None
        if handler is None:
            return {"allow": False, "reason": f"this client has no handler for gate {gate_id}"}
        try:
            decision = await handler(params)
        except asyncio.CancelledError:
            raise
        except Exception as error:
            return {"allow": False, "reason": f"the gate's handler failed: {error}"}
        if isinstance(decision, bool):
            return {"allow": decision}
        if not isinstance(decision, dict):
            return {"allow": False, "reason": f"the gate's handler answered {decision!r}, not a decision"}
        answer: gate_wire.WriteIntentResult = {"allow": decision.get("allow") is True}
        reason = decision.get("reason")
        if isinstance(reason, str):
            answer["reason"] = reason
        return answer


class Gate:
    """A registered gate (:meth:`GateApi.register`)."""

    def __init__(self, session: Session, gate_id: str) -> None:
        self._session = session
        self.gate_id: Final = gate_id
        """The daemon's id for it."""

    async def unregister(self) -> None:
        """Removes it (``gate/unregister``); its handler is asked nothing more."""
        self._session._gates.handlers.pop(self.gate_id, None)
        params: gate_wire.GateUnregisterParams = {"gateId": self.gate_id}
        await self._session._channel.request(gate_wire.GATE_UNREGISTER, params)


class Subscription:
    """Something to stop listening with (:meth:`Session.on_did_change`)."""

    def __init__(self, dispose: Callable[[], None]) -> None:
        self._dispose = dispose

    def dispose(self) -> None:
        """Stops the listener. Harmless when called again."""
        self._dispose()


class ChangeStream:
    """The ``file/didChange`` notifications of a session as an async iterator
    (:meth:`Session.changes`): from its creation on, in order.

    It ends when :meth:`close` is called or the session is closed by :meth:`Session.close`;
    it raises :class:`~filectx.TransportError` when the connection broke, and
    :class:`~filectx.StreamError` (``lagged``) when more than its buffer went unread.
    """

    def __init__(self, session: Session, buffer: int) -> None:
        self._queue: deque[FileDidChange] = deque()
        self._buffer = max(1, buffer)
        self._waiter: asyncio.Future[None] | None = None
        self._error: BaseException | None = None
        self._ended = False
        self._channel = session._channel
        remove_listener = session._channel.on_notification("file/didChange", self._push)
        remove_close = session._channel.on_close(self._closed)

        def detach() -> None:
            remove_listener()
            remove_close()

        self._detach = detach

    def _push(self, change: FileDidChange) -> None:
        if self._ended:
            return
        if len(self._queue) >= self._buffer:
            self._end(StreamError(f"more than {self._buffer} change notifications went unread", lagged=True))
            return
        self._queue.append(change)
        self._wake()

    def _closed(self, error: TransportError) -> None:
        self._end(None if self._channel.closed_by_client else TransportError(str(error)))

    def _end(self, error: BaseException | None) -> None:
        if self._ended:
            return
        self._ended = True
        self._error = error
        self._detach()
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def close(self) -> None:
        """Stops listening; the iterator ends after what it buffered."""
        self._end(None)

    def __aiter__(self) -> ChangeStream:
        return self

    async def __anext__(self) -> FileDidChange:
        while True:
            if self._queue:
                return self._queue.popleft()
            if self._ended:
                if self._error is not None:
                    error, self._error = self._error, None
                    raise error
                raise StopAsyncIteration
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None

    async def __aenter__(self) -> ChangeStream:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()


class ToolsApi:
    """The model-facing tools layer (MCP shapes): a tool's failure is a result with
    ``isError: true``, never an exception."""

    def __init__(self, session: Session) -> None:
        self._session = session

    async def list(self) -> ToolsListResult:
        """``tools/list``: the session's tools with their JSON schemas."""
        result: ToolsListResult = await self._session._channel.request("tools/list")
        return result

    async def call(
        self, name: str, arguments: dict[str, Any] | None = None, *, owner: str | None = None
    ) -> CallToolResult:
        """``tools/call``: calls the tool ``name`` with ``arguments`` (snake_case, as in its
        input schema), exactly as a model would, on behalf of ``owner`` (a sub-agent sharing
        the session; feature ``owners``) or the session's default owner.

        Raises :class:`~filectx.RpcError` -32602 for a tool this session does not have.
        """
        params: dict[str, Any] = {"name": name, "arguments": arguments if arguments is not None else {}}
        self._session._owned(owner, params)
        result: CallToolResult = await self._session._channel.request("tools/call", params, settle_on_cancel=True)
        return result


class FileApi:
    """The session-aware file-context layer: reads record which version this session (owner)
    saw; writes and edits need that record to be current (else ``FS_NOT_OBSERVED`` or
    ``FS_STALE_VERSION``, the latter with ``data["diff"]``)."""

    def __init__(self, session: Session) -> None:
        self._session = session

    async def read(
        self,
        path: str,
        *,
        offset: int | None = None,
        limit: int | None = None,
        max_line_chars: int | None = None,
        owner: str | None = None,
    ) -> ReadResult:
        """``file/read``: a window of whole lines (from ``offset``, 1-based; at most ``limit``,
        capped at 2000), recording the file's version for ``owner``. ``max_line_chars`` cuts
        longer lines (feature ``wholeLines``)."""
        params: dict[str, Any] = {"path": path}
        _put(params, offset=offset, limit=limit)
        if max_line_chars is not None:
            self._session.require(Features.WHOLE_LINES)
            params["maxLineChars"] = max_line_chars
        self._session._owned(owner, params)
        result: ReadResult = await self._session._channel.request("file/read", params)
        return result

    async def write(self, path: str, content: str, *, owner: str | None = None) -> WriteResult:
        """``file/write``: creates the file, or replaces an existing one that ``owner`` read
        (the version still there), atomically, keeping its BOM and CRLF endings."""
        params: dict[str, Any] = {"path": path, "content": content}
        self._session._owned(owner, params)
        result: WriteResult = await self._session._channel.request("file/write", params, settle_on_cancel=True)
        return result

    async def edit(
        self,
        path: str,
        old_string: str,
        new_string: str,
        *,
        replace_all: bool | None = None,
        owner: str | None = None,
    ) -> EditResult:
        """``file/edit``: replaces an exact, literal string once (every occurrence with
        ``replace_all``) in a file ``owner`` read at its current version."""
        params: dict[str, Any] = {"path": path, "oldString": old_string, "newString": new_string}
        _put(params, replaceAll=replace_all)
        self._session._owned(owner, params)
        result: EditResult = await self._session._channel.request("file/edit", params, settle_on_cancel=True)
        return result

    async def stat(self, path: str, *, owner: str | None = None) -> FileStatResult:
        """``file/stat``: what is at ``path``, the version ``owner`` observed and whether that is
        still ``fresh``. Nothing there is ``exists: False``, not an error."""
        params: dict[str, Any] = {"path": path}
        self._session._owned(owner, params)
        result: FileStatResult = await self._session._channel.request("file/stat", params)
        return result


class FsApi:
    """The provider layer: records nothing; writes take an explicit expectation."""

    def __init__(self, session: Session) -> None:
        self._session = session

    async def resolve(self, path: str) -> ResolveResult:
        """``fs/resolve``: the canonical path of ``path`` and the root that holds it."""
        result: ResolveResult = await self._session._channel.request("fs/resolve", {"path": path})
        return result

    async def stat(self, path: str) -> FsInfo | None:
        """``fs/stat``: type, size and content version; ``None`` when nothing is there."""
        result: FsInfo | None = await self._session._channel.request("fs/stat", {"path": path})
        return result

    async def read_text(self, path: str, *, offset: int | None = None, limit: int | None = None) -> ReadResult:
        """``fs/readText``: a window of whole lines, recording nothing (a later ``file.edit``
        still needs a ``file.read``)."""
        params: dict[str, Any] = {"path": path}
        _put(params, offset=offset, limit=limit)
        result: ReadResult = await self._session._channel.request("fs/readText", params)
        return result

    async def write_text(
        self, path: str, content: str, expect: WriteExpectation, *, keep_conventions: bool | None = None
    ) -> WriteResult:
        """``fs/writeText``: writes ``content`` if the file matches ``expect``:
        ``{"kind": "createIfAbsent"}``, ``{"kind": "replaceIfVersion", "version": v}`` or
        ``{"kind": "any"}``. Exact bytes unless ``keep_conventions``."""
        params: dict[str, Any] = {"path": path, "content": content, "expect": expect}
        _put(params, keepConventions=keep_conventions)
        result: WriteResult = await self._session._channel.request("fs/writeText", params, settle_on_cancel=True)
        return result

    async def edit_text(
        self,
        path: str,
        old_string: str,
        new_string: str,
        *,
        expected_version: str,
        replace_all: bool | None = None,
    ) -> EditResult:
        """``fs/editText``: a literal replacement applied only if the file is at
        ``expected_version``."""
        params: dict[str, Any] = {
            "path": path,
            "oldString": old_string,
            "newString": new_string,
            "expectedVersion": expected_version,
        }
        _put(params, replaceAll=replace_all)
        result: EditResult = await self._session._channel.request("fs/editText", params, settle_on_cancel=True)
        return result

    async def stream_text(
        self, path: str, *, offset: int | None = None, chunk_lines: int | None = None
    ) -> TextStream:
        """``fs/streamText``: streams a text file of any size from line ``offset`` (default 1)
        in chunks of ``chunk_lines`` lines (default 1000, at most 2000), all of one version;
        see :class:`~filectx.TextStream`. Failures before the first chunk (not found, not text,
        outside the roots, offset past the end) raise here."""
        session = self._session
        params: dict[str, Any] = {"path": path}
        _put(params, offset=offset, chunkLines=chunk_lines)
        stream = TextStream(
            session._channel,
            offset if offset is not None else 1,
            session._stream_buffer_chunks,
            session._cancel_subscription,
        )

        def started(subscription: Any) -> None:
            # On the reader, before any chunk of it is dispatched.
            if isinstance(subscription, (int, str)):
                stream._started(subscription)
                session._streams[subscription] = stream

                def forget() -> None:
                    session._streams.pop(subscription, None)

                stream._on_end.append(forget)

        def late(subscription: Any) -> None:
            # The call was given up before its answer, but the daemon started the stream.
            if isinstance(subscription, (int, str)):
                session._background(session._cancel_subscription(subscription))

        try:
            await session._channel.request("fs/streamText", params, on_result=started, on_late_result=late)
        except asyncio.CancelledError:
            # Started meanwhile (the answer came as the task was cancelled): stop it.
            stream._start_cancel()
            stream._end(None)
            raise
        if stream.subscription is None:
            raise StreamError("the daemon answered fs/streamText without a subscription id")
        return stream


class GateApi:
    """The write gate (feature ``gate``)."""

    def __init__(self, session: Session) -> None:
        self._session = session

    async def register(
        self,
        paths: Sequence[str],
        handler: gate_wire.GateHandler,
        *,
        operations: Sequence[gate_wire.GateOperation] | None = None,
        name: str | None = None,
        timeout_ms: int | None = None,
        on_timeout: gate_wire.GateOnTimeout | None = None,
        gate_token: str | None = None,
    ) -> Gate:
        """``gate/register``: before a write or edit under ``paths`` lands (any session's), the
        daemon asks ``handler`` — an async callable given the :class:`~filectx.gate.WriteIntentParams`
        that returns a :class:`~filectx.gate.WriteIntentResult` or a bool — and its answer decides.
        Refusals reach the writer as ``FS_PERMISSION_DENIED`` with ``data["gate"]``. The
        handler's task is cancelled when the daemon withdraws the intent; a handler that raises
        refuses the write. ``gate_token`` is the daemon's gate token; by default it is read from
        the file next to the socket (:func:`filectx.gate.read_gate_token`), which only the
        daemon's user can read."""
        session = self._session
        session.require(Features.GATE)
        params: dict[str, Any] = {"paths": list(paths)}
        _put(
            params,
            operations=list(operations) if operations is not None else None,
            name=name,
            timeoutMs=timeout_ms,
            onTimeout=on_timeout,
            gateToken=gate_token if gate_token is not None else gate_wire.read_gate_token(session.socket_path),
        )

        def registered(result: Any) -> None:
            # On the reader: the handler is in place before any intent for the gate is read.
            if isinstance(result, dict) and isinstance(result.get("gateId"), str):
                session._gates.handlers[result["gateId"]] = handler

        try:
            result: gate_wire.GateRegisterResult = await session._channel.request(
                gate_wire.GATE_REGISTER, params, settle_on_cancel=True, on_result=registered
            )
        except asyncio.CancelledError:
            # Registered all the same (the daemon answered while the call settled): nobody holds
            # the gate, so take it down again.
            for gate_id, registered_handler in list(session._gates.handlers.items()):
                if registered_handler is handler:
                    session._gates.handlers.pop(gate_id, None)
                    session._background(session._channel.request(gate_wire.GATE_UNREGISTER, {"gateId": gate_id}))
            raise
        return Gate(session, result["gateId"])


class Session:
    """One filectx session: its own roots, its own record of what it read. Build it with
    :func:`connect`; use it as ``async with`` to close it at the end."""

    def __init__(
        self, channel: Channel, socket_path: str, info: InitializeResult, gates: _GateRegistry, stream_buffer_chunks: int
    ) -> None:
        self._channel = channel
        self._gates = gates
        self._stream_buffer_chunks = stream_buffer_chunks
        self._streams: dict[SubscriptionId, TextStream] = {}
        self._tasks: set[asyncio.Future[Any]] = set()
        self._retry_cancel: dict[SubscriptionId, bool] = {}
        self.info: Final = info
        """The ``initialize`` result: ``sessionId``, ``instructions``, ``capabilities``,
        ``limits``, ``resumeToken``."""
        self.socket_path: Final = socket_path
        """The socket the session is connected to."""
        self.features: Final = frozenset(info["capabilities"].get("features", []))
        """The features the daemon announced."""
        self.tools: Final = ToolsApi(self)
        self.file: Final = FileApi(self)
        self.fs: Final = FsApi(self)
        self.gate: Final = GateApi(self)
        channel.cancel_requests = Features.CANCEL_REQUEST in self.features
        channel.on_notification("fs/textChunk", self._chunk)

    def _chunk(self, params: TextChunkNotification) -> None:
        if not isinstance(params, dict):
            return
        subscription = params.get("subscription")
        stream = self._streams.get(subscription) if isinstance(subscription, (int, str)) else None
        if stream is not None:
            stream._deliver(params)
            return
        result = params.get("result")
        if not isinstance(subscription, (int, str)) or not isinstance(result, dict):
            return
        if self._retry_cancel.pop(subscription, False) and not result.get("done"):
            # Our cancel was answered `false`, yet the stream sends on: the daemon had not made
            # the subscription ready when the cancel came. It is now; cancel it again, once.
            self._background(self._channel.request(STREAM_CANCEL, [subscription]))

    async def _cancel_subscription(self, subscription: SubscriptionId) -> bool:
        """Sends ``fs/streamCancel`` and returns the daemon's answer; a ``false`` one is retried
        at the stream's next chunk, should one come."""
        stopped = bool(await self._channel.request(STREAM_CANCEL, [subscription]))
        if not stopped:
            self._retry_cancel[subscription] = True
            if len(self._retry_cancel) > 256:
                self._retry_cancel.pop(next(iter(self._retry_cancel)))
        return stopped

    def _background(self, work: Awaitable[Any]) -> None:
        """Runs ``work`` as a task kept alive until it ends; what it raises goes to the loop's
        exception handler."""
        task = asyncio.ensure_future(work)
        self._tasks.add(task)

        def done(finished: asyncio.Future[Any]) -> None:
            self._tasks.discard(finished)
            if not finished.cancelled() and (error := finished.exception()) is not None:
                if not isinstance(error, TransportError):
                    finished.get_loop().call_exception_handler(
                        {"message": "a filectx background task failed", "exception": error}
                    )

        task.add_done_callback(done)

    def _owned(self, owner: str | None, params: dict[str, Any]) -> None:
        if owner is not None:
            self.require(Features.OWNERS)
            params["owner"] = owner

    @property
    def session_id(self) -> str:
        """The session's id in the daemon's logs (and in gate intents)."""
        return self.info["sessionId"]

    @property
    def resume_token(self) -> str | None:
        """The token to resume this session with once it ended (with ``resumable=True``). A
        secret: anyone of this user holding it may resume the session."""
        return self.info.get("resumeToken")

    @property
    def closed(self) -> bool:
        """Whether the connection is gone (closed, or the daemon went away)."""
        return self._channel.is_closed

    async def wait_closed(self) -> None:
        """Returns once the connection is gone."""
        await self._channel.wait_closed()

    def has_feature(self, feature: str) -> bool:
        """Whether the daemon announced ``feature``."""
        return feature in self.features

    def require(self, feature: str) -> None:
        """Raises :class:`~filectx.UnsupportedFeatureError` unless the daemon announced ``feature``."""
        if feature not in self.features:
            raise UnsupportedFeatureError(feature)

    async def status(self) -> DaemonStatus:
        """``daemon/status``: the daemon's version, uptime, sessions and counters."""
        result: DaemonStatus = await self._channel.request("daemon/status")
        return result

    async def context_reset(self, owner: str | None = None) -> None:
        """``session/contextReset``: the agent's context was reset (compaction, rewind), so the
        ``read`` tool sends every text again: for ``owner``, or for every owner when ``None``."""
        self.require(Features.CONTEXT_RESET)
        params: dict[str, Any] = {}
        self._owned(owner, params)
        await self._channel.request("session/contextReset", params)

    async def journal_list(
        self,
        path: str | None = None,
        *,
        session_id: str | None = None,
        owner: str | None = None,
        since: int | None = None,
        cursor: str | None = None,
        limit: int | None = None,
    ) -> JournalListResult:
        """``journal/list`` (feature ``journal``): the changes the daemon recorded, newest first,
        that this session may read. Every filter is optional: ``path`` (a file or a folder,
        inside the roots, else ``FS_OUTSIDE_ROOT``), ``session_id`` (``"outside"``: the outside
        changes), ``owner``, ``since`` (milliseconds since the epoch); at most ``limit`` entries
        (default 50, at most 1000). When the result has a ``cursor``, more match: pass it as
        ``cursor`` for the next page, or iterate :meth:`journal_entries`."""
        self.require(Features.JOURNAL)
        params: dict[str, Any] = {}
        _put(params, path=path, sessionId=session_id, owner=owner, since=since, cursor=cursor, limit=limit)
        result: JournalListResult = await self._channel.request("journal/list", params)
        return result

    async def journal_entries(
        self,
        path: str | None = None,
        *,
        session_id: str | None = None,
        owner: str | None = None,
        since: int | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[JournalEntry]:
        """Every entry :meth:`journal_list` matches, newest first, page after page (``limit``
        entries a request), following each page's ``cursor`` until the last."""
        cursor: str | None = None
        while True:
            page = await self.journal_list(
                path, session_id=session_id, owner=owner, since=since, cursor=cursor, limit=limit
            )
            for entry in page["entries"]:
                yield entry
            cursor = page.get("cursor")
            if cursor is None:
                return

    async def journal_diff(self, entry: str) -> JournalDiffResult:
        """``journal/diff`` (feature ``journal``): the unified diff of one entry's change, from
        before (``--- PATH (before)``) to after (``+++ PATH (after)``); ``truncated`` when cut at
        200 lines or 16 KiB. An unknown entry, or one this session may not read, is
        :class:`~filectx.FsError` ``FS_NOT_FOUND``."""
        self.require(Features.JOURNAL)
        result: JournalDiffResult = await self._channel.request("journal/diff", {"entry": entry})
        return result

    async def journal_restore(self, entry: str, force: bool = False, owner: str | None = None) -> JournalRestoreResult:
        """``journal/restore`` (feature ``journal``): puts back the content from before ``entry``
        (restoring a creation deletes the file, a deletion recreates it), itself a new journaled
        entry (the result's ``entry``: restore that to redo). Only when the file is still at the
        entry's ``after`` version, else :class:`~filectx.FsError` ``FS_STALE_VERSION`` with
        ``data["diff"]`` (the change since the entry; absent when too large), unless ``force``.
        Guarded like a write: ``FS_OUTSIDE_ROOT``, ``FS_PERMISSION_DENIED`` (a deny rule, a
        ``read_only`` session, a gate's refusal: ``data["gate"]``), ``FS_NOT_FOUND`` (no such
        entry), ``FS_TOO_LARGE`` (not ``restorable``). ``owner``: whose observation the restore
        refreshes (feature ``owners``)."""
        self.require(Features.JOURNAL)
        params: dict[str, Any] = {"entry": entry}
        if force:
            params["force"] = True
        self._owned(owner, params)
        result: JournalRestoreResult = await self._channel.request("journal/restore", params, settle_on_cancel=True)
        return result

    async def lsp_diagnostics(self, path: str) -> LspDiagnosticsResult:
        """``lsp/diagnostics`` (feature ``diagnostics``): the file's diagnostics under its current
        version from its language server (errors; warnings too when the daemon shows them), waited
        for up to the daemon's deadline. ``status``: ``fresh`` (of ``version``), ``pending`` or
        ``starting`` (the deadline passed), ``failed`` (``reason`` says why), ``none`` (no server
        applies to the file)."""
        self.require(Features.DIAGNOSTICS)
        result: LspDiagnosticsResult = await self._channel.request("lsp/diagnostics", {"path": path})
        return result

    def on_did_change(
        self, listener: Callable[[FileDidChange], None] | Callable[[FileDidChange], Awaitable[None]]
    ) -> Subscription:
        """Calls ``listener`` with each ``file/didChange``: a file this session (one of its owners:
        ``owner``) read has changed since, whoever changed it; once per recorded version. A
        coroutine function's result is run as a task. Returns a :class:`Subscription` to stop."""

        def deliver(change: FileDidChange) -> None:
            outcome = listener(change)
            if inspect.isawaitable(outcome):
                self._background(outcome)

        return Subscription(self._channel.on_notification("file/didChange", deliver))

    def on_notification(self, method: str, listener: Callable[[Any], None]) -> Subscription:
        """Calls ``listener`` with the ``params`` of every server → client notification
        ``method`` (an escape hatch: ``file/didChange`` has :meth:`on_did_change`, and
        ``fs/textChunk`` is delivered to its :class:`~filectx.TextStream` as well)."""
        return Subscription(self._channel.on_notification(method, listener))

    def changes(self, buffer: int = DEFAULT_CHANGE_BUFFER) -> ChangeStream:
        """The ``file/didChange`` notifications from now on, as an async iterator; see
        :class:`ChangeStream`."""
        return ChangeStream(self, buffer)

    async def close(self) -> None:
        """Ends the session politely (``shutdown``, ``exit``) and closes the connection. Pending
        calls fail with :class:`~filectx.TransportError`. Harmless when already closed."""
        if self._channel.is_closed:
            return
        try:
            await asyncio.wait_for(self._channel.request("shutdown"), CLOSE_GRACE)
            await self._channel.notify("exit")
        except (TransportError, FsError, RpcError, asyncio.TimeoutError):
            pass  # the daemon went away meanwhile, or does not answer: nothing left to end politely
        await self._channel.close(CLOSE_GRACE)

    async def __aenter__(self) -> Session:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        await self.close()


def _put(params: dict[str, Any], **values: Any) -> None:
    """Adds the values that are not ``None`` (the wire leaves absent what is not given)."""
    params.update({key: value for key, value in values.items() if value is not None})


CLIENT_METHODS: Final[dict[str, tuple[type, str]]] = {
    "initialize": (Session, "__init__"),  # connect() sends it and builds the Session
    "shutdown": (Session, "close"),
    "exit": (Session, "close"),
    "$/cancelRequest": (Channel, "request"),  # sent when the task awaiting a call is cancelled
    "daemon/status": (Session, "status"),
    "session/contextReset": (Session, "context_reset"),
    "journal/list": (Session, "journal_list"),  # also Session.journal_entries, page after page
    "journal/diff": (Session, "journal_diff"),
    "journal/restore": (Session, "journal_restore"),
    "lsp/diagnostics": (Session, "lsp_diagnostics"),
    "tools/list": (ToolsApi, "list"),
    "tools/call": (ToolsApi, "call"),
    "file/read": (FileApi, "read"),
    "file/write": (FileApi, "write"),
    "file/edit": (FileApi, "edit"),
    "file/stat": (FileApi, "stat"),
    "fs/resolve": (FsApi, "resolve"),
    "fs/stat": (FsApi, "stat"),
    "fs/readText": (FsApi, "read_text"),
    "fs/writeText": (FsApi, "write_text"),
    "fs/editText": (FsApi, "edit_text"),
    "fs/streamText": (FsApi, "stream_text"),
    "fs/streamCancel": (TextStream, "cancel"),
    gate_wire.GATE_REGISTER: (GateApi, "register"),
    gate_wire.GATE_UNREGISTER: (Gate, "unregister"),
}
"""For each client → server method of the protocol, the class and method of this client that
sends it (tests check that every such method of the schema has one)."""

SERVER_METHODS: Final[dict[str, tuple[type, str]]] = {
    "file/didChange": (Session, "on_did_change"),  # also Session.changes
    "fs/textChunk": (TextStream, "_deliver"),  # routed by subscription to its stream
    gate_wire.GATE_WRITE_INTENT: (_GateRegistry, "decide"),  # asks the gate's handler
    "$/cancelRequest": (Channel, "_dispatch"),  # cancels the task answering that request
}
"""For each server → client method of the protocol, the class and method of this client that
handles it (tests check that every such method of the schema has one)."""
