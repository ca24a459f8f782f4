"""The errors the client raises, one class per kind of failure, so that a caller can tell a
refusal of the daemon (:class:`FsError`, matched on ``code``) from a connection that went away
(:class:`TransportError`). All derive from :class:`FilectxError`.

Cancelling the asyncio task of a call is not an error of this module: the call raises
:class:`asyncio.CancelledError`, as every asyncio call does (see :mod:`filectx.session`).
"""

from __future__ import annotations

import asyncio
from typing import Any

from .wire import FsErrorCode

#: JSON-RPC code of a request the daemon cancelled before it started (LSP's RequestCancelled).
REQUEST_CANCELLED = -32800
#: JSON-RPC code of params of the wrong shape (also a refused ``resume``, an unknown tool).
INVALID_PARAMS = -32602


def cancelled_outcome(error: BaseException) -> str | None:
    """What a cancelled call that changes files said about its outcome: the message of the
    :class:`asyncio.CancelledError` it raised (e.g. ``"file/write was cancelled before it
    started: nothing was changed"``), or ``None`` when ``error`` carries none.

    Give it the ``CancelledError`` caught from awaiting the call, or from awaiting the task that
    made it: from Python 3.11 on that is the call's own error; on 3.10 asyncio raises a new one
    from a cancelled task, with the call's as its ``__context__``, which this follows.
    """
    seen: BaseException | None = error
    for _ in range(8):
        if seen is None:
            break
        if isinstance(seen, asyncio.CancelledError) and seen.args and isinstance(seen.args[0], str) and seen.args[0]:
            return seen.args[0]
        seen = seen.__context__
    return None


class FilectxError(Exception):
    """Base class of every error this package raises."""


class FsError(FilectxError):
    """A filesystem-level refusal: an ``FS_*`` error of the daemon (``error.data.code`` on the
    wire), an error item that ended a stream, or ``FS_ABORTED`` for a call the daemon cancelled.

    Match on :attr:`code`, never on the message. :attr:`data` holds the daemon's details as sent
    (``{"code": "FS_…", "path"?: …}`` plus ``diff``, ``currentVersion`` and ``reauthorized`` of a
    stale refusal, ``matches`` of an ambiguous edit, ``rule`` of a deny rule, ``gate`` of a gate's
    refusal, …; see docs/protocol.md).
    """

    code: FsErrorCode
    """The stable identifier, e.g. ``"FS_STALE_VERSION"``."""
    data: dict[str, Any]
    """``error.data`` as the daemon sent it: at least ``{"code": …}``."""
    rpc_code: int | None
    """The numeric JSON-RPC code it travelled with, if it came from the daemon."""

    def __init__(
        self, code: FsErrorCode, message: str, data: dict[str, Any] | None = None, rpc_code: int | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data if data is not None else {"code": code}
        self.rpc_code = rpc_code

    def __repr__(self) -> str:
        return f"FsError({self.code!r}, {self.message!r})"


class RpcError(FilectxError):
    """Any other JSON-RPC error answer: -32602 (params of the wrong shape, a refused ``resume``,
    a tool the session does not have), -32601 (unknown method), -32002, …"""

    code: int
    """The JSON-RPC error code."""
    data: Any
    """``error.data``, if any."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(f"the daemon answered error {code}: {message}")
        self.code = code
        self.message = message
        self.data = data

    @property
    def is_resume_refused(self) -> bool:
        """Whether ``initialize`` was refused because its ``resume`` token names no ended session
        (unknown, already used, or past the daemon's grace period): start a fresh session."""
        return isinstance(self.data, dict) and self.data.get("resume") == "refused"


class TransportError(FilectxError):
    """The connection failed: no daemon listens at the socket, it went away (mid-call or between
    calls), it broke the framing, or the session was closed. Every call pending at that moment,
    every unfinished stream, and every later call fail with it."""


class UntrustedSocketError(FilectxError):
    """The client refused the socket before sending anything: it, or its folder, could be
    controlled by another user (see :mod:`filectx.trust`). Retrying does not help; the message
    says what to fix."""

    socket: str
    """The socket path refused."""
    reason: str
    """What is wrong with it, and how to fix it."""

    def __init__(self, socket: str, reason: str) -> None:
        super().__init__(f"refusing the socket {socket}: {reason}")
        self.socket = socket
        self.reason = reason


class UnsupportedFeatureError(FilectxError):
    """The daemon does not announce a feature the call relies on (``capabilities.features``),
    typically an older ``filectxd`` kept alive by socket activation. Nothing that relies on it
    was sent."""

    feature: str
    """The feature's name, e.g. ``"owners"``."""

    def __init__(self, feature: str) -> None:
        super().__init__(
            f"this filectxd does not support the feature {feature!r} (it is not in its "
            "capabilities.features; an older filectxd?): restart the daemon to get a newer one, "
            "or do without it"
        )
        self.feature = feature


class StreamError(FilectxError):
    """A stream ended in a way the protocol does not allow (chunks out of order, of another
    version, or no last chunk), or its reader fell more than the client's buffer behind
    (:attr:`lagged`; the stream was then cancelled at the daemon)."""

    lagged: bool
    """Whether the reader fell too far behind the chunks."""

    def __init__(self, message: str, lagged: bool = False) -> None:
        super().__init__(message)
        self.lagged = lagged
