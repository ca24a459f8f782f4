""":class:`TextStream`: the chunks of one ``fs/streamText`` subscription as an async iterable,
checked for order and for coming from one version, every way the stream can end turned into the
end of the loop or an exception raised from it, and ``fs/streamCancel`` sent when the loop stops
early."""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator, Callable, Coroutine
from types import TracebackType
from typing import TYPE_CHECKING, Any

from .errors import FsError, StreamError, TransportError
from .wire import SubscriptionId, TextChunk, TextChunkNotification

if TYPE_CHECKING:
    from ._channel import Channel

STREAM_CANCEL = "fs/streamCancel"


class TextStream:
    """The chunks of a file, in order, all of one version (``chunk["version"]``).

    Iterate it once with ``async for``. The loop ends after the chunk whose ``done`` is true: it
    then delivered every line from the requested offset to the end of the file. Any other ending
    is raised from the loop: :class:`~filectx.FsError` ``FS_STALE_VERSION`` when the file changed
    mid-stream (``FS_TOO_LARGE``, ``FS_IO``: the daemon's error item; ``data`` has ``version``,
    the version delivered, and ``nextLine``, the first line not delivered),
    :class:`~filectx.TransportError` when the connection went away, :class:`~filectx.StreamError`
    when the chunks broke the protocol or the reader fell more than the session's
    ``stream_buffer_chunks`` behind (``lagged``).

    Leaving the loop early (``break``, ``return``, an exception, a cancelled task) cancels the
    stream at the daemon with ``fs/streamCancel``: when the loop's iterator is closed, which
    asyncio does as soon as it is collected (in CPython, on the loop's next turn after the loop
    is left). Use the stream as ``async with`` to cancel it at the block's end, or call
    :meth:`cancel`, which also returns the daemon's answer.
    """

    def __init__(
        self,
        channel: Channel,
        first_line: int,
        buffer_chunks: int,
        cancel_subscription: Callable[[SubscriptionId], Coroutine[Any, Any, bool]],
    ) -> None:
        self._channel = channel
        self._cancel_subscription = cancel_subscription
        self._next_line = first_line
        self._buffer_chunks = max(1, buffer_chunks)
        self._queue: deque[TextChunk] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._ended = False
        self._error: BaseException | None = None
        self._finished = False  # the consumer has seen the end
        self._daemon_done = False  # the daemon ended it: nothing to cancel
        self._id: SubscriptionId | None = None
        self._version: str | None = None
        self._cancel_task: asyncio.Task[bool] | None = None
        self._iterating = False
        self._unsubscribe_close = channel.on_close(self._on_close)
        self._on_end: list[Callable[[], None]] = []

    # -- what the session feeds in -----------------------------------------------------------

    @property
    def subscription(self) -> SubscriptionId | None:
        """The daemon's subscription id."""
        return self._id

    @property
    def version(self) -> str | None:
        """The version of the chunks delivered so far."""
        return self._version

    @property
    def cancelled(self) -> bool:
        """Whether ``fs/streamCancel`` was sent for this stream."""
        return self._cancel_task is not None

    def _started(self, subscription: SubscriptionId) -> None:
        self._id = subscription

    def _deliver(self, note: TextChunkNotification) -> None:
        if self._ended:
            return
        chunk = note["result"]
        error = chunk.get("error")
        if error is not None:
            self._daemon_done = True
            self._end(
                FsError(
                    error["code"],
                    f"the stream ended early: {error['message']}",
                    {
                        "code": error["code"],
                        "message": error["message"],
                        "version": self._version or chunk["version"],
                        "nextLine": self._next_line,
                    },
                )
            )
            return
        if chunk["startLine"] != self._next_line or (self._version is not None and chunk["version"] != self._version):
            expected = self._version or chunk["version"]
            self._start_cancel()
            self._end(
                StreamError(
                    f"a chunk of version {chunk['version']} starts at line {chunk['startLine']}; expected "
                    f"line {self._next_line} of version {expected}"
                )
            )
            return
        if len(self._queue) >= self._buffer_chunks:
            self._start_cancel()
            self._end(
                StreamError(
                    f"the stream was read too slowly: more than {self._buffer_chunks} chunks went unread, "
                    "so it was cancelled",
                    lagged=True,
                )
            )
            return
        self._version = chunk["version"]
        self._next_line += len(chunk["lines"])
        self._queue.append(chunk)
        if chunk["done"]:
            self._daemon_done = True
            self._end(None)
        self._wake()

    def _on_close(self, error: TransportError) -> None:
        if not self._daemon_done:
            self._end(TransportError(str(error)))

    def _end(self, error: BaseException | None) -> None:
        if self._ended:
            return
        self._ended = True
        self._error = error
        self._unsubscribe_close()
        for hook in self._on_end:
            hook()
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    # -- cancelling --------------------------------------------------------------------------

    def _start_cancel(self) -> asyncio.Task[bool] | None:
        """Sends ``fs/streamCancel`` once (unless the daemon already ended the stream)."""
        if self._cancel_task is not None:
            return self._cancel_task
        if self._daemon_done or self._id is None or self._channel.is_closed:
            return None
        task = asyncio.get_running_loop().create_task(self._cancel_subscription(self._id))
        task.add_done_callback(_retrieve)
        self._cancel_task = task
        return task

    async def cancel(self) -> bool:
        """Stops the stream: sends ``fs/streamCancel`` (once; a loop that stopped early already
        sent it) and returns the daemon's answer: ``True`` when it stopped a running stream,
        ``False`` when there was nothing to stop (the stream had ended). The loop, if still
        running, ends without an error after the chunks already delivered."""
        task = self._start_cancel()
        self._end(None)
        if task is None:
            return False
        try:
            return bool(await asyncio.shield(task))
        except TransportError:
            return False

    async def aclose(self) -> None:
        """Cancels the stream unless it ended (for ``contextlib.aclosing`` and ``async with``)."""
        if not (self._daemon_done and self._ended):
            await self.cancel()

    async def __aenter__(self) -> TextStream:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        await self.aclose()

    # -- reading -----------------------------------------------------------------------------

    async def _next(self) -> TextChunk | None:
        """The next chunk; ``None`` at the end of the stream; raises how it ended otherwise."""
        while True:
            if self._queue:
                return self._queue.popleft()
            if self._ended:
                self._finished = True
                if self._error is not None:
                    error, self._error = self._error, None
                    raise error
                return None
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None

    def __aiter__(self) -> AsyncIterator[TextChunk]:
        if self._iterating:
            raise RuntimeError("a TextStream is iterated once")
        self._iterating = True
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[TextChunk]:
        try:
            while True:
                chunk = await self._next()
                if chunk is None:
                    return
                yield chunk
        finally:
            if not self._finished:
                # Left early: stop the daemon's producer, and drop what is buffered.
                self._start_cancel()
                self._end(None)
                self._queue.clear()


def _retrieve(task: asyncio.Task[bool]) -> None:
    with contextlib.suppress(asyncio.CancelledError, Exception):
        task.exception()
