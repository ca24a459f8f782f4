"""The write gate (feature ``gate``): a client registers folders, and the daemon asks it, with a
``gate/writeIntent`` request, before a write or edit under them lands (any session's). The wire
types are the generated ones of :mod:`filectx.wire`, named as the protocol crate names them;
this module adds the method names and the handler's type."""

from __future__ import annotations

import os
import stat
from collections.abc import Awaitable, Callable
from typing import Final, TypeAlias

from .wire import (
    GateOnTimeout,
    GateOperation,
    GateRegisterParams,
    GateRegisterResult,
    GateUnregisterParams,
    WriteIntentParams,
    WriteIntentResult,
)

GATE_REGISTER: Final = "gate/register"
GATE_UNREGISTER: Final = "gate/unregister"
GATE_WRITE_INTENT: Final = "gate/writeIntent"

GateHandler: TypeAlias = Callable[[WriteIntentParams], Awaitable["WriteIntentResult | bool"]]
"""Decides one write: an async callable given the intent (:class:`~filectx.wire.WriteIntentParams`:
``gateId``, ``intentId``, ``sessionId``, ``clientName``, ``owner``, ``path``, ``operation``,
``diff``, ``oldVersion``, ``newVersion``, ``bytes``), returning a
:class:`~filectx.wire.WriteIntentResult` (``{"allow": bool, "reason"?: str}``) or a bool (short
for ``{"allow": b}``). Its task is cancelled when the daemon withdraws the intent
(``$/cancelRequest``: it timed out, or the writer went away). A handler that raises refuses the
write, saying why."""



def gate_token_file(socket_path: str) -> str:
    """The file next to ``socket_path`` in which its daemon keeps its gate token:
    ``<socket>.gate-token``."""
    return socket_path + ".gate-token"


def read_gate_token(socket_path: str) -> str | None:
    """The gate token of the daemon at ``socket_path``, which ``gate/register`` must carry
    (``gateToken``) unless the daemon lets any session be a gate; ``None`` when none is kept there
    (an older daemon, or one that could not write it) or the file is not a small regular file of
    this user's. Opened without following a symlink and without blocking; at most 256 bytes are
    read. :meth:`filectx.session.GateApi.register` reads it itself unless given one."""
    try:
        fd = os.open(gate_token_file(socket_path), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
            return None
        token = os.read(fd, 256).decode("ascii", errors="replace").strip()
    except OSError:
        return None
    finally:
        os.close(fd)
    if not token or any(c not in "0123456789abcdefABCDEF" for c in token):
        return None
    return token


__all__ = [
    "GATE_REGISTER",
    "GATE_UNREGISTER",
    "GATE_WRITE_INTENT",
    "GateHandler",
    "GateOnTimeout",
    "GateOperation",
    "GateRegisterParams",
    "GateRegisterResult",
    "GateUnregisterParams",
    "WriteIntentParams",
    "WriteIntentResult",
    "gate_token_file",
    "read_gate_token",
]
