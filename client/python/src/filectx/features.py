"""The features a daemon announces (``capabilities.features``), and which ``initialize`` options
and tools need one: a daemon of an older build refuses what it does not know, which
:func:`refused_feature` reads as the feature it lacks."""

from __future__ import annotations

from typing import Any, Final

from .errors import INVALID_PARAMS, RpcError, UnsupportedFeatureError


class Features:
    """Names of the features a daemon announces (``capabilities.features``)."""

    CANCEL_REQUEST: Final = "cancelRequest"
    OWNERS: Final = "owners"
    DEDUP_READS: Final = "dedupReads"
    CONTEXT_RESET: Final = "contextReset"
    RESUME: Final = "resume"
    STALE_DIFFS: Final = "staleDiffs"
    KEEP_CONVENTIONS: Final = "keepConventions"
    EDIT_REGIONS: Final = "editRegions"
    READ_MAX_BYTES: Final = "readMaxBytes"
    WHOLE_LINES: Final = "wholeLines"
    SEARCH: Final = "search"
    GATE: Final = "gate"
    STALE_EDITS: Final = "staleEdits"
    JOURNAL: Final = "journal"
    JSON_BUDGET: Final = "jsonBudget"
    DIAGNOSTICS: Final = "diagnostics"


# The `initialize` options that need a feature: (field on the wire, feature). An older daemon
# refuses unknown fields with -32602 "unknown field `name`".
INIT_FEATURES: Final = (
    ("resumable", Features.RESUME),
    ("resume", Features.RESUME),
    ("dedupReads", Features.DEDUP_READS),
    ("readMaxBytes", Features.READ_MAX_BYTES),
    ("staleEdits", Features.STALE_EDITS),
    ("jsonBudget", Features.JSON_BUDGET),
    ("diagnostics", Features.DIAGNOSTICS),
)
# The tools that need a feature: an older daemon refuses their names with "unknown variant".
TOOL_FEATURES: Final = (
    ("glob", Features.SEARCH),
    ("grep", Features.SEARCH),
    ("undo", Features.JOURNAL),
    ("diagnostics", Features.DIAGNOSTICS),
)


def refused_feature(params: dict[str, Any], error: BaseException) -> UnsupportedFeatureError | None:
    """The feature a daemon lacks when it refused ``initialize`` (``params``) with -32602 for an
    option it does not know ("unknown field") or a tool it does not know ("unknown variant");
    ``None`` for any other error."""
    if not isinstance(error, RpcError) or error.code != INVALID_PARAMS:
        return None
    for field, feature in INIT_FEATURES:
        if field in params and f"unknown field `{field}`" in error.message:
            return UnsupportedFeatureError(feature)
    for tool, feature in TOOL_FEATURES:
        if tool in params.get("tools", ()) and f"unknown variant `{tool}`" in error.message:
            return UnsupportedFeatureError(feature)
    return None
