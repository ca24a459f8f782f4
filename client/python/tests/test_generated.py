"""The wire types come from the protocol's JSON Schema: the checked-in module is what the
generator makes of the checked-in schema, and the client has a method for every client → server
method the schema lists, and :class:`filectx.Features` names every feature of the protocol crate."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import get_type_hints

import filectx
from filectx import wire
from filectx.session import CLIENT_METHODS, SERVER_METHODS

PACKAGE_DIR = Path(__file__).resolve().parent.parent
SCHEMA = PACKAGE_DIR.parent.parent / "protocol" / "schema" / "filectx.schema.json"
GENERATOR = PACKAGE_DIR / "tools" / "generate_wire.py"


def load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("generate_wire", GENERATOR)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["generate_wire"] = module
    spec.loader.exec_module(module)
    return module


def schema() -> dict[str, object]:
    loaded: dict[str, object] = json.loads(SCHEMA.read_text(encoding="utf-8"))
    return loaded


def test_the_generated_module_is_up_to_date_with_the_schema() -> None:
    generated = load_generator().generate(SCHEMA.read_text(encoding="utf-8"))
    current = Path(wire.__file__).read_text(encoding="utf-8")
    assert current == generated, (
        "src/filectx/wire.py is out of date with protocol/schema/filectx.schema.json: "
        "run `python tools/generate_wire.py` in client/python"
    )


def test_the_generator_refuses_what_it_cannot_express() -> None:
    generator = load_generator()
    odd = {
        "protocolVersion": 2,
        "methods": {},
        "definitions": {"Odd": {"type": "object", "properties": {"x": {"allOf": [{"type": "string"}, {"type": "null"}]}}}},
    }
    try:
        generator.generate(json.dumps(odd))
    except generator.Unsupported as error:
        assert "allOf with 2 parts" in str(error)
    else:
        raise AssertionError("an allOf of two parts was accepted")


def test_every_definition_and_method_of_the_schema_is_in_the_module() -> None:
    loaded = schema()
    definitions = loaded["definitions"]
    assert isinstance(definitions, dict)
    for name in definitions:
        assert hasattr(wire, name), name
    assert wire.METHODS == loaded["methods"]
    assert wire.PROTOCOL_VERSION == loaded["protocolVersion"]


def test_the_types_resolve_and_keep_optional_keys_optional() -> None:
    hints = get_type_hints(wire.ReadParams)
    assert set(hints) == {"path", "offset", "limit", "maxLineChars", "owner"}
    assert wire.ReadParams.__required_keys__ == frozenset({"path"})
    assert wire.InitializeResult.__required_keys__ >= {"sessionId", "capabilities", "limits"}
    assert "resumeToken" in wire.InitializeResult.__optional_keys__
    # A tagged union: one TypedDict per `kind`.
    assert get_type_hints(wire.WriteExpectationReplaceIfVersion)["version"] is str


def test_the_client_has_a_method_for_every_client_to_server_method() -> None:
    methods = schema()["methods"]
    assert isinstance(methods, dict)
    wanted = sorted(name for name, info in methods.items() if info["direction"] in ("clientToServer", "both"))
    assert wanted, "the schema lists no client → server method"
    missing = [name for name in wanted if name not in CLIENT_METHODS]
    assert not missing, f"no client method for {missing}"
    for name in wanted:
        owner, attribute = CLIENT_METHODS[name]
        assert callable(getattr(owner, attribute, None)), f"{name}: {owner.__name__}.{attribute} is not a method"


def test_the_client_handles_every_server_to_client_method() -> None:
    methods = schema()["methods"]
    assert isinstance(methods, dict)
    wanted = sorted(name for name, info in methods.items() if info["direction"] in ("serverToClient", "both"))
    assert "file/didChange" in wanted
    missing = [name for name in wanted if name not in SERVER_METHODS]
    assert not missing, f"no handler for {missing}"
    for name in wanted:
        owner, attribute = SERVER_METHODS[name]
        assert callable(getattr(owner, attribute, None)), f"{name}: {owner.__name__}.{attribute} is not a method"


def test_features_names_every_feature_of_the_protocol_crate() -> None:
    rust = (PACKAGE_DIR.parent.parent / "protocol" / "src" / "features.rs").read_text(encoding="utf-8")
    names = re.findall(r'^pub const \w+: &str = "([^"]+)";$', rust, re.MULTILINE)
    assert len(names) >= 10, names
    known = {value for key, value in vars(filectx.Features).items() if key.isupper()}
    missing = [name for name in names if name not in known]
    assert not missing, f"Features lacks {missing}"


def test_the_package_exports_its_surface() -> None:
    for name in filectx.__all__:
        assert hasattr(filectx, name), name
    assert (Path(filectx.__file__).parent / "py.typed").exists()


def test_the_generator_reads_enums_and_tagged_unions_as_schemars_writes_them() -> None:
    generator = load_generator()
    schema_text = json.dumps(
        {
            "protocolVersion": 2,
            "methods": {"x/y": {"kind": "request", "direction": "clientToServer", "params": "P", "result": None}},
            "definitions": {
                "OnTimeout": {"type": "string", "enum": ["deny", "allow"]},
                "Op": {"oneOf": [{"type": "string", "enum": ["create"]}, {"type": "string", "const": "update"}]},
                "Shape": {
                    "oneOf": [
                        {"type": "object", "properties": {"kind": {"const": "dot"}}, "required": ["kind"]},
                        {
                            "type": "object",
                            "properties": {"kind": {"const": "line"}, "length": {"type": "integer"}},
                            "required": ["kind", "length"],
                        },
                    ]
                },
                "P": {
                    "type": "object",
                    "properties": {
                        "onTimeout": {"anyOf": [{"$ref": "#/definitions/OnTimeout"}, {"type": "null"}]},
                        "ops": {"type": ["array", "null"], "items": {"$ref": "#/definitions/Op"}},
                        "shape": {"allOf": [{"$ref": "#/definitions/Shape"}]},
                        "bytes": {"type": "integer"},
                    },
                    "required": ["bytes", "shape"],
                },
            },
        }
    )
    source = generator.generate(schema_text)
    assert 'OnTimeout: TypeAlias = Literal["deny", "allow"]' in source
    assert 'Op: TypeAlias = Literal["create", "update"]' in source
    assert "Shape: TypeAlias = ShapeDot | ShapeLine" in source
    namespace: dict[str, object] = {}
    exec(compile(source, "generated", "exec"), namespace)
    p = namespace["P"]
    assert getattr(p, "__required_keys__") == frozenset({"bytes", "shape"})
    assert getattr(p, "__optional_keys__") == frozenset({"onTimeout", "ops"})
