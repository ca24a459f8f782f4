"""The README's examples run as written against a real filectxd: the daemon is found through
FILECTX_SOCKET (the default socket discovery), and the project folder is a temp one."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import PACKAGE_DIR, Daemon

EXAMPLES = re.findall(r"```python\n(.*?)```", (PACKAGE_DIR / "README.md").read_text(encoding="utf-8"), re.S)


def run(example: str, daemon: Daemon, poke: Path | None = None) -> str:
    """Runs ``example`` with its project folder replaced by the daemon's root; while it runs,
    ``poke`` is changed from outside now and then (for an example that waits for a change)."""
    source = example.replace("/home/me/project", str(daemon.root))
    env = {**os.environ, "FILECTX_SOCKET": daemon.socket}
    child = subprocess.Popen(
        [sys.executable, "-c", source], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 30
    while child.poll() is None:
        assert time.monotonic() < deadline, "the example did not finish"
        if poke is not None and "the typo" in poke.read_text():  # after the example's own edit
            with open(poke, "a") as more:
                more.write("poked\n")
        time.sleep(0.2)
    out, err = child.communicate()
    assert child.returncode == 0, err
    return out


@pytest.fixture
def project(own_daemon: Daemon) -> Daemon:
    (own_daemon.root / "README.md").write_text("a line with teh typo\n")
    (own_daemon.root / "big.log").write_text("".join(f"line {n}\n" for n in range(5000)) + "ERROR at the end\n")
    return own_daemon


def test_the_readme_has_an_async_a_sync_and_an_undo_example() -> None:
    assert len(EXAMPLES) == 3
    assert "asyncio.run(main())" in EXAMPLES[0] and "from filectx.sync import connect" in EXAMPLES[1]
    assert "journal_restore" in EXAMPLES[2]


def test_the_async_example_runs(project: Daemon) -> None:
    out = run(EXAMPLES[0], project)
    assert "a line with teh typo" in out  # what it read, before its edit
    assert "1\ta line with the typo" in out  # the read tool, after it
    assert (project.root / "README.md").read_text() == "a line with the typo\n"


def test_the_sync_example_runs(project: Daemon) -> None:
    out = run(EXAMPLES[1], project, poke=project.root / "README.md")
    lines = out.splitlines()
    assert lines[:6] == ["1 1000", "1001 1000", "2001 1000", "3001 1000", "4001 1000", "5001 1"]
    assert re.fullmatch(r"README\.md [0-9a-f]{64}", lines[6])
    assert (project.root / "README.md").read_text().startswith("a line with the typo\n")


def test_the_undo_example_runs(own_daemon: Daemon) -> None:
    if not own_daemon.has_feature("journal"):
        pytest.skip("this filectxd does not announce the feature `journal`: set FILECTXD to a build with it")
    out = run(EXAMPLES[2], own_daemon)
    assert re.search(r"^\S+ edit \S+ \+1 -1$", out, re.M)
    assert re.search(r"^\S+ create \S+ \+2 -[0?]$", out, re.M)
    assert re.search(r"^-draft one$", out, re.M) and re.search(r"^changed since:$", out, re.M)
    assert re.search(r"^-title$", out, re.M)
    assert re.search(r"^restored notes\.txt in entry \S+$", out, re.M)
    assert out.rstrip().endswith("['title', 'draft one']")
    assert (own_daemon.root / "notes.txt").read_text() == "title\ndraft one\n"


def test_the_repository_readme_shows_the_tested_sync_example() -> None:
    """The top-level README's "From Python" example is this README's synchronous one, which the
    test above runs; the two must not drift apart."""
    top = (PACKAGE_DIR.parent.parent / "README.md").read_text(encoding="utf-8")
    section = top.split("## From Python", 1)[1].split("\n## ", 1)[0]
    shown = re.findall(r"```python\n(.*?)```", section, re.S)
    assert shown == [EXAMPLES[1]]
