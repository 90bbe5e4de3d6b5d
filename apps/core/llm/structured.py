"""Asking a background role for a reply of a Pydantic model's shape, so weak models survive.

Servers differ in what they accept: some take `response_format` json_schema, some only
json_object, some neither (an HTTP 400 naming it). The first refusal moves an endpoint one step
down that ladder, and the step that works is remembered in the shared cache per base URL and
model, so every later call goes straight to it. Without json_schema the schema is written into
the prompt.

Small models also wrap their JSON in prose or a ```json fence, or keep rambling after it until
max_tokens: the reply is read as a whole, then as a fenced block, then as the first balanced
JSON object in it. A reply that still does not validate gets one repair call, fitted like the
first (the schema, the bad reply and the request counted in the budget), then `InvalidReply`.
Nothing else is raised but the gateway's outcomes.

A schema whose every list and string is bounded (maxItems, maxLength, an enum) has a longest
valid reply: the call's max_tokens is sized to it (`schema_max_tokens`), so a model that fills
every list to its end still closes the object, and none writes on for a background cap.
"""

from __future__ import annotations

import json
import re
from typing import TypeVar

from django.core.cache import cache
from pydantic import BaseModel, ValidationError

from apps.core.llm import gateway
from apps.core.llm.fitting import Prompt, Room, messages_for, shorten_middle
from apps.core.llm.outcomes import InvalidReply, TooLong
from apps.core.llm.servers import Endpoint

Shape = TypeVar("Shape", bound=BaseModel)

JSON_SCHEMA, JSON_OBJECT, PROMPT = "json_schema", "json_object", "prompt"
MODES = (JSON_SCHEMA, JSON_OBJECT, PROMPT)
# A server's abilities change when it is upgraded or swapped, not from one day to the next.
MODE_SECONDS = 7 * 24 * 3600

REPAIR_REQUEST = (
    "That reply does not match the required JSON schema: {errors}\n"
    "Reply again with only the corrected JSON object."
)
SCHEMA_REQUEST = (
    "Reply with one JSON object only, no other text, matching this JSON schema:\n{schema}"
)

_FENCE = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\n?(.*?)```", re.DOTALL)
# A NUL, raw or as JSON's \u0000 escape (after an even number of backslashes, so not an escaped
# backslash followed by "u0000"): PostgreSQL refuses it in text, so a memory with one would fail
# the task that writes it.
_NUL_ESCAPE = re.compile(r"(?<!\\)((?:\\\\)*)\\u0000")


def _mode_key(endpoint: Endpoint) -> str:
    # Under llm: like the rest of what Thalamus learnt of a server (forget_model_limits).
    return f"llm:structured-mode:{endpoint.key}"


def structured_mode(*, endpoint: Endpoint) -> str:
    """How `endpoint` is asked for JSON: json_schema until a refusal taught otherwise."""
    mode = cache.get(_mode_key(endpoint))
    return mode if mode in MODES else JSON_SCHEMA


def structured_mode_forget(*, endpoint: Endpoint) -> None:
    cache.delete(_mode_key(endpoint))


def structured_mode_step_down(*, endpoint: Endpoint) -> bool:
    """The endpoint refused its mode's response_format: one step down the ladder; False when
    there is none left."""
    mode = structured_mode(endpoint=endpoint)
    if mode == PROMPT:
        return False
    cache.set(_mode_key(endpoint), MODES[MODES.index(mode) + 1], MODE_SECONDS)
    return True


def _ladder(schema: type[BaseModel]) -> gateway.Ladder:
    """The request's extra fields and instruction for the endpoint's step of the ladder."""
    instruction = SCHEMA_REQUEST.format(schema=json.dumps(schema.model_json_schema()))

    def shape(endpoint: Endpoint) -> tuple[dict, str]:
        mode = structured_mode(endpoint=endpoint)
        if mode == JSON_SCHEMA:
            return {
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": schema.__name__, "schema": schema.model_json_schema()},
                }
            }, ""
        if mode == JSON_OBJECT:
            return {"response_format": {"type": "json_object"}}, instruction
        return {}, instruction

    return gateway.Ladder(
        request=shape, step_down=lambda endpoint: structured_mode_step_down(endpoint=endpoint)
    )


def _ask(
    schema: type[BaseModel],
    *,
    role: str,
    prompt: Prompt,
    max_tokens: int | None,
    temperature: float | None,
    foreground: bool | None,
) -> str:
    reply = gateway.complete(
        role=role,
        prompt=prompt,
        max_tokens=max_tokens,
        temperature=temperature,
        foreground=foreground,
        # A model without end of sequence rambles on after its JSON until max_tokens.
        done=json_object_closed,
        ladder=_ladder(schema),
    )
    return reply.content or ""


def json_candidates(text: str) -> list[str]:
    """Where the JSON may be in a reply: all of it, a fenced block, the first balanced object."""
    candidates = [text.strip()]
    candidates += [block.strip() for block in _FENCE.findall(text)]
    found = first_json_object(text)
    if found is not None:
        candidates.append(found)
    return list(dict.fromkeys(candidate for candidate in candidates if candidate))


def first_json_object(text: str) -> str | None:
    """The first `{…}` span of `text` that parses as a JSON object, or None."""
    start = text.find("{")
    while start != -1:
        end = _balanced_end(text, start)
        if end is not None:
            span = text[start : end + 1]
            try:
                if isinstance(json.loads(span), dict):
                    return span
            except ValueError:
                pass
        start = text.find("{", start + 1)
    return None


def json_object_closed(text: str) -> bool:
    """Has the reply so far finished a top-level JSON object (not just one nested in it)?"""
    start = text.find("{")
    while start != -1:
        end = _balanced_end(text, start)
        if end is None:
            return False
        try:
            if isinstance(json.loads(text[start : end + 1]), dict):
                return True
        except ValueError:
            pass
        start = text.find("{", end + 1)
    return False


def _balanced_end(text: str, start: int) -> int | None:
    """The index of the brace closing the one at `start`; braces inside strings don't count."""
    depth = 0
    in_string = escaped = False
    for index in range(start, len(text)):
        char = text[index]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return index
    return None


def parse_reply(schema: type[Shape], text: str) -> Shape:
    """The first candidate of `text` that validates; else the most telling ValidationError."""
    text = _NUL_ESCAPE.sub(r"\1", text.replace("\x00", ""))
    error: ValidationError | None = None
    for candidate in json_candidates(text) or [text]:
        try:
            return schema.model_validate_json(candidate)
        except ValidationError as exc:
            # JSON of the wrong shape says more to a repair than text that is not JSON at all.
            if error is None or (_is_json_error(error) and not _is_json_error(exc)):
                error = exc
    assert error is not None
    raise error


def _is_json_error(exc: ValidationError) -> bool:
    return any(error["type"] == "json_invalid" for error in exc.errors())


# The longest valid reply, counted high: a string at two characters a token (SmolLM2 wrote a
# quote of "I'm a mom. " at 2.75), a number a token a digit, and each key or item with the
# quotes, colon, comma and indentation a model puts around it.
_CHARS_PER_TOKEN = 2
_TOKENS_AROUND = 4
_NUMBER_TOKENS = {"integer": 12, "number": 16, "boolean": 2, "null": 2}


def schema_max_tokens(schema: type[BaseModel]) -> int | None:
    """Tokens enough for the longest reply `schema` allows; None when a list or a string in it
    has no bound (the role's cap then stands)."""
    definitions = schema.model_json_schema()
    return _longest(definitions, definitions.get("$defs", {}))


def _longest(node: dict, defs: dict) -> int | None:
    if "$ref" in node:
        return _longest(defs[node["$ref"].rsplit("/", 1)[-1]], defs)
    if "enum" in node or "const" in node:
        values = node.get("enum", [node.get("const")])
        return _TOKENS_AROUND + max(-(-len(json.dumps(v)) // _CHARS_PER_TOKEN) for v in values)
    options = node.get("anyOf") or node.get("oneOf")
    if options:
        sizes = [_longest(option, defs) for option in options]
        return None if None in sizes else max(sizes)
    kind = node.get("type")
    if kind == "string":
        if "maxLength" not in node:
            return None
        return _TOKENS_AROUND + -(-node["maxLength"] // _CHARS_PER_TOKEN)
    if kind in _NUMBER_TOKENS:
        return _NUMBER_TOKENS[kind]
    if kind == "array":
        item = _longest(node.get("items", {}), defs)
        if item is None or "maxItems" not in node:
            return None
        return _TOKENS_AROUND + node["maxItems"] * (item + _TOKENS_AROUND)
    if kind == "object":
        total = _TOKENS_AROUND
        for key, value in (node.get("properties") or {}).items():
            size = _longest(value, defs)
            if size is None:
                return None
            total += _TOKENS_AROUND + -(-len(key) // _CHARS_PER_TOKEN) + size
        return total
    return None


def complete_as(
    schema: type[Shape],
    *,
    role: str,
    prompt: Prompt,
    max_tokens: int | None = None,
    temperature: float | None = 0.2,
    foreground: bool | None = None,
) -> Shape:
    """Ask `role` for a reply of `schema`'s shape, within the tokens its longest valid reply
    takes (or the caller's `max_tokens`, counted for its own schema against a real tokenizer,
    as reflection's is); one repair, then InvalidReply."""
    if max_tokens is None:
        max_tokens = schema_max_tokens(schema)
    reply = _ask(
        schema,
        role=role,
        prompt=prompt,
        max_tokens=max_tokens,
        temperature=temperature,
        foreground=foreground,
    )
    try:
        return parse_reply(schema, reply)
    except ValidationError as exc:
        errors = _error_sentence(exc)
    try:
        reply = _ask(
            schema,
            role=role,
            prompt=_with_repair(prompt, reply, errors),
            max_tokens=max_tokens,
            temperature=temperature,
            foreground=foreground,
        )
    except TooLong as exc:
        raise InvalidReply(f"{errors} (no room left to ask for a repair)") from exc
    try:
        return parse_reply(schema, reply)
    except ValidationError as exc:
        raise InvalidReply(_error_sentence(exc)) from exc


# The share of a repair's room the bad reply may take; its middle goes beyond it.
REPAIR_REPLY_SHARE = 3


def _with_repair(prompt: Prompt, reply: str, errors: str):
    """The prompt, then the bad reply and the request to correct it, fitted as one."""
    request = {"role": "user", "content": REPAIR_REQUEST.format(errors=errors)}

    def build(room: Room) -> list[dict]:
        keep_chars = int(room.budget // REPAIR_REPLY_SHARE * room.counter.chars_per_token)
        answer = {"role": "assistant", "content": shorten_middle(reply, keep_chars)}
        tail = [answer, request]
        return [*messages_for(prompt, room.less(room.counter.messages(tail))), *tail]

    return build


def _error_sentence(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(map(str, error['loc'])) or 'reply'}: {error['msg']}"
        for error in exc.errors()[:5]
    )
