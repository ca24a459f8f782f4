"""The client's pure parts: how error answers become exceptions, how an older daemon's refusal
of an unknown initialize field becomes UnsupportedFeatureError, and reading a cancelled call's
outcome."""

from __future__ import annotations

import asyncio

import filectx
from filectx import FsError, RpcError, TransportError, UnsupportedFeatureError
from filectx._channel import _error_of, _frame
from filectx.features import refused_feature as _refused_feature


def test_fs_errors_keep_code_message_data_and_rpc_code() -> None:
    error = _error_of({"code": -31002, "message": "no such file: /r/x", "data": {"code": "FS_NOT_FOUND", "path": "/r/x"}})
    assert isinstance(error, FsError)
    assert (error.code, error.message, error.rpc_code) == ("FS_NOT_FOUND", "no such file: /r/x", -31002)
    assert error.data == {"code": "FS_NOT_FOUND", "path": "/r/x"}
    assert str(error) == "no such file: /r/x"


def test_other_errors_are_rpc_errors_and_a_cancelled_request_is_fs_aborted() -> None:
    plain = _error_of({"code": -32002, "message": "not initialized"})
    assert isinstance(plain, RpcError) and plain.code == -32002 and plain.data is None
    foreign = _error_of({"code": -31000, "message": "x", "data": {"code": "SOMETHING_ELSE"}})
    assert isinstance(foreign, RpcError) and foreign.data == {"code": "SOMETHING_ELSE"}
    refused = _error_of({"code": -32602, "message": "cannot be resumed", "data": {"resume": "refused"}})
    assert isinstance(refused, RpcError) and refused.is_resume_refused
    cancelled = _error_of({"code": -32800, "message": "request cancelled before it started"})
    assert isinstance(cancelled, FsError) and cancelled.code == "FS_ABORTED" and cancelled.rpc_code == -32800
    assert isinstance(_error_of("nonsense"), TransportError)


def test_an_older_daemon_refusing_a_field_is_an_unsupported_feature() -> None:
    params = {"roots": ["/r"], "resumable": True, "dedupReads": True}
    unknown = RpcError(-32602, "invalid params: unknown field `dedupReads`, expected one of ...")
    refused = _refused_feature(params, unknown)
    assert isinstance(refused, UnsupportedFeatureError) and refused.feature == "dedupReads"
    resumable = RpcError(-32602, "unknown field `resumable`")
    assert _refused_feature(params, resumable) is not None
    # A field the caller did not send, another code, another error: not this.
    assert _refused_feature({"roots": ["/r"]}, resumable) is None
    assert _refused_feature(params, RpcError(-32600, "unknown field `resumable`")) is None
    assert _refused_feature(params, TransportError("gone")) is None
    search = RpcError(-32602, "unknown variant `grep`, expected one of `read`, `write`, `edit`")
    refused = _refused_feature({"roots": ["/r"], "tools": ["read", "grep"]}, search)
    assert isinstance(refused, UnsupportedFeatureError) and refused.feature == "search"
    # Language servers: the session option, and the tool's name.
    option = RpcError(-32602, "unknown field `diagnostics`, expected one of `clientInfo`, `roots`")
    refused = _refused_feature({"roots": ["/r"], "diagnostics": "off"}, option)
    assert isinstance(refused, UnsupportedFeatureError) and refused.feature == "diagnostics"
    tool = RpcError(-32602, "unknown variant `diagnostics`, expected one of `read`, `write`")
    refused = _refused_feature({"roots": ["/r"], "tools": ["read", "diagnostics"]}, tool)
    assert isinstance(refused, UnsupportedFeatureError) and refused.feature == "diagnostics"
    assert _refused_feature({"roots": ["/r"], "tools": ["read"]}, tool) is None
    undo = RpcError(-32602, "unknown variant `undo`, expected one of `read`, `write`")
    refused = _refused_feature({"roots": ["/r"], "tools": ["undo"]}, undo)
    assert isinstance(refused, UnsupportedFeatureError) and refused.feature == "journal"


def test_cancelled_outcome_reads_the_message_through_a_task() -> None:
    async def call() -> None:
        raise asyncio.CancelledError("file/write was cancelled before it started: nothing was changed")

    async def main() -> asyncio.CancelledError:
        task = asyncio.ensure_future(call())
        try:
            await task
        except asyncio.CancelledError as error:
            return error
        raise AssertionError("the task was not cancelled")

    error = asyncio.run(main())
    assert filectx.cancelled_outcome(error) == "file/write was cancelled before it started: nothing was changed"
    assert filectx.cancelled_outcome(asyncio.CancelledError()) is None
    assert filectx.cancelled_outcome(ValueError("x")) is None


def test_frames_are_content_length_framed_utf8_json() -> None:
    frame = _frame({"jsonrpc": "2.0", "id": 1, "method": "fs/stat", "params": {"path": "é"}})
    header, body = frame.split(b"\r\n\r\n", 1)
    assert header == b"Content-Length: %d" % len(body)
    assert body == '{"jsonrpc":"2.0","id":1,"method":"fs/stat","params":{"path":"é"}}'.encode()
