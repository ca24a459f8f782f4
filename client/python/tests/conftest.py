"""Test harness: starts a real ``filectxd`` in a temp folder on its own socket (the binary from
env ``FILECTXD``, else ``../../target/debug/filectxd`` relative to the package), and stops it.
Its ``XDG_STATE_HOME`` is in that folder too, so its journal (and staging token) are its own,
never the developer's.
Also the one record of skipped tests: every skip, whatever raised it (``pytest.skip`` in a test
or a fixture, a marker), is appended with its reason to the file ``FILECTX_SKIPPED_LOG`` names
(tests/run names them, and fails under ``FILECTX_REQUIRE_ALL_TESTS=1``); and the one decision on
the tests marked ``plays_another_user`` (they act as uid ``NOBODY``, which needs root): skipped
unless root."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE_DIR = Path(__file__).resolve().parent.parent
PATIENCE = 10.0

NOBODY = 65534
"""The uid and gid of the other local user the ``plays_another_user`` tests play (``nobody``)."""

SKIPPED_LOG_ENV = "FILECTX_SKIPPED_LOG"
"""Names the file (set by tests/run) where each skipped test appends one line with its reason."""


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"plays_another_user: acts as another local user (uid {NOBODY}), which needs root; "
        "skipped and recorded otherwise",
    )


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Skips a ``plays_another_user`` test unless this runs as root (recorded as every skip is)."""
    if item.get_closest_marker("plays_another_user") is None or os.geteuid() == 0:
        return
    pytest.skip(f"it plays another local user (uid {NOBODY}), which needs root; run the tests as root")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Records a skipped test and why in the ``FILECTX_SKIPPED_LOG`` file (from which tests/run
    names and counts the skipped tests), whatever skipped it."""
    if not report.skipped or hasattr(report, "wasxfail"):
        return
    log = os.environ.get(SKIPPED_LOG_ENV)
    if not log:
        return
    # A skip's report holds (file, line, "Skipped: <reason>").
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    reason = " ".join(reason.removeprefix("Skipped: ").split())
    # One append of one line: the lines of tests running at once do not mix.
    with open(log, "a", encoding="utf-8") as record:
        record.write(f"python filectx {report.nodeid}: {reason}\n")


def daemon_binary() -> str:
    path = os.environ.get("FILECTXD") or str(PACKAGE_DIR / ".." / ".." / "target" / "debug" / "filectxd")
    if not os.path.isfile(path):
        pytest.fail(f"filectxd not found at {path}: build it (cargo build -p filectx-daemon) or set FILECTXD", False)
    return os.path.abspath(path)


def fake_lsp_binary() -> str:
    """The repository's scripted language server (tests/src/bin/fake_lsp): env ``FILECTX_FAKE_LSP``,
    else ``../../target/debug/fake-lsp`` relative to the package (``cargo test --workspace``
    builds it; alone: ``cargo build -p filectx-tests --bin fake-lsp``). It may not exist: the
    caller says so and skips."""
    path = os.environ.get("FILECTX_FAKE_LSP") or str(PACKAGE_DIR / ".." / ".." / "target" / "debug" / "fake-lsp")
    return os.path.abspath(path)


class Daemon:
    """A ``filectxd`` serving ``socket``, with ``root`` as a folder for sessions, and with
    ``config`` (TOML) as its config file when given."""

    def __init__(self, extra: list[str] | None = None, config: str | None = None) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="filectx-py-")
        self.dir = Path(self._tmp.name)
        self.root = self.dir / "root"
        self.root.mkdir()
        if config is not None:
            (self.dir / "config.toml").write_text(config)
            extra = ["--config", str(self.dir / "config.toml"), *(extra or [])]
        self.socket = str(self.dir / "run" / "filectx.sock")
        self.log_path = self.dir / "daemon.log"
        self.state = self.dir / "state"
        self.state.mkdir(mode=0o700)
        env = {key: value for key, value in os.environ.items() if key != "RUST_LOG"}
        env["XDG_STATE_HOME"] = str(self.state)
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [daemon_binary(), "--socket", self.socket, "--log-level", "info", "--no-fsync", *(extra or [])],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
                env=env,
            )
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise

    @property
    def pid(self) -> int:
        return self.process.pid

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + PATIENCE
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"filectxd exited with {self.process.returncode}:\n{self.log()}")
            probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                probe.connect(self.socket)
            except OSError:
                probe.close()
                time.sleep(0.02)
                continue
            # Half-close and wait for the daemon to end the probe's connection, so that it does
            # not count as a session in the tests.
            probe.shutdown(socket.SHUT_WR)
            probe.settimeout(PATIENCE)
            try:
                while probe.recv(4096):
                    pass
            except OSError:
                pass
            probe.close()
            return
        raise RuntimeError(f"filectxd did not start:\n{self.log()}")

    def signal(self, sig: int) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, sig)

    def freeze(self) -> None:
        """Stops the daemon (SIGSTOP) and waits until every one of its threads is stopped."""
        self.signal(signal.SIGSTOP)
        deadline = time.monotonic() + PATIENCE
        while time.monotonic() < deadline:
            states = []
            for task in Path(f"/proc/{self.pid}/task").iterdir():
                try:
                    stat = (task / "stat").read_text()
                except OSError:
                    continue
                states.append(stat.rpartition(")")[2].split()[0])
            if states and all(state in ("T", "t") for state in states):
                return
            time.sleep(0.005)
        raise RuntimeError("filectxd did not stop")

    def thaw(self) -> None:
        """Lets a frozen daemon run again."""
        self.signal(signal.SIGCONT)

    def stop(self) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGCONT)
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._tmp.cleanup()

    def has_feature(self, feature: str) -> bool:
        """Whether this daemon announces ``feature`` (asked over a raw session)."""
        import json

        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as raw:
            raw.connect(self.socket)
            body = json.dumps(
                {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"roots": [str(self.root)]}}
            ).encode()
            raw.sendall(b"Content-Length: %d\r\n\r\n" % len(body) + body)
            data = b""
            while b"\r\n\r\n" not in data:
                data += raw.recv(4096)
            header, _, rest = data.partition(b"\r\n\r\n")
            length = int(header.split(b":", 1)[1])
            while len(rest) < length:
                rest += raw.recv(65536)
        features: list[str] = json.loads(rest[:length])["result"]["capabilities"]["features"]
        return feature in features


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    """One daemon shared by the tests of a module."""
    started = Daemon()
    yield started
    started.stop()


@pytest.fixture
def own_daemon() -> Iterator[Daemon]:
    """A daemon for one test alone (one it may stop, kill or freeze)."""
    started = Daemon()
    yield started
    started.stop()
