"""The write gate (feature ``gate``): a client registers folders, and the daemon asks it, with a
``gate/writeIntent`` request, before a write or edit under them lands (any session's). The wire
types are the generated ones of :mod:`filectx.wire`, named as the protocol crate names them;
this module adds the method names and the handler's type."""

from __future__ import annotations

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
]
