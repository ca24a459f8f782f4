"""One JSON-RPC 2.0 connection over LSP base-protocol framing (``Content-Length``), on asyncio
streams: requests and their answers, notifications both ways, daemon → client requests (the
gate's ``gate/writeIntent``) and their cancellation, and cancellation of our own requests with
LSP ``$/cancelRequest`` when the task awaiting one is cancelled.

Everything that arrives is read eagerly by one reader task, so answers never wait behind an
unread notification; whatever a consumer does not read yet is buffered by that consumer (a
stream, a change iterator) under its own bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from collections.abc import Awaitable, Callable
from typing import Any

from .errors import REQUEST_CANCELLED, FsError, RpcError, TransportError

DEFAULT_MAX_FRAME_BYTES = 64 * 1024 * 1024
"""Largest frame body accepted from the daemon (the daemon's own default)."""
MAX_HEADER_BYTES = 8 * 1024
"""Largest header section (the daemon's limit too)."""
SETTLE_TIMEOUT = 5.0
"""Seconds a cancelled call that changes files waits for the daemon's answer, so that it can say
whether the change happened."""

NotificationListener = Callable[[Any], None]
"""Gets a notification's ``params``; called on the reader, so it must not block."""
ServerRequestHandler = Callable[[Any], Awaitable[Any]]
"""Answers one daemon → client request; its task is cancelled by the daemon's ``$/cancelRequest``."""
ResultHook = Callable[[Any], None]
"""Runs on the reader as soon as an answer arrives, before anything else is read (e.g. to
register a stream before its first chunk is dispatched)."""

def _frame(message: dict[str, Any]) -> bytes:
    body = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def _error_of(error: Any) -> Exception:
    """The exception for a JSON-RPC ``error`` object."""
    if not isinstance(error, dict):
        return TransportError(f"the daemon sent an error answer that is not an object: {error!r}")
    code = error.get("code")
    message = str(error.get("message", ""))
    data = error.get("data")
    if isinstance(data, dict) and isinstance(data.get("code"), str) and data["code"].startswith("FS_"):
        return FsError(data["code"], message, data, code if isinstance(code, int) else None)
    if code == REQUEST_CANCELLED:
        return FsError("FS_ABORTED", message or "the request was cancelled", {"code": "FS_ABORTED"}, code)
    return RpcError(code if isinstance(code, int) else 0, message, data)


def _retrieve(future: asyncio.Future[Any]) -> None:
    """Marks a future's exception as seen (nobody awaits it any more)."""
    if not future.cancelled():
        future.exception()


class _Pending:
    __slots__ = ("future", "on_result", "method")

    def __init__(self, future: asyncio.Future[Any], on_result: ResultHook | None, method: str) -> None:
        self.future = future
        self.on_result = on_result
        self.method = method


class Channel:
    """A JSON-RPC connection. Build it with :meth:`open` on a connected stream pair."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        server_requests: dict[str, ServerRequestHandler] | None = None,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._server_requests = dict(server_requests or {})
        self._max_frame_bytes = max_frame_bytes
        self._ids = itertools.count(1)
        self._pending: dict[int, _Pending] = {}
        self._served: dict[int | str, asyncio.Task[None]] = {}
        self._listeners: dict[str, list[NotificationListener]] = {}
        self._close_listeners: list[Callable[[TransportError], None]] = []
        self._drain_lock = asyncio.Lock()
        self._close_error: TransportError | None = None
        self.closed_by_client = False
        """Whether this side ended the connection (:meth:`close` or :meth:`abort`)."""
        self._closing_error: TransportError | None = None
        self._closed = asyncio.get_running_loop().create_future()
        self.cancel_requests = True
        """Whether a cancelled call sends ``$/cancelRequest`` (the daemon's feature ``cancelRequest``)."""
        self._reader_task = asyncio.get_running_loop().create_task(self._read_loop(), name="filectx reader")

    # -- state -------------------------------------------------------------------------------

    @property
    def is_closed(self) -> bool:
        """Whether the connection is gone."""
        return self._close_error is not None

    @property
    def close_error(self) -> TransportError | None:
        """Why the connection is gone, once it is."""
        return self._close_error

    async def wait_closed(self) -> None:
        """Returns once the connection is gone."""
        await asyncio.shield(self._closed)

    def on_close(self, listener: Callable[[TransportError], None]) -> Callable[[], None]:
        """Calls ``listener`` once when the connection goes (at once if it is gone); returns a
        function that removes it."""
        if self._close_error is not None:
            listener(self._close_error)
            return lambda: None
        self._close_listeners.append(listener)
        return lambda: self._remove(self._close_listeners, listener)

    def on_notification(self, method: str, listener: NotificationListener) -> Callable[[], None]:
        """Calls ``listener`` with the params of every notification ``method``; returns a
        function that removes it."""
        self._listeners.setdefault(method, []).append(listener)
        return lambda: self._remove(self._listeners.get(method, []), listener)

    @staticmethod
    def _remove(items: list[Any], item: Any) -> None:
        with contextlib.suppress(ValueError):
            items.remove(item)

    # -- sending -----------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._close_error is not None:
            raise TransportError(str(self._close_error))
        if self._closing_error is not None:
            raise TransportError(str(self._closing_error))

    async def _send(self, message: dict[str, Any]) -> None:
        self._check_open()
        # One write() per frame: frames never interleave. drain() for backpressure, one at a time.
        self._writer.write(_frame(message))
        try:
            async with self._drain_lock:
                await self._writer.drain()
        except (ConnectionError, OSError) as error:
            raise TransportError(f"the connection to the daemon broke: {error}") from error

    def _send_nowait(self, message: dict[str, Any]) -> None:
        if self._close_error is None and not self._writer.is_closing():
            self._writer.write(_frame(message))

    async def notify(self, method: str, params: Any = None) -> None:
        """Sends a notification (no answer)."""
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        await self._send(message)

    async def request(
        self,
        method: str,
        params: Any = None,
        *,
        settle_on_cancel: bool = False,
        on_result: ResultHook | None = None,
        on_late_result: ResultHook | None = None,
    ) -> Any:
        """Sends a request and returns its result, raising :class:`FsError`, :class:`RpcError`
        or :class:`TransportError`.

        When the awaiting task is cancelled, ``$/cancelRequest {id}`` goes to the daemon (which
        withdraws the request if it has not started its file work) and the call raises
        :class:`asyncio.CancelledError`. With ``settle_on_cancel`` (calls that change files) it
        first waits, up to :data:`SETTLE_TIMEOUT`, for the daemon's answer, so that when the
        ``CancelledError`` arrives the change has happened or never will; the error's message
        says which. ``on_late_result`` runs (on the reader) with the result of a call cancelled
        before its answer came, when the daemon did run it after all (to undo what it started:
        a stream is cancelled).
        """
        self._check_open()
        request_id = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = _Pending(future, on_result, method)
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        keep_pending = False
        try:
            await self._send(message)
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            if future.done() or self._close_error is not None:
                raise
            if self.cancel_requests:
                self._send_nowait({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": request_id}})
            if not settle_on_cancel:
                if on_late_result is not None:
                    # Keep listening for the answer, for what it started.
                    self._pending[request_id] = _Pending(future, on_late_result, method)
                    future.add_done_callback(_retrieve)
                    keep_pending = True
                raise
            outcome = await self._settle(method, future)
            raise asyncio.CancelledError(outcome) from None
        finally:
            if not keep_pending:
                self._pending.pop(request_id, None)

    async def _settle(self, method: str, future: asyncio.Future[Any]) -> str:
        """Waits (bounded) for a cancelled call's answer and says what it means."""
        try:
            await asyncio.wait_for(asyncio.shield(future), SETTLE_TIMEOUT)
        except FsError as error:
            if error.code == "FS_ABORTED":
                return f"{method} was cancelled before it started: nothing was changed"
            return f"{method} was cancelled, and failed anyway: {error.code}: {error.message}"
        except asyncio.TimeoutError:
            return f"{method} was cancelled; the daemon did not say within {SETTLE_TIMEOUT} s whether it ran"
        except Exception as error:  # the call failed in another way: say so, but stay cancelled
            return f"{method} was cancelled, and failed anyway: {error}"
        result = future.result()
        if isinstance(result, dict) and result.get("isError") is True:
            # tools/call answers failures, a withdrawn call included, as results.
            code = (result.get("error") or {}).get("code")
            if code == "FS_ABORTED":
                return f"{method} was cancelled before it started: nothing was changed"
            return f"{method} was cancelled, and failed anyway: {code}"
        return f"{method} was cancelled after it had started, and ran to its end: its change was made"

    # -- receiving ---------------------------------------------------------------------------

    async def _read_frame(self) -> bytes | None:
        """The next frame's body; ``None`` at a clean end of the stream."""
        try:
            header = await self._reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as error:
            if not error.partial:
                return None
            raise TransportError("the daemon closed the connection in the middle of a frame") from None
        except asyncio.LimitOverrunError:
            raise TransportError("the daemon sent a header section over 8 KiB") from None
        if len(header) > MAX_HEADER_BYTES:
            raise TransportError("the daemon sent a header section over 8 KiB")
        length: int | None = None
        for line in header.decode("ascii", errors="replace").split("\r\n"):
            name, sep, value = line.partition(":")
            if sep and name.strip().lower() == "content-length":
                value = value.strip()
                if not value.isdigit():
                    raise TransportError(f"the daemon sent a bad Content-Length: {value!r}")
                length = int(value)
        if length is None:
            raise TransportError("the daemon sent a frame without Content-Length")
        if length > self._max_frame_bytes:
            raise TransportError(f"the daemon sent a frame of {length} bytes, over the limit of {self._max_frame_bytes}")
        try:
            return await self._reader.readexactly(length)
        except asyncio.IncompleteReadError:
            raise TransportError("the daemon closed the connection in the middle of a frame") from None

    async def _read_loop(self) -> None:
        error: TransportError
        try:
            while True:
                body = await self._read_frame()
                if body is None:
                    error = self._closing_error or TransportError("the daemon closed the connection")
                    break
                try:
                    message = json.loads(body)
                except ValueError:
                    error = TransportError("the daemon sent a frame that is not JSON")
                    break
                if isinstance(message, list):
                    for item in message:
                        self._dispatch(item)
                else:
                    self._dispatch(message)
        except TransportError as failure:
            error = self._closing_error or failure
        except (ConnectionError, OSError) as failure:
            error = self._closing_error or TransportError(f"the connection to the daemon broke: {failure}")
        except asyncio.CancelledError:
            error = self._closing_error or TransportError("the session was closed")
        self._shut(error)

    def _shut(self, error: TransportError) -> None:
        if self._close_error is not None:
            return
        self._close_error = error
        self._writer.close()
        for pending in self._pending.values():
            if not pending.future.done():
                pending.future.set_exception(TransportError(str(error)))
                # Retrieved by the caller, or by nobody if it was cancelled meanwhile.
                pending.future.exception()
        self._pending.clear()
        for task in self._served.values():
            task.cancel()
        listeners, self._close_listeners = self._close_listeners, []
        for listener in listeners:
            self._call(listener, error)
        if not self._closed.done():
            self._closed.set_result(None)

    def _call(self, listener: Callable[[Any], Any], argument: Any) -> None:
        """Runs a listener; what it raises goes to the loop's exception handler, never further."""
        try:
            listener(argument)
        except Exception as exception:
            asyncio.get_running_loop().call_exception_handler(
                {"message": "a filectx listener raised", "exception": exception}
            )

    def _dispatch(self, message: Any) -> None:
        if not isinstance(message, dict):
            return
        method = message.get("method")
        if isinstance(method, str):
            if "id" in message:
                self._serve(message["id"], method, message.get("params"))
            elif method == "$/cancelRequest":
                params = message.get("params")
                withdrawn = params.get("id") if isinstance(params, dict) else None
                task = self._served.get(withdrawn) if isinstance(withdrawn, (int, str)) else None
                if task is not None:
                    task.cancel()
            else:
                for listener in list(self._listeners.get(method, ())):
                    self._call(listener, message.get("params"))
            return
        request_id = message.get("id")
        pending = self._pending.get(request_id) if isinstance(request_id, int) else None
        if pending is None or pending.future.done():
            return
        if "error" in message:
            pending.future.set_exception(_error_of(message["error"]))
            return
        result = message.get("result")
        if pending.on_result is not None:
            self._call(pending.on_result, result)
        pending.future.set_result(result)

    def _serve(self, request_id: Any, method: str, params: Any) -> None:
        if not isinstance(request_id, (int, str)) or isinstance(request_id, bool):
            return
        handler = self._server_requests.get(method)
        if handler is None:
            self._send_nowait(
                {"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": f"unknown method {method}"}}
            )
            return
        task = asyncio.get_running_loop().create_task(self._answer(request_id, handler, params))
        self._served[request_id] = task

    async def _answer(self, request_id: int | str, handler: ServerRequestHandler, params: Any) -> None:
        answer: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id}
        try:
            answer["result"] = await handler(params)
        except asyncio.CancelledError:
            # Withdrawn by the daemon (or the connection went): LSP answers RequestCancelled.
            answer["error"] = {"code": REQUEST_CANCELLED, "message": "the request was cancelled"}
        except Exception as error:
            answer["error"] = {"code": -32603, "message": f"the client's handler failed: {error}"}
        finally:
            self._served.pop(request_id, None)
        self._send_nowait(answer)

    # -- closing -----------------------------------------------------------------------------

    async def close(self, grace: float = 2.0) -> None:
        """Closes the connection (after the caller's polite ``shutdown``/``exit``, if any): waits
        up to ``grace`` seconds for the daemon to hang up, then hangs up itself. Pending calls
        fail with :class:`TransportError` ("the session was closed")."""
        if self._close_error is not None:
            return
        self.closed_by_client = True
        self._closing_error = TransportError("the session was closed")
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._closed), grace)
        if self._close_error is None:
            self._reader_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader_task
        with contextlib.suppress(ConnectionError, OSError):
            await self._writer.wait_closed()

    def abort(self, reason: str) -> None:
        """Drops the connection at once."""
        self.closed_by_client = True
        self._closing_error = TransportError(reason)
        self._reader_task.cancel()
        self._shut(self._closing_error)


__all__ = ["Channel", "DEFAULT_MAX_FRAME_BYTES"]
