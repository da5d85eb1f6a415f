"""A tiny JSON Schema validator: the keywords docs/auditing.md uses (type, const, enum,
required, properties, additionalProperties, items, minimum, maximum, anyOf, local $ref).

Written here because the project does not depend on ``jsonschema``; an unknown keyword is
an error, so the schema cannot silently use something this does not check.
"""

from __future__ import annotations

from typing import Any

KNOWN = {
    "$schema",
    "title",
    "$defs",
    "$ref",
    "type",
    "const",
    "enum",
    "required",
    "properties",
    "additionalProperties",
    "items",
    "minimum",
    "maximum",
    "anyOf",
}
TYPES = {
    "object": dict,
    "array": list,
    "string": str,
    "boolean": bool,
    "null": type(None),
}


def _is(value: Any, name: str) -> bool:
    if name == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if name == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, TYPES[name])


def errors(value: Any, schema: dict, root: dict | None = None, path: str = "$") -> list[str]:
    """Every violation of ``schema`` by ``value``, as ``path: message`` strings."""
    root = root if root is not None else schema
    unknown = set(schema) - KNOWN
    if unknown:
        raise ValueError(f"unsupported schema keyword(s) {sorted(unknown)} at {path}")
    if "$ref" in schema:
        target = root
        for part in schema["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        return errors(value, target, root, path)
    found: list[str] = []
    if "type" in schema:
        names = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(_is(value, n) for n in names):
            return [f"{path}: {value!r:.60} is not of type {names}"]
    if "const" in schema and value != schema["const"]:
        found.append(f"{path}: {value!r:.60} is not {schema['const']!r}")
    if "enum" in schema and value not in schema["enum"]:
        found.append(f"{path}: {value!r:.60} is not one of {schema['enum']}")
    if "minimum" in schema and _is(value, "number") and value < schema["minimum"]:
        found.append(f"{path}: {value} < {schema['minimum']}")
    if "maximum" in schema and _is(value, "number") and value > schema["maximum"]:
        found.append(f"{path}: {value} > {schema['maximum']}")
    if "anyOf" in schema and all(errors(value, s, root, path) for s in schema["anyOf"]):
        found.append(f"{path}: {value!r:.60} matches none of anyOf")
    if isinstance(value, dict):
        for key in schema.get("required", []):
            if key not in value:
                found.append(f"{path}: missing {key!r}")
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            if key in properties:
                found += errors(item, properties[key], root, f"{path}.{key}")
            elif extra is False:
                found.append(f"{path}: unexpected key {key!r}")
            elif isinstance(extra, dict):
                found += errors(item, extra, root, f"{path}.{key}")
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            found += errors(item, schema["items"], root, f"{path}[{i}]")
    return found
