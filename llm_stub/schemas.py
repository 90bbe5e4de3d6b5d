"""JSON schemas: the minimal instance of one, a value fitted to one, and the default reply to a
structured request, well-formed or spoilt as a weak model spoils it."""

from __future__ import annotations

import copy
import itertools
import json
import math
from collections.abc import Iterator
from typing import Any

JUNK_STRINGS = ("N/A", "string", "...")
# The start of a reply cut off mid-JSON.
GARBAGE_BODY = b'{"choices": ['


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def is_positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


_FORMAT_SAMPLES: dict[str, str] = {
    "date-time": "1970-01-01T00:00:00Z",
    "date": "1970-01-01",
    "time": "00:00:00",
    "duration": "P0D",
    "uuid": "00000000-0000-0000-0000-000000000000",
    "email": "user@example.com",
    "uri": "http://example.com",
    "url": "http://example.com",
    "hostname": "example.com",
    "ipv4": "127.0.0.1",
    "ipv6": "::1",
}


def schema_name(body: dict[str, Any]) -> str | None:
    """The name of the JSON schema a request asks for (response_format json_schema), if any."""
    response_format = body.get("response_format")
    if isinstance(response_format, dict) and isinstance(response_format.get("json_schema"), dict):
        name = response_format["json_schema"].get("name")
        return name if isinstance(name, str) else None
    return None


def schema_instance(schema: Any, root: Any = None) -> Any:
    """Build a minimal instance that validates against a JSON schema.

    Objects get only their required properties, arrays are empty (or ``minItems`` long),
    strings ``""``, numbers 0, booleans false, enums their first value; ``$ref``
    (local pointers such as ``#/$defs/X``), ``anyOf``/``oneOf`` (first option) and
    ``allOf`` (merged) are followed.
    """
    return _instance(schema, schema if root is None else root, 0)


def _resolve_ref(ref: str, root: Any) -> Any:
    if not ref.startswith("#"):
        raise ValueError(f"unsupported $ref: {ref!r}")
    node = root
    for part in ref[1:].split("/"):
        if not part:
            continue
        part = part.replace("~1", "/").replace("~0", "~")
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node


def _merge_all_of(schema: dict[str, Any], root: Any) -> dict[str, Any]:
    merged: dict[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
    for part in schema["allOf"]:
        while isinstance(part, dict) and "$ref" in part:
            part = _resolve_ref(part["$ref"], root)
        if not isinstance(part, dict):
            continue
        for key, value in part.items():
            if key == "properties":
                merged["properties"] = {**value, **merged.get("properties", {})}
            elif key == "required":
                merged["required"] = list(dict.fromkeys([*merged.get("required", []), *value]))
            else:
                merged.setdefault(key, value)
    return merged


def _number(schema: dict[str, Any], kind: str) -> int | float:
    value: float = 0
    raised = False
    minimum, maximum = schema.get("minimum"), schema.get("maximum")
    xmin, xmax = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    if is_number(minimum) and value < minimum:
        value, raised = minimum, True
    if is_number(xmin) and value <= xmin:
        value, raised = xmin + 1, True
    if is_number(maximum) and value > maximum:
        value = maximum
    if is_number(xmax) and value >= xmax:
        value = xmax - 1
    if kind == "integer":
        return math.ceil(value) if raised else math.floor(value)
    return value


def _instance(schema: Any, root: Any, depth: int) -> Any:
    if depth > 64 or not isinstance(schema, dict):
        return None
    if "$ref" in schema:
        return _instance(_resolve_ref(schema["$ref"], root), root, depth + 1)
    if "const" in schema:
        return copy.deepcopy(schema["const"])
    if schema.get("enum"):
        return copy.deepcopy(schema["enum"][0])
    for key in ("anyOf", "oneOf"):
        if schema.get(key):
            return _instance(schema[key][0], root, depth + 1)
    if schema.get("allOf"):
        return _instance(_merge_all_of(schema, root), root, depth + 1)

    kind = schema.get("type")
    if isinstance(kind, list):
        kind = kind[0] if kind else None
    if kind is None:
        if "properties" in schema or "required" in schema:
            kind = "object"
        elif "items" in schema or "prefixItems" in schema:
            kind = "array"

    if kind == "object":
        props = schema.get("properties") or {}
        return {
            name: _instance(props.get(name, {}), root, depth + 1)
            for name in schema.get("required") or []
        }
    if kind == "array":
        prefix = schema.get("prefixItems") or []
        items = schema.get("items", {})
        return [
            _instance(prefix[i] if i < len(prefix) else items, root, depth + 1)
            for i in range(int(schema.get("minItems", 0)))
        ]
    if kind == "string":
        sample = _FORMAT_SAMPLES.get(schema.get("format", ""), "")
        return sample + "x" * max(0, int(schema.get("minLength", 0)) - len(sample))
    if kind in ("integer", "number"):
        return _number(schema, kind)
    if kind == "boolean":
        return False
    return None


def fit_to_schema(value: Any, schema: Any, root: Any) -> Any:
    """`value` without the fields `schema` lacks, and with the required ones it lacks."""
    while isinstance(schema, dict) and "$ref" in schema:
        schema = _resolve_ref(schema["$ref"], root)
    if not isinstance(schema, dict):
        return value
    if isinstance(value, dict):
        properties = schema.get("properties") or {}
        required = schema.get("required") or []
        return {
            name: (
                fit_to_schema(value[name], prop, root)
                if name in value
                else schema_instance(prop, root)
            )
            for name, prop in properties.items()
            if name in value or name in required
        }
    if isinstance(value, list):
        return [fit_to_schema(item, schema.get("items") or {}, root) for item in value]
    return value


def break_json(text: str) -> str:
    broken = text[: len(text) // 2]
    try:
        json.loads(broken)
    except ValueError:
        return broken
    return GARBAGE_BODY.decode()


def structured_reply(response_format: dict[str, Any], junk: str | None) -> str:
    """The default reply to a ``json_schema`` / ``json_object`` request, spoilt as `junk` says."""
    if junk == "empty":
        return "{}"
    if response_format.get("type") == "json_schema":
        spec = response_format.get("json_schema") or {}
        instance = schema_instance(spec.get("schema") or {})
    else:
        instance = {}
    if junk == "meaningless":
        instance = _with_junk_strings(instance, itertools.cycle(JUNK_STRINGS))
    if junk == "prose":
        return (
            "Sure! Here is the JSON:\n```json\n"
            + json.dumps(instance, indent=2)
            + "\n```\nLet me know if you need anything else!"
        )
    return json.dumps(instance)


def _with_junk_strings(value: Any, iter_junk: Iterator[str]) -> Any:
    """`value` with its empty strings (free-text fields) replaced by placeholder junk."""
    if value == "":
        return next(iter_junk)
    if isinstance(value, dict):
        return {key: _with_junk_strings(item, iter_junk) for key, item in value.items()}
    if isinstance(value, list):
        return [_with_junk_strings(item, iter_junk) for item in value]
    return value
