"""filectx: a client for the filectx daemon (``filectxd``), standard library only.

An :mod:`asyncio` client (:func:`connect` → :class:`Session`) and a thin synchronous wrapper
(:func:`filectx.sync.connect` → :class:`filectx.sync.SyncSession`) with a typed method for every
method of the protocol; wire types are the TypedDicts of :mod:`filectx.wire`, generated from the
protocol's JSON Schema.

    import asyncio, filectx

    async def main() -> None:
        async with await filectx.connect(roots=["/home/me/project"]) as session:
            read = await session.file.read("README.md", limit=10)
            print(read["lines"])

    asyncio.run(main())
"""

from . import wire
from .errors import (
    FilectxError,
    FsError,
    RpcError,
    StreamError,
    TransportError,
    UnsupportedFeatureError,
    UntrustedSocketError,
    cancelled_outcome,
)
from .features import Features
from .gate import GateHandler, GateOnTimeout, GateOperation, WriteIntentParams, WriteIntentResult
from .session import (
    ChangeStream,
    FileApi,
    FsApi,
    Gate,
    GateApi,
    Session,
    Subscription,
    ToolsApi,
    connect,
)
from .stream import TextStream
from .trust import SOCKET_ENV, SOCKET_FILE_NAME, check_folder, default_socket_path

__version__ = "0.1.0"

__all__ = [
    "ChangeStream",
    "Features",
    "FileApi",
    "FilectxError",
    "FsApi",
    "FsError",
    "Gate",
    "GateApi",
    "GateHandler",
    "GateOnTimeout",
    "GateOperation",
    "RpcError",
    "SOCKET_ENV",
    "SOCKET_FILE_NAME",
    "Session",
    "StreamError",
    "Subscription",
    "TextStream",
    "ToolsApi",
    "TransportError",
    "UnsupportedFeatureError",
    "UntrustedSocketError",
    "WriteIntentParams",
    "WriteIntentResult",
    "cancelled_outcome",
    "check_folder",
    "connect",
    "default_socket_path",
    "wire",
]
