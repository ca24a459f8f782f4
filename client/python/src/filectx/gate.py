"""The write gate's wire types (feature ``gate``): a client registers folders, and the daemon
asks it, with a ``gate/writeIntent`` request, before a write or edit under them lands (any
session's). Written by hand from the gate's specification until its types reach
protocol/schema/filectx.schema.json; then they come from :mod:`filectx.wire` like the rest.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Final, Literal, TypeAlias, TypedDict

GateOperation: TypeAlias = Literal["create", "update", "edit"]
"""The writes a gate can hold."""

GATE_REGISTER: Final = "gate/register"
GATE_UNREGISTER: Final = "gate/unregister"
GATE_WRITE_INTENT: Final = "gate/writeIntent"


class _GateRegisterParamsRequired(TypedDict):
    paths: list[str]
    """Folders (absolute, or relative to the session's cwd; inside its roots) whose writes the gate sees."""


class GateRegisterParams(_GateRegisterParamsRequired, total=False):
    """Params of ``gate/register``."""

    operations: list[GateOperation]
    """The operations it sees; all when absent."""

    name: str
    """A name for logs and for writers' refusals."""

    timeoutMs: int
    """How long the daemon waits for a decision (the daemon's default: 50000)."""

    onTimeout: Literal["deny", "allow"]
    """What a write gets when no decision came in time (the daemon's default: ``deny``)."""


class GateRegisterResult(TypedDict):
    """Result of ``gate/register``."""

    gateId: str
    """The gate's id, named by its intents and by ``gate/unregister``."""


class GateUnregisterParams(TypedDict):
    """Params of ``gate/unregister``."""

    gateId: str


class _WriteIntentRequired(TypedDict):
    gateId: str
    """The gate asked."""

    intentId: str
    """This intent's id."""

    sessionId: str
    """The writing session."""

    path: str
    """The file."""

    operation: GateOperation
    """What the write does."""

    diff: str
    """A unified diff of the change."""

    newVersion: str
    """The version the write would produce."""

    bytes: int
    """Bytes of the new content."""


class WriteIntent(_WriteIntentRequired, total=False):
    """Params of ``gate/writeIntent`` (daemon → client request): a write waiting for a decision."""

    clientName: str
    """The writing client's name, if it gave one."""

    owner: str
    """The writing owner, if not the session's default one."""

    oldVersion: str
    """The version replaced (absent for a create)."""


class _GateDecisionRequired(TypedDict):
    allow: bool
    """Whether the write may land."""


class GateDecision(_GateDecisionRequired, total=False):
    """Result of ``gate/writeIntent``: the decision. A refusal reaches the writer as
    ``FS_PERMISSION_DENIED`` with ``data.gate``."""

    reason: str
    """Why not (shown to the writer)."""


GateHandler: TypeAlias = Callable[[WriteIntent], Awaitable["GateDecision | bool"]]
"""Decides one write: an async callable given the intent, returning a :class:`GateDecision` or
a bool (short for ``{"allow": b}``). Its task is cancelled when the daemon withdraws the intent
(``$/cancelRequest``: it timed out, or the writer went away). A handler that raises refuses the
write, saying why."""
