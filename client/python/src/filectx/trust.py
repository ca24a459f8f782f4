"""Where the daemon's socket is, and whom the client trusts there: only a daemon of its own
user, reached through a folder only that user controls (as the Rust client's ``trust.rs``).

Two checks, because each covers what the other cannot (plus a third, the socket file's owner,
which the other two already imply but which fails with a clearer message):

- **The folder**, before connecting (:func:`check_folder`): the socket's folder (followed
  through a symlink, which must then be ours too) must be a folder owned by our effective uid
  that neither group nor others may write. Another user who owns the folder, or may write in it,
  could put a socket of their own at the path and so impersonate the daemon; a sticky bit does
  not prevent that. Read and search bits for others are allowed.
- **The peer**, right after connecting and before anything is sent (:func:`check_peer`): the
  process serving the socket must run as our effective uid (``SO_PEERCRED``).
"""

from __future__ import annotations

import os
import socket as socketlib
import stat
import struct

from .errors import UntrustedSocketError

SOCKET_ENV = "FILECTX_SOCKET"
"""Environment variable that overrides the socket path (for the daemon and every client)."""
SOCKET_FILE_NAME = "filectx.sock"
"""File name of the socket inside its folder."""

_HOW_TO_CHOOSE = "choose a socket in a folder of your own (--socket PATH or FILECTX_SOCKET)"


def default_socket_path(env: dict[str, str] | None = None, uid: int | None = None) -> str:
    """The socket to connect to when none is given: ``FILECTX_SOCKET`` when set and non-empty,
    else ``$XDG_RUNTIME_DIR/filectx.sock`` when that is an absolute path, else
    ``/tmp/filectx-$UID/filectx.sock`` (``$UID`` being the effective uid).

    ``env`` and ``uid`` default to the process's own (they are parameters for tests).
    """
    environ = os.environ if env is None else env
    explicit = environ.get(SOCKET_ENV)
    if explicit:
        return explicit
    runtime_dir = environ.get("XDG_RUNTIME_DIR")
    if runtime_dir and os.path.isabs(runtime_dir):
        return os.path.join(runtime_dir, SOCKET_FILE_NAME)
    return f"/tmp/filectx-{os.geteuid() if uid is None else uid}/{SOCKET_FILE_NAME}"


def folder_of(socket_path: str) -> str:
    """The folder that holds ``socket_path``: its parent, ``.`` for a bare file name."""
    parent = os.path.dirname(socket_path)
    if parent == "":
        return "."
    return parent


def judge_folder(
    folder: str, *, link_owner: int | None, is_dir: bool, owner: int, mode: int, ours: int
) -> str | None:
    """The folder rule, apart from any IO: why ``folder`` is refused, or ``None`` to trust it.
    ``link_owner`` is the owner of the path itself when it is a symlink."""
    if link_owner is not None and link_owner != ours:
        return (
            f"its folder {folder} is a symbolic link that belongs to uid {link_owner}, not to you "
            f"(uid {ours}), so that user decides where it leads; remove the link, or {_HOW_TO_CHOOSE}"
        )
    if not is_dir:
        return f"{folder} is not a folder; choose another socket (--socket PATH or FILECTX_SOCKET)"
    if owner != ours:
        return (
            f"its folder {folder} belongs to uid {owner}, not to you (uid {ours}), so that user could "
            f"serve a fake daemon there; remove the folder if it should not exist, or {_HOW_TO_CHOOSE}"
        )
    if mode & 0o022:
        return (
            f"its folder {folder} has mode {mode & 0o7777:o}, so other users can write there and put a "
            f"fake daemon's socket in its place (a sticky bit does not prevent that); run "
            f"`chmod go-w {folder}`, or {_HOW_TO_CHOOSE}"
        )
    return None


def check_folder(socket_path: str) -> None:
    """Checks the folder of ``socket_path`` before connecting.

    Returns when the folder is trusted, or when nothing is there yet (connecting then finds
    nothing). Raises :class:`UntrustedSocketError` when it is refused, and ``OSError`` when it
    cannot be inspected (e.g. permission denied on the way), which connecting would run into too.
    """
    folder = folder_of(socket_path)
    try:
        link = os.lstat(folder)
    except FileNotFoundError:
        return
    ours = os.geteuid()
    link_owner: int | None = None
    meta = link
    if stat.S_ISLNK(link.st_mode):
        link_owner = link.st_uid
        try:
            meta = os.stat(folder)
        except FileNotFoundError:
            # A dangling link: only its owner can be judged.
            if link_owner != ours:
                reason = judge_folder(folder, link_owner=link_owner, is_dir=True, owner=ours, mode=0o700, ours=ours)
                if reason is not None:
                    raise UntrustedSocketError(socket_path, reason) from None
            return
    reason = judge_folder(
        folder,
        link_owner=link_owner,
        is_dir=stat.S_ISDIR(meta.st_mode),
        owner=meta.st_uid,
        mode=stat.S_IMODE(meta.st_mode),
        ours=ours,
    )
    if reason is not None:
        raise UntrustedSocketError(socket_path, reason)


def check_socket_file(socket_path: str) -> None:
    """Checks the socket file itself before connecting, when there is one: it must be a socket
    owned by our effective uid (the daemon creates it so, mode 0600; a systemd user unit's
    socket is ours too). Its mode is not judged: the folder already keeps others out, and the
    peer check proves who serves it. Raises :class:`UntrustedSocketError` otherwise."""
    try:
        meta = os.lstat(socket_path)
    except FileNotFoundError:
        return
    ours = os.geteuid()
    if not stat.S_ISSOCK(meta.st_mode):
        raise UntrustedSocketError(
            socket_path, "it is not a socket; choose another socket (--socket PATH or FILECTX_SOCKET)"
        )
    if meta.st_uid != ours:
        raise UntrustedSocketError(
            socket_path,
            f"it belongs to uid {meta.st_uid}, not to you (uid {ours}), so it is not your filectx "
            "daemon's; remove it, or choose another socket (--socket PATH or FILECTX_SOCKET)",
        )


_UCRED = struct.Struct("3i")  # struct ucred {pid_t pid; uid_t uid; gid_t gid;}


def peer_credentials(sock: socketlib.socket) -> tuple[int, int, int]:
    """``(pid, uid, gid)`` of the process serving a connected Unix socket (``SO_PEERCRED``)."""
    raw = sock.getsockopt(socketlib.SOL_SOCKET, socketlib.SO_PEERCRED, _UCRED.size)
    pid, uid, gid = _UCRED.unpack(raw)
    return pid, uid, gid


def check_peer(sock: socketlib.socket, socket_path: str) -> None:
    """Checks, right after connecting and before anything is sent, that the process serving the
    socket runs as our effective uid. Raises :class:`UntrustedSocketError` otherwise, or when
    the kernel will not say."""
    ours = os.geteuid()
    try:
        pid, uid, _ = peer_credentials(sock)
    except (OSError, AttributeError) as error:
        raise UntrustedSocketError(
            socket_path, f"cannot tell which user serves it (SO_PEERCRED failed: {error}), so nothing was sent to it"
        ) from error
    if uid != ours:
        who = f" (pid {pid})" if pid > 0 else ""
        raise UntrustedSocketError(
            socket_path,
            f"the process serving it runs as uid {uid}{who}, not as you (uid {ours}), so it is not your "
            "filectx daemon and nothing was sent to it; find out who runs it, remove the socket, or "
            "choose another socket (--socket PATH or FILECTX_SOCKET)",
        )


def socket_path(explicit: str | os.PathLike[str] | None = None) -> str:
    """``explicit`` when given, else :func:`default_socket_path`."""
    if explicit is not None:
        return os.fspath(explicit)
    return default_socket_path()


__all__ = [
    "SOCKET_ENV",
    "SOCKET_FILE_NAME",
    "check_folder",
    "check_peer",
    "check_socket_file",
    "default_socket_path",
    "folder_of",
    "judge_folder",
    "peer_credentials",
    "socket_path",
]
