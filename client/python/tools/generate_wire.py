#!/usr/bin/env python3
"""Generates ``src/filectx/wire.py`` (TypedDicts of the wire types) from the JSON Schema that the
Rust protocol crate writes, ``protocol/schema/filectx.schema.json``.

Standard library only; tooling, not a runtime dependency of the package. Run it from anywhere:

    python client/python/tools/generate_wire.py            # rewrite src/filectx/wire.py
    python client/python/tools/generate_wire.py --check    # exit 1 when it is out of date

The test ``tests/test_generated.py`` fails when the checked-in module differs from what this
script makes of the checked-in schema.

What it understands is what ``schemars`` emits for the protocol crate (draft-07): objects with
``properties``/``required`` (optional keys become a ``total=False`` subclass, so the module also
runs on Python 3.10, which has no ``NotRequired``), ``type`` lists with ``"null"``, ``anyOf`` with
``null``, single-element ``allOf`` wrappers, ``oneOf`` of string constants (a ``Literal``) or of
objects told apart by a constant property (one TypedDict each, and their union), ``enum``,
fixed-length arrays (a ``tuple``), and ``$ref``. Anything else fails loudly rather than being guessed.
"""

from __future__ import annotations

import argparse
import json
import keyword
import sys
from pathlib import Path
from typing import Any

PACKAGE_DIR = Path(__file__).resolve().parent.parent
REPO_DIR = PACKAGE_DIR.parent.parent
SCHEMA_PATH = REPO_DIR / "protocol" / "schema" / "filectx.schema.json"
OUTPUT_PATH = PACKAGE_DIR / "src" / "filectx" / "wire.py"

Schema = dict[str, Any]


class Unsupported(Exception):
    """A schema construct this generator does not know how to express."""


def ref_name(ref: str) -> str:
    prefix = "#/definitions/"
    if not ref.startswith(prefix):
        raise Unsupported(f"$ref {ref!r} is not a local definition")
    return ref[len(prefix) :]


def docstring(text: str | None, indent: str) -> list[str]:
    """A docstring's lines (empty when there is no text)."""
    if not text:
        return []
    body = text.strip().replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    lines = body.split("\n")
    if len(lines) == 1:
        return [f'{indent}"""{lines[0]}"""']
    out = [f'{indent}"""{lines[0]}']
    out.extend(f"{indent}{line}" if line else "" for line in lines[1:])
    out.append(f'{indent}"""')
    return out


class Generator:
    def __init__(self, schema: Schema) -> None:
        self.schema = schema
        self.definitions: dict[str, Schema] = schema["definitions"]
        # Name -> (dependencies, source lines), in the order they were made.
        self.blocks: dict[str, tuple[set[str], list[str]]] = {}

    # -- type expressions -------------------------------------------------------------------

    def expr(self, node: Schema, deps: set[str]) -> str:
        """The Python type of a property's (or an alias's) schema."""
        if "$ref" in node:
            name = ref_name(node["$ref"])
            deps.add(name)
            return name
        if "allOf" in node:
            parts = node["allOf"]
            if len(parts) != 1:
                raise Unsupported(f"allOf with {len(parts)} parts")
            return self.expr(parts[0], deps)
        if "anyOf" in node:
            return self.union([self.expr(part, deps) for part in node["anyOf"]])
        if "oneOf" in node:
            consts = [value for part in node["oneOf"] for value in self.constants(part)]
            if consts and all(isinstance(c, str) for c in consts):
                return "Literal[" + ", ".join(json.dumps(c) for c in consts) + "]"
            raise Unsupported("an inline oneOf of objects (give it a definition)")
        if "const" in node or "enum" in node:
            values = self.constants(node)
            if not all(isinstance(value, (str, int, bool)) or value is None for value in values):
                raise Unsupported(f"constants {values!r}")
            literals = [json.dumps(value) for value in values if value is not None]
            parts = ["Literal[" + ", ".join(literals) + "]"] if literals else []
            return self.union(parts + (["None"] if None in values else []))
        kinds = node.get("type")
        if kinds is None:
            return "Any"
        if isinstance(kinds, str):
            kinds = [kinds]
        return self.union([self.scalar(kind, node, deps) for kind in kinds])

    @staticmethod
    def constants(node: Schema) -> list[Any]:
        """The values a ``const`` or ``enum`` node allows (none for other nodes)."""
        if "const" in node:
            return [node["const"]]
        if isinstance(node.get("enum"), list):
            return list(node["enum"])
        return []

    def scalar(self, kind: str, node: Schema, deps: set[str]) -> str:
        if kind == "string":
            return "str"
        if kind == "integer":
            return "int"
        if kind == "number":
            return "float"
        if kind == "boolean":
            return "bool"
        if kind == "null":
            return "None"
        if kind == "array":
            items = node.get("items")
            if isinstance(items, list):
                return "tuple[" + ", ".join(self.expr(item, deps) for item in items) + "]"
            if items is None:
                return "list[Any]"
            return f"list[{self.expr(items, deps)}]"
        if kind == "object":
            if node.get("properties"):
                raise Unsupported("an inline object with properties (give it a definition)")
            return "dict[str, Any]"
        raise Unsupported(f"type {kind!r}")

    @staticmethod
    def union(parts: list[str]) -> str:
        unique: list[str] = []
        for part in parts:
            if part not in unique:
                unique.append(part)
        if "Any" in unique:
            return "Any"
        # `None` last, as people write it.
        unique.sort(key=lambda p: p == "None")
        return " | ".join(unique)

    # -- definitions ------------------------------------------------------------------------

    def define(self, name: str, node: Schema) -> None:
        description = node.get("description")
        if node.get("type") == "object" and "properties" in node:
            self.typed_dict(name, node, description)
            return
        one_of = node.get("oneOf")
        if one_of and all(part.get("type") == "object" for part in one_of):
            self.tagged_union(name, one_of, description)
            return
        deps: set[str] = set()
        lines = [f"{name}: TypeAlias = {self.expr(node, deps)}"]
        lines.extend(docstring(description, ""))
        self.blocks[name] = (deps, lines)

    def typed_dict(self, name: str, node: Schema, description: str | None) -> None:
        properties: dict[str, Schema] = node["properties"]
        required: list[str] = [key for key in node.get("required", []) if key in properties]
        optional = [key for key in properties if key not in required]
        deps: set[str] = set()
        fields = {key: (self.expr(prop, deps), prop.get("description")) for key, prop in properties.items()}
        lines: list[str] = []
        if required and optional:
            base = f"_{name}Required"
            lines += self.class_lines(base, "TypedDict", None, [(k, *fields[k]) for k in required])
            lines += ["", ""]
            lines += self.class_lines(name, f"{base}, total=False", description, [(k, *fields[k]) for k in optional])
        elif required or not optional:
            lines += self.class_lines(name, "TypedDict", description, [(k, *fields[k]) for k in required])
        else:
            lines += self.class_lines(name, "TypedDict, total=False", description, [(k, *fields[k]) for k in optional])
        self.blocks[name] = (deps, lines)

    @staticmethod
    def class_lines(
        name: str, bases: str, description: str | None, fields: list[tuple[str, str, str | None]]
    ) -> list[str]:
        for key, _, _ in fields:
            if not key.isidentifier() or keyword.iskeyword(key):
                raise Unsupported(f"{name}.{key} is not a Python identifier")
        lines = [f"class {name}({bases}):"]
        lines.extend(docstring(description, "    "))
        for key, expr, field_doc in fields:
            if len(lines) > 1:
                lines.append("")
            lines.append(f"    {key}: {expr}")
            lines.extend(docstring(field_doc, "    "))
        if len(lines) == 1:
            lines.append("    pass")
        return lines

    def tagged_union(self, name: str, variants: list[Schema], description: str | None) -> None:
        deps: set[str] = set()
        members: list[str] = []
        lines: list[str] = []
        for variant in variants:
            tag = next(
                (prop["const"] for prop in variant.get("properties", {}).values() if isinstance(prop.get("const"), str)),
                None,
            )
            if tag is None:
                raise Unsupported(f"a variant of {name} without a constant property to name it by")
            member = name + tag[:1].upper() + tag[1:]
            self.typed_dict(member, {**variant, "type": "object"}, variant.get("description"))
            deps.add(member)
            members.append(member)
        lines.append(f"{name}: TypeAlias = {' | '.join(members)}")
        lines.extend(docstring(description, ""))
        self.blocks[name] = (deps, lines)

    # -- the module -------------------------------------------------------------------------

    def ordered(self) -> list[str]:
        """Definitions in dependency order (each after what it names), else alphabetical."""
        done: list[str] = []
        placed: set[str] = set()
        visiting: set[str] = set()

        def visit(name: str) -> None:
            if name in placed:
                return
            if name in visiting:
                raise Unsupported(f"a cycle through {name}")
            visiting.add(name)
            for dep in sorted(self.blocks[name][0]):
                visit(dep)
            visiting.discard(name)
            placed.add(name)
            done.append(name)

        for name in sorted(self.blocks):
            visit(name)
        return done

    def module(self) -> str:
        for name in sorted(self.definitions):
            self.define(name, self.definitions[name])
        missing = {dep for deps, _ in self.blocks.values() for dep in deps} - set(self.blocks)
        if missing:
            raise Unsupported(f"references to undefined types: {sorted(missing)}")
        methods: dict[str, Schema] = self.schema["methods"]
        out: list[str] = [
            '"""The wire types of the filectx protocol, as TypedDicts.',
            "",
            "Generated by tools/generate_wire.py from protocol/schema/filectx.schema.json (written from",
            "the Rust protocol crate); do not edit. Keys are the wire's camelCase names.",
            '"""',
            "",
            "from __future__ import annotations",
            "",
            "from typing import Any, Final, Literal, TypeAlias, TypedDict",
        ]
        out += ["", f"PROTOCOL_VERSION: Final = {int(self.schema['protocolVersion'])}"]
        out.append('"""The protocol version the schema describes (`initialize` answers it)."""')
        for name in self.ordered():
            out += ["", ""]
            out += self.blocks[name][1]
        out += ["", ""]
        out.append("class MethodInfo(TypedDict):")
        out.append('    """One method of the protocol, as the schema lists it."""')
        out.append("")
        out.append('    kind: Literal["request", "notification"]')
        directions = sorted({str(info["direction"]) for info in methods.values()} | {"clientToServer", "serverToClient"})
        out.append("    direction: Literal[" + ", ".join(json.dumps(d) for d in directions) + "]")
        out.append('    """Who sends it (``both``: either side, as ``$/cancelRequest``)."""')
        out.append("")
        out.append("    params: str | None")
        out.append('    """The name of the params\' type in this module, if any."""')
        out.append("")
        out.append("    result: str | None")
        out.append('    """The name of the result\'s type in this module, if any."""')
        out += ["", ""]
        out.append("METHODS: Final[dict[str, MethodInfo]] = {")
        for method in sorted(methods):
            info = methods[method]
            entry = {key: info.get(key) for key in ("kind", "direction", "params", "result")}
            for key in ("params", "result"):
                if entry[key] is not None and entry[key] not in self.blocks:
                    raise Unsupported(f"{method}'s {key} names an undefined type {entry[key]}")
            out.append(
                f"    {json.dumps(method)}: {{"
                + ", ".join(f"{json.dumps(k)}: {json.dumps(v) if v is not None else 'None'}" for k, v in entry.items())
                + "},"
            )
        out.append("}")
        out.append('"""Every method of the protocol: its kind, direction, and the names of its types."""')
        out.append("")
        return "\n".join(out)


def generate(schema_text: str) -> str:
    """The module's source for the schema's text."""
    return Generator(json.loads(schema_text)).module()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--schema", type=Path, default=SCHEMA_PATH, help="the JSON Schema (default: %(default)s)")
    parser.add_argument("--output", type=Path, default=OUTPUT_PATH, help="the module (default: %(default)s)")
    parser.add_argument("--check", action="store_true", help="only check that the module is up to date")
    args = parser.parse_args(argv)
    source = generate(args.schema.read_text(encoding="utf-8"))
    if args.check:
        current = args.output.read_text(encoding="utf-8") if args.output.exists() else ""
        if current != source:
            print(f"{args.output} is out of date with {args.schema}: run {Path(__file__).name}", file=sys.stderr)
            return 1
        return 0
    args.output.write_text(source, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
