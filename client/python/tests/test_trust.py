"""The default socket path and the trust checks, as the Rust client's trust.rs: the folder
before connecting, the peer (SO_PEERCRED) right after."""

from __future__ import annotations

import os
import socket
import signal
import time
from pathlib import Path

import pytest

import filectx
from filectx.trust import check_folder, default_socket_path, judge_folder, peer_credentials

from .conftest import NOBODY, Daemon

US = 1000


def judged(owner: int, mode: int, link_owner: int | None = None, is_dir: bool = True) -> str | None:
    return judge_folder("/run/x", link_owner=link_owner, is_dir=is_dir, owner=owner, mode=mode, ours=US)


def test_default_socket_path() -> None:
    assert default_socket_path({"FILECTX_SOCKET": "/s/f.sock", "XDG_RUNTIME_DIR": "/run/user/1"}, 7) == "/s/f.sock"
    assert default_socket_path({"FILECTX_SOCKET": "", "XDG_RUNTIME_DIR": "/run/user/1"}, 7) == "/run/user/1/filectx.sock"
    assert default_socket_path({"XDG_RUNTIME_DIR": "relative"}, 7) == "/tmp/filectx-7/filectx.sock"
    assert default_socket_path({}, 1000) == "/tmp/filectx-1000/filectx.sock"
    assert default_socket_path({}).endswith(f"/tmp/filectx-{os.geteuid()}/filectx.sock")


def test_our_folder_closed_to_writers_is_trusted() -> None:
    for mode in (0o700, 0o711, 0o755, 0o750, 0o555):
        assert judged(US, mode) is None, oct(mode)


def test_a_folder_others_may_write_is_refused_sticky_or_not() -> None:
    for mode in (0o720, 0o702, 0o777, 0o1777, 0o1770, 0o2775):
        reason = judged(US, mode)
        assert reason is not None and f"mode {mode:o}" in reason, oct(mode)
    reason = judged(US, 0o1777)
    assert reason is not None and "chmod go-w /run/x" in reason


def test_a_folder_of_another_user_is_refused_even_when_closed() -> None:
    for owner in (0, 65534, US + 1):
        reason = judged(owner, 0o700)
        assert reason is not None and f"belongs to uid {owner}, not to you (uid {US})" in reason


def test_a_symlink_must_be_ours_and_lead_to_a_folder() -> None:
    assert judged(US, 0o700, link_owner=US) is None
    reason = judged(US, 0o700, link_owner=0)
    assert reason is not None and "symbolic link that belongs to uid 0" in reason
    reason = judged(US, 0o600, is_dir=False)
    assert reason is not None and "is not a folder" in reason


def test_check_folder_on_disk(tmp_path: Path) -> None:
    open_folder = tmp_path / "open"
    open_folder.mkdir()
    open_folder.chmod(0o777)
    with pytest.raises(filectx.UntrustedSocketError) as refused:
        check_folder(str(open_folder / "filectx.sock"))
    assert refused.value.socket == str(open_folder / "filectx.sock")
    assert "mode 777" in refused.value.reason
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    check_folder(str(closed / "filectx.sock"))
    # Nothing there yet: trusted (connecting then finds nothing).
    check_folder(str(tmp_path / "absent" / "filectx.sock"))
    link = tmp_path / "link"
    link.symlink_to(closed)
    check_folder(str(link / "filectx.sock"))


async def test_connect_refuses_an_open_folder_before_connecting(tmp_path: Path) -> None:
    folder = tmp_path / "shared"
    folder.mkdir()
    folder.chmod(0o777)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(folder / "filectx.sock"))
    server.listen(1)
    server.setblocking(False)
    try:
        with pytest.raises(filectx.UntrustedSocketError):
            await filectx.connect(socket=folder / "filectx.sock", roots=[str(tmp_path)])
        # Nothing connected to it at all.
        with pytest.raises(BlockingIOError):
            server.accept()
    finally:
        server.close()


async def test_no_daemon_is_a_transport_error(tmp_path: Path) -> None:
    with pytest.raises(filectx.TransportError, match="is filectxd running"):
        await filectx.connect(socket=tmp_path / "none.sock", roots=[str(tmp_path)])


def test_the_peer_of_our_daemon_is_us(daemon: Daemon) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as raw:
        raw.connect(daemon.socket)
        pid, uid, _ = peer_credentials(raw)
    assert (pid, uid) == (daemon.pid, os.geteuid())


def listen_as_nobody(bound: socket.socket) -> tuple[int, int]:
    """Forks a child that calls listen() on ``bound`` as uid ``NOBODY`` (the listener's
    credentials are what SO_PEERCRED reports); returns its pid and a pipe that says when it
    listens."""
    ready, told = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: nothing but system calls, then out
        try:
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            bound.listen(4)
            os.write(told, b"l")
            time.sleep(30)
        finally:
            os._exit(0)
    os.close(told)
    return pid, ready


async def test_a_socket_file_that_is_not_a_socket_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    folder.mkdir(mode=0o700)
    plain = folder / "plain.sock"
    plain.write_text("")
    with pytest.raises(filectx.UntrustedSocketError, match="it is not a socket"):
        await filectx.connect(socket=plain, roots=[str(tmp_path)])


@pytest.mark.plays_another_user
async def test_a_socket_file_of_another_user_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    folder.mkdir(mode=0o700)
    path = folder / "filectx.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)
    server.setblocking(False)
    try:
        os.chown(path, NOBODY, NOBODY)
        with pytest.raises(filectx.UntrustedSocketError) as refused:
            await filectx.connect(socket=path, roots=[str(tmp_path)])
        assert f"it belongs to uid {NOBODY}, not to you (uid 0)" in refused.value.reason
        with pytest.raises(BlockingIOError):
            server.accept()  # nothing connected
    finally:
        server.close()


@pytest.mark.plays_another_user
async def test_a_socket_served_by_another_user_is_refused_before_sending(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    folder.mkdir(mode=0o700)
    path = folder / "filectx.sock"
    bound = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    bound.bind(str(path))
    pid, ready = listen_as_nobody(bound)
    try:
        assert os.read(ready, 1) == b"l"
        with pytest.raises(filectx.UntrustedSocketError) as refused:
            await filectx.connect(socket=path, roots=[str(tmp_path)])
        assert f"runs as uid {NOBODY} (pid {pid}), not as you (uid 0)" in refused.value.reason
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(ready)
        bound.close()
