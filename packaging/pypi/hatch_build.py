"""Adds the static filectx and filectxd binaries to the wheel as scripts, and its platform tag.

The binaries come from FILECTX_BINARIES (a folder), else ../../dist/bin, where scripts/package
puts them; the build fails when either is missing, so a wheel never ships without them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

BINARIES = ("filectx", "filectxd")

# The binaries are statically linked (glibc, +crt-static), so they need nothing of the system's
# libraries: every manylinux policy accepts them, and `auditwheel show` says so. manylinux2014
# is the oldest tag that installers still expect of Rust programs (Rust needs glibc 2.17).
PLATFORM_TAG = "manylinux_2_17_x86_64.manylinux2014_x86_64"


class BinariesHook(BuildHookInterface):  # type: ignore[type-arg]
    """Puts the binaries in the wheel's scripts and tags it py3-none-<platform>."""

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        folder = Path(os.environ.get("FILECTX_BINARIES") or Path(self.root, "../../dist/bin")).resolve()
        scripts = {}
        for name in BINARIES:
            binary = folder / name
            if not (binary.is_file() and os.access(binary, os.X_OK)):
                raise FileNotFoundError(
                    f"{binary} is missing or not executable: build the binaries first (scripts/package), "
                    "or name their folder with FILECTX_BINARIES"
                )
            scripts[str(binary)] = name
        build_data["shared_scripts"] = scripts
        build_data["pure_python"] = False
        build_data["tag"] = f"py3-none-{PLATFORM_TAG}"
