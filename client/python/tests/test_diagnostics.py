"""Language servers (feature ``diagnostics``) against a real filectxd with the repository's
scripted server fake-lsp (tests/src/bin/fake_lsp; a line ``ERROR: MESSAGE`` of an open ``.fk``
document is an error): what a write, an edit or a restore introduced, ``lsp_diagnostics``
(asynchronous and through the synchronous wrapper), ``diagnostics="off"``, a daemon without
language servers, and the call refused before anything is sent without the feature. Skipped,
saying so, without fake-lsp or on a daemon without the feature."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pytest

import filectx
from filectx import Features, Session, UnsupportedFeatureError
from filectx.sync import connect as connect_sync

from .conftest import Daemon, fake_lsp_binary

NOT_ANNOUNCED = "this filectxd does not announce the feature `diagnostics`: set FILECTXD to a build with it"


@pytest.fixture(scope="module")
def lab(daemon: Daemon) -> Iterator[Daemon]:
    """A daemon whose one language server is fake-lsp, for ``.fk`` files of the project ``proj``."""
    if not daemon.has_feature("diagnostics"):
        pytest.skip(NOT_ANNOUNCED)
    fake = fake_lsp_binary()
    if not os.path.isfile(fake):
        pytest.skip(
            f"fake-lsp not found at {fake}: build it (cargo build -p filectx-tests --bin fake-lsp) or set FILECTX_FAKE_LSP"
        )
    config = "\n".join(
        [
            "[[language_server]]",
            'name = "fake"',
            f"command = {json.dumps(fake)}",
            'args = ["--stdio"]',
            'extensions = [".fk"]',
            'root_markers = ["fake.toml"]',
            "",
        ]
    )
    started = Daemon(["--no-builtin-language-servers"], config)
    (started.root / "proj").mkdir()
    (started.root / "proj" / "fake.toml").write_text("")
    yield started
    started.stop()


async def session(daemon: Daemon, **options: object) -> Session:
    return await filectx.connect(socket=daemon.socket, roots=[daemon.root], **options)  # type: ignore[arg-type]


async def test_an_edit_that_introduces_an_error_reports_it_and_lsp_diagnostics_sees_it(lab: Daemon) -> None:
    async with await session(lab) as s:
        assert s.info["capabilities"].get("diagnostics") is True
        assert s.has_feature(Features.DIAGNOSTICS)
        (lab.root / "proj" / "a.fk").write_text("ok\nfine\n")
        await s.file.read("proj/a.fk")
        edited = await s.file.edit("proj/a.fk", "fine", "ERROR: x")
        report = edited.get("diagnostics")
        assert report is not None and report["status"] == "fresh", edited
        assert report["server"] == "fake"
        assert report["introduced"] == [
            {"path": "proj/a.fk", "line": 2, "column": 1, "severity": "error", "message": "x", "source": "fake"}
        ]
        assert report["remaining"] == 0 and report["otherFiles"] == []

        now = await s.lsp_diagnostics("proj/a.fk")
        assert now["status"] == "fresh" and now.get("server") == "fake", now
        assert now["version"] == edited["version"]
        assert [(d["line"], d["message"]) for d in now["diagnostics"]] == [(2, "x")]
        (lab.root / "notes.md").write_text("ERROR: not checked\n")
        none = await s.lsp_diagnostics("notes.md")
        assert none["status"] == "none" and none["diagnostics"] == []

        # Fixed by a write: nothing introduced. Undoing the fix brings the error back.
        fixed = await s.file.write("proj/a.fk", "ok\nfine\n")
        fixed_report = fixed.get("diagnostics")
        assert fixed_report is not None and fixed_report["status"] == "fresh", fixed
        assert fixed_report["introduced"] == []
        fix = (await s.journal_list("proj/a.fk", limit=1))["entries"][0]
        assert fix.get("after") == fixed["version"]
        restored = await s.journal_restore(fix["entry"])
        restored_report = restored.get("diagnostics")
        assert restored_report is not None and restored_report["status"] == "fresh", restored
        assert [d["message"] for d in restored_report["introduced"]] == ["x"]

        status = await s.status()
        assert [server["name"] for server in status.get("languageServers", [])] == ["fake"]


def test_off_gives_no_report_and_the_synchronous_wrapper_asks_for_the_file_errors(lab: Daemon) -> None:
    with connect_sync(socket=lab.socket, roots=[lab.root], diagnostics="off", timeout=30) as s:
        written = s.file.write("proj/off.fk", "ERROR: unseen\n")
        assert "diagnostics" not in written, written
        edited = s.file.edit("proj/off.fk", "unseen", "still unseen")
        assert "diagnostics" not in edited, edited
        # Asked for, the file's errors are there all the same.
        now = s.lsp_diagnostics("proj/off.fk")
        assert now["version"] == edited["version"]
        assert [d["message"] for d in now["diagnostics"]] == ["still unseen"]


async def test_a_daemon_without_language_servers_reports_nothing(daemon: Daemon) -> None:
    if not daemon.has_feature("diagnostics"):
        pytest.skip(NOT_ANNOUNCED)
    plain = Daemon(["--no-builtin-language-servers"])
    try:
        async with await session(plain, tools=["read", "diagnostics"]) as s:
            assert s.info["capabilities"].get("diagnostics") is False
            assert s.info["capabilities"]["tools"] == ["read"]
            written = await s.file.write("a.fk", "ERROR: x\n")
            assert "diagnostics" not in written, written
            now = await s.lsp_diagnostics("a.fk")
            assert now["status"] == "none" and now["version"] == written["version"]
    finally:
        plain.stop()


async def test_without_the_feature_lsp_diagnostics_fails_before_anything_is_sent(daemon: Daemon) -> None:
    async with await session(daemon) as s:
        # The same connection as a daemon without the feature would have announced it.
        info = {**s.info, "capabilities": {**s.info["capabilities"], "features": ["owners"]}}
        older = Session(s._channel, s.socket_path, info, s._gates, 256)  # type: ignore[arg-type]
        with pytest.raises(UnsupportedFeatureError) as refused:
            await older.lsp_diagnostics("a.fk")
        assert refused.value.feature == "diagnostics"
        # Nothing was sent that the daemon could have refused: the session goes on.
        assert (await s.status())["sessions"] >= 1
