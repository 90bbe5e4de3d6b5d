"""OpenAI-compatible LLM stub server used by tests, benchmarks and the demo mode.

Standard library only and free of Django imports, so it can run in-process
(``StubServer(port=0).start()``) or as its own process::

    python -m llm_stub --port 8089 [--host 127.0.0.1] [--dim 768] [--demo]

Replies can be scripted (content, JSON, latency, faults) through the Python API or,
from other processes, through the ``/_stub/*`` HTTP control endpoints.

Server settings (``set_defaults(...)`` or ``POST /_stub/defaults``; ``reset()`` restores them)
reproduce what real local servers (llama.cpp's llama-server, Ollama, vLLM) do. Every default
leaves the stub a plain, well-behaved server. Tokens are whitespace words (``count_tokens``)
everywhere: usage, contexts and limits.

- ``context`` (None): the context window (n_ctx). A prompt of at least that many tokens
  (all message contents joined) overflows; ``overflow`` decides what happens:
  ``"reject"`` (llama.cpp) answers HTTP 400 ``exceed_context_size_error``; ``"truncate"``
  (Ollama) silently keeps the first ``TRUNCATE_KEEP`` words and the newest ones,
  ``context - 1`` in all, and answers normally with the smaller ``prompt_tokens``. Scripted
  ``match`` still sees the whole prompt; the default reply quotes only what survived.
- ``honours_num_ctx`` (False): take the context from the request's ``options.num_ctx`` or
  ``num_ctx`` (Ollama's native option), which Ollama's ``/v1`` ignores.
- ``max_tokens`` / ``max_completion_tokens`` of a request always cut the reply
  (finish_reason ``"length"``).
- ``eos`` (True): when False the model never stops by itself: after the reply comes
  non-repeating English-like filler until max_tokens, else until the context is full, else
  ``RUNAWAY_TOKENS``; finish_reason ``"length"``.
- ``loop`` (False): the reply is followed by ``LOOP_LINE`` over and over, up to the same limit.
- ``special_tokens`` (False): chat-template tokens leak into the reply
  (``<|im_start|>assistant`` before it, ``<|im_end|>`` and the next ``user`` turn after it).
- ``json_junk`` (None): default replies to ``response_format`` requests are ``"empty"``
  (``{}``), ``"meaningless"`` (schema-valid, junk strings) or ``"prose"`` (the JSON in a
  fenced block inside chatter).
- ``response_formats`` (json_schema, json_object): the response_format types accepted;
  others get HTTP 400. ``text`` is always accepted.
- ``slots`` (None): how many chat generations run at once; the others wait in arrival order.
  A client that goes away frees its slot. ``max_concurrent`` and ``GET /_stub/stats`` report
  the most generations ever run at once.
- ``server`` (``"plain"``): ``"llamacpp"`` adds ``GET /props``, ``"ollama"`` adds
  ``POST /api/show``, ``"vllm"`` adds ``max_model_len`` to ``/v1/models``.
- ``missing_models`` ([]): models the server does not have, as Ollama without them pulled:
  ``/v1/models`` leaves them out and a request naming one gets HTTP 404
  ``model "x" not found, try pulling it first``.
- ``tools`` (True): when False the server has no tool calling, like llama-server started
  without ``--jinja``: a request carrying ``tools`` gets HTTP 500
  ``tools param requires --jinja flag``. When True, an unscripted request with ``tools``
  answers with plain content (the model chose no tool).

A scripted ``tool_calls`` reply (``[{"name": ..., "arguments": {...} or a raw string}]``, a raw
string to script arguments that are not JSON) answers with an assistant message calling those
tools (ids, type ``function``, arguments as a JSON string) and finish_reason ``"tool_calls"``,
streamed as OpenAI streams them or whole.

``tps`` paces every streamed token, filler included; a non-streamed reply arrives whole after
``ttft``, except a runaway one (``eos`` off or ``loop``), which takes its generation time.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import copy
import hashlib
import itertools
import json
import logging
import math
import os
import random
import re
import select
import signal
import socket
import socketserver
import struct
import sys
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import FrameType, TracebackType
from typing import Any
from urllib.parse import urlsplit

logger = logging.getLogger("thalamus.llm_stub")

DEFAULT_MODELS: tuple[str, ...] = ("qwen2.5:7b", "nomic-embed-text", "demo")
DEFAULT_CHAT_MODEL = "qwen2.5:7b"
DEFAULT_EMBED_MODEL = "nomic-embed-text"
DEFAULT_DIM = 768
HANG_SECONDS = 30.0
# "drop_done": a streamed reply arrives whole, finish reason and usage included, then the
# connection drops before "data: [DONE]" (non-streamed, it is "drop").
FAULTS = frozenset({"http_500", "http_429", "drop", "drop_done", "garbage", "hang"})
ENDPOINTS = frozenset({"chat", "embeddings"})
REPLY_KEYS = frozenset(
    {
        "content",
        "json",
        "match",
        "ttft",
        "tps",
        "fault",
        "endpoint",
        "finish_reason",
        "resend",
        "tool_calls",
        "schema",
        # Seconds in the Retry-After header of an http_429 or http_500 fault.
        "retry_after",
    }
)
# Structured requests for these schemas (by their json_schema name) take only the scripted
# replies that name them ("schema": "RouteChoice"), and otherwise get a valid default: so a test
# that scripts the answer is not thrown off by the router's call before it.
RESERVED_SCHEMAS = frozenset({"RouteChoice"})
DEFAULT_SETTINGS: dict[str, Any] = {
    "ttft": 0.0,
    "tps": 0.0,
    "fault": None,
    "context": None,
    "overflow": "reject",
    "honours_num_ctx": False,
    "eos": True,
    "loop": False,
    "special_tokens": False,
    "json_junk": None,
    "response_formats": ["json_schema", "json_object"],
    "slots": None,
    "server": "plain",
    "missing_models": [],
    "tools": True,
}
DEFAULT_KEYS = frozenset(DEFAULT_SETTINGS)
BOOLEAN_SETTINGS = ("honours_num_ctx", "eos", "loop", "special_tokens", "tools")
CHOICE_SETTINGS: dict[str, tuple[Any, ...]] = {
    "overflow": ("reject", "truncate"),
    "json_junk": (None, "empty", "meaningless", "prose"),
    "server": ("plain", "llamacpp", "ollama", "vllm"),
}
STRUCTURED_FORMATS = ("json_schema", "json_object")
TRUNCATE_KEEP = 4  # like Ollama's num_keep: the start of the prompt (system prompt) survives
RUNAWAY_TOKENS = 4096  # how far a model that never stops runs without max_tokens or context
LOOP_LINE = "I will keep saying the same thing over and over.\n"
LEAK_BEFORE = "<|im_start|>assistant\n"
LEAK_AFTER = "<|im_end|>\nuser\n"
JUNK_STRINGS = ("N/A", "string", "...")

_TOKEN_RE = re.compile(r"\S+\s*|\s+")
_WORD_RE = re.compile(r"\w+")
_GARBAGE_BODY = b'{"choices": ['


# --------------------------------------------------------------------------- helpers


def count_tokens(text: str) -> int:
    """Token count used for ``usage``: whitespace-separated words, at least 1."""
    return max(1, len(text.split()))


def split_tokens(text: str) -> list[str]:
    """Split text into streaming pieces, keeping whitespace so they concatenate back."""
    return _TOKEN_RE.findall(text)


def default_dim() -> int:
    raw = os.environ.get("THALAMUS_EMBED_DIM", "").strip()
    return int(raw) if raw else DEFAULT_DIM


def embed_text(text: str, dim: int) -> list[float]:
    """Deterministic unit vector for ``text`` via signed feature hashing of its words.

    hashlib (not ``hash()``) keeps vectors identical across processes and PYTHONHASHSEED.
    """
    if dim < 1:
        raise ValueError("dim must be >= 1")
    vec = [0.0] * dim
    for word in _WORD_RE.findall(text.lower()):
        digest = hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest()
        bucket = int.from_bytes(digest[:6], "big") % dim
        vec[bucket] += 1.0 if digest[7] & 1 else -1.0
    norm = math.sqrt(sum(v * v for v in vec))
    if norm == 0.0:
        # Empty (or fully cancelled) text still needs a valid, fixed, non-zero vector.
        return [1.0 / math.sqrt(dim)] * dim
    return [v / norm for v in vec]


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


def _schema_name(body: dict[str, Any]) -> str | None:
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
    if _is_number(minimum) and value < minimum:
        value, raised = minimum, True
    if _is_number(xmin) and value <= xmin:
        value, raised = xmin + 1, True
    if _is_number(maximum) and value > maximum:
        value = maximum
    if _is_number(xmax) and value >= xmax:
        value = xmax - 1
    if kind == "integer":
        return math.ceil(value) if raised else math.floor(value)
    return value


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


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


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
        return "\n".join(parts)
    return ""


def _messages_text(messages: list[Any]) -> str:
    return "\n".join(_content_text(m.get("content")) for m in messages if isinstance(m, dict))


def _last_user_text(messages: list[Any]) -> str:
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            return _content_text(message.get("content"))
    return ""


def _gist(text: str, limit: int = 120) -> str:
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", 0, limit)
    return text[: cut if cut > limit // 2 else limit].rstrip() + "…"


def demo_reply(user_text: str) -> str:
    """The friendly canned answer of the demo model, with a Markdown rendering sample."""
    gist = _gist(user_text)
    said = (
        f"You asked: “{gist}”. I can't really think about it, but a real model would."
        if gist
        else "You haven't asked anything yet, so go ahead and type a question!"
    )
    return (
        "Hi! I'm the **demo model** built into Thalamus: a stand-in that works without "
        "a real LLM, so my answers are canned.\n\n"
        f"{said}\n\n"
        "Here is a little Markdown so you can see rendering work:\n\n"
        "- **bold** and *italic* text\n"
        "- bullet lists like this one\n"
        "- inline math such as $e^{i\\pi}+1=0$\n\n"
        "```python\n"
        "def greet(name: str) -> str:\n"
        '    return f"Hello, {name}!"\n'
        "```\n\n"
        "Connect a real model to get genuine answers."
    )


def demo_title(prompt: str) -> str:
    """A title for the demo: the first words the user wrote in the quoted exchange."""
    match = re.search(r"^user: (.+)$", prompt, flags=re.MULTILINE)
    words = re.sub(r"[^\w\s'-]", "", match.group(1) if match else "").split()
    return " ".join(words[:6]) or "Demo conversation"


# ------------------------------------------------------------------------ demo memory
# The demo model remembers what the user says about themselves in plain first-person
# statements, so a newcomer sees memories form, get criticised and consolidate without a
# real LLM. Only the user's line of the exchange is read: never the assistant's reply, nor the
# memories a prompt lists as already known.


@dataclass(frozen=True)
class DemoStatement:
    """A first-person statement of the user's, as the demo model remembers it."""

    quote: str
    description: str
    kind: str
    topic: str
    fact_key: str
    importance: float
    predicate: str
    object: str
    category: str | None


@dataclass(frozen=True)
class _DemoPattern:
    regex: re.Pattern[str]
    description: str  # with {what}, {verb} and {thing}
    kind: str
    topic: str  # a fixed topic, or "" to take it from the object
    fact_key: str  # with {topic} and {verb}
    importance: float
    predicate: str  # with {verb} and {thing}
    category: str | None


# Words a statement may start with before its first-person subject ("Well, I live in Rome").
_LEAD = r"^(?:(?:hi|hello|hey|well|so|also|and|oh|ok|okay|by the way|btw|actually)\b[\s,!]*)*"
_ADVERBS = r"(?:(?:really|also|absolutely|just|actually|usually|often|mostly|still|do)\s+)*"
_WHAT = r"(?P<what>.+)"
_GENERIC_VERBS = (
    "build|make|write|play|own|speak|study|teach|cook|collect|grow|design|develop|paint|"
    "repair|restore|brew|bake|knit|sew|code|program|ride|climb|sing|fix|practise|practice"
)
_LIKING_VERBS = {
    "like": "likes",
    "love": "loves",
    "enjoy": "enjoys",
    "adore": "adores",
    "prefer": "prefers",
    "hate": "hates",
    "dislike": "dislikes",
    "don't like": "doesn't like",
    "do not like": "does not like",
    "can't stand": "can't stand",
}
_PREDICATES = {"doesn't like": "dislikes", "does not like": "dislikes", "can't stand": "dislikes"}


def _demo_pattern(
    pattern: str,
    description: str,
    kind: str,
    topic: str,
    fact_key: str,
    importance: float,
    predicate: str,
    category: str | None,
) -> _DemoPattern:
    return _DemoPattern(
        re.compile(_LEAD + pattern, re.IGNORECASE),
        description,
        kind,
        topic,
        fact_key,
        importance,
        predicate,
        category,
    )


def _name_pattern(pattern: str) -> _DemoPattern:
    return _demo_pattern(
        pattern, "The user's name is {what}.", "persona", "name", "name", 0.9, "name", "identity"
    )


def _home_pattern(pattern: str) -> _DemoPattern:
    return _demo_pattern(
        pattern,
        "The user lives in {what}.",
        "persona",
        "home",
        "home_city",
        0.8,
        "lives_in",
        "places",
    )


def _job_pattern(pattern: str) -> _DemoPattern:
    return _demo_pattern(
        pattern,
        "The user works as {what}.",
        "persona",
        "work",
        "occupation",
        0.8,
        "works_as",
        "work",
    )


def _liking_pattern(pattern: str, verb: str | None = None) -> _DemoPattern:
    verb_text = verb or "{verb}"
    return _demo_pattern(
        pattern,
        f"The user {verb_text} {{what}}.",
        "preference",
        "",
        "preference_{topic}",
        0.7,
        verb_text,
        "preferences",
    )


_DEMO_PATTERNS: tuple[_DemoPattern, ...] = (
    _name_pattern(rf"(?:my name is|my name's|i am called|i'm called|call me) {_WHAT}"),
    _home_pattern(rf"i {_ADVERBS}(?:live|reside) in {_WHAT}"),
    _demo_pattern(
        rf"(?:i am|i'm|i come) from {_WHAT}",
        "The user comes from {what}.",
        "persona",
        "origin",
        "hometown",
        0.7,
        "comes_from",
        "places",
    ),
    _job_pattern(rf"i {_ADVERBS}work as {_WHAT}"),
    _demo_pattern(
        rf"i {_ADVERBS}work (?:at|for) {_WHAT}",
        "The user works at {what}.",
        "persona",
        "work",
        "employer",
        0.7,
        "works_at",
        "work",
    ),
    _demo_pattern(
        rf"my (?:favourite|favorite) (?P<thing>[\w ]+?) is {_WHAT}",
        "The user's favourite {thing} is {what}.",
        "preference",
        "",
        "favourite_{topic}",
        0.7,
        "favourite_{thing}",
        "preferences",
    ),
    _liking_pattern(rf"i {_ADVERBS}(?P<verb>{'|'.join(_LIKING_VERBS)}) {_WHAT}"),
    _demo_pattern(
        rf"i {_ADVERBS}(?P<verb>{_GENERIC_VERBS}) {_WHAT}",
        "The user {verb} {what}.",
        "fact",
        "",
        "{verb}_{topic}",
        0.6,
        "{verb}",
        None,
    ),
    # German, Italian, French and Spanish: names, homes, jobs and likings.
    _name_pattern(rf"(?:ich heiße|ich heisse|mein name ist|mi chiamo|il mio nome è) {_WHAT}"),
    _name_pattern(rf"(?:je m'appelle|mon nom est|me llamo|mi nombre es) {_WHAT}"),
    _home_pattern(rf"(?:ich wohne in|ich lebe in|vivo a|vivo in|abito a|abito in) {_WHAT}"),
    _home_pattern(rf"(?:j'habite à|j'habite a|j'habite en|je vis à|je vis en|vivo en) {_WHAT}"),
    _job_pattern(rf"(?:ich arbeite als|lavoro come|je travaille comme|trabajo como) {_WHAT}"),
    _liking_pattern(
        rf"(?:ich mag|mi piace|mi piacciono|j'aime|me gusta|me gustan) {_WHAT}", "likes"
    ),
    _liking_pattern(rf"(?:ich liebe|amo|j'adore|me encanta|me encantan) {_WHAT}", "loves"),
    _liking_pattern(rf"(?:ich hasse|odio|je déteste) {_WHAT}", "hates"),
)

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
# A new clause starts where a comma or a conjunction is followed by a first-person subject
# (or, in Italian and Spanish, a first-person verb: "e vivo a Roma").
_FIRST_PERSON = (
    r"(?=(?:i|i'm|my|ich|mein|io|mi|je|j'|mon|yo|me|vivo|abito|lavoro|trabajo|amo|odio)\b)"
)
_CLAUSE_BREAK = re.compile(
    rf"\s*[,;]\s*{_FIRST_PERSON}"
    rf"|\s*[,;]?\s+(?:and|but|so|because|und|aber|e|ma|et|mais|y|pero)\s+{_FIRST_PERSON}",
    re.IGNORECASE,
)
_ARTICLES = re.compile(
    r"^(?:the|a|an|my|some|il|lo|la|i|gli|le|l'|der|die|das|den|ein|eine|les|un|une|el|los|"
    r"las|una|uno)\s*\b",
    re.IGNORECASE,
)
_TOPIC_CUT = re.compile(
    r"\s+(?:over|to|than|more|rather|in|on|at|with|for|from|because|when|if|as)\b.*$",
    re.IGNORECASE,
)
# "I like it" says nothing that could be remembered on its own.
_EMPTY_OBJECTS = frozenset(
    {"it", "that", "this", "you", "them", "him", "her", "me", "so", "too", "one", "ones"}
)


def _third_person(verb: str) -> str:
    if verb in _LIKING_VERBS:
        return _LIKING_VERBS[verb]
    if re.search(r"(s|sh|ch|x|z|o)$", verb):
        return verb + "es"
    if re.search(r"[^aeiou]y$", verb):
        return verb[:-1] + "ies"
    return verb + "s"


def _slug(text: str) -> str:
    return re.sub(r"[\W_]+", "_", text.casefold()).strip("_")[:60]


def _demo_topic(what: str) -> str:
    topic = _TOPIC_CUT.sub("", _ARTICLES.sub("", what.strip()))
    topic = re.sub(r"^to\s+", "", topic, flags=re.IGNORECASE)
    return " ".join(topic.split()[:3]).casefold()


def _demo_object(text: str) -> str:
    return text.strip().rstrip(".!?…").strip().strip("\"'“”«»").strip()


def demo_statements(user_text: str) -> list[DemoStatement]:
    """The first-person statements in what the user wrote, as memories of the demo model.

    Questions say nothing about the user ("Do I like tea?"); a statement must start its clause
    with the user as its subject, so "you think I like tea" is no statement either.
    """
    statements: list[DemoStatement] = []
    for sentence in _SENTENCE_END.split(user_text):
        sentence = sentence.strip()
        if not sentence or sentence.endswith("?"):
            continue
        plain = sentence.replace("\u2019", "'")
        for clause in _CLAUSE_BREAK.split(plain):
            statement = _demo_statement(clause.strip(), quote=sentence)
            if statement is not None:
                statements.append(statement)
    return statements


def _demo_statement(clause: str, *, quote: str) -> DemoStatement | None:
    for pattern in _DEMO_PATTERNS:
        match = pattern.regex.match(clause)
        if match is None:
            continue
        what = _demo_object(match.group("what"))
        if not what or what.casefold() in _EMPTY_OBJECTS:
            return None
        if pattern.fact_key == "name" and what.islower():
            what = what.title()
        groups = match.groupdict()
        verb = _third_person(groups["verb"].casefold()) if groups.get("verb") else ""
        thing = (groups.get("thing") or "").strip().casefold()
        topic = pattern.topic or thing or _demo_topic(what) or _slug(what)
        fields = {"what": what, "verb": verb, "thing": thing, "topic": _slug(topic)}
        predicate = pattern.predicate.format(**fields)
        return DemoStatement(
            quote=quote,
            description=pattern.description.format(**fields),
            kind=pattern.kind,
            topic=topic,
            fact_key=pattern.fact_key.format(**fields),
            importance=pattern.importance,
            predicate=_slug(_PREDICATES.get(predicate, predicate)),
            object=_ARTICLES.sub("", what).strip() or what,
            category=pattern.category,
        )
    return None


def _exchange_user_text(prompt: str) -> str:
    """The user's message in a prompt's quoted exchange: from its first ``user:`` line up to
    the next ``assistant:`` line, so that nothing the assistant wrote is ever taken for it."""
    start = re.search(r"^user: ", prompt, flags=re.MULTILINE)
    if start is None:
        return ""
    end = prompt.find("\nassistant: ", start.end())
    return prompt[start.end() : end if end != -1 else len(prompt)]


_NODE_LINE = re.compile(r"^\[(\d+)\] \w+, topic .*?, key .*?: (.+)$", re.MULTILINE)


def _demo_reflection(prompt: str) -> dict[str, Any]:
    statements = demo_statements(_exchange_user_text(prompt))
    return {
        "memories": [
            {
                "action": "add",
                "description": s.description,
                "kind": s.kind,
                "topic": s.topic,
                "fact_key": s.fact_key,
                "importance": s.importance,
                "origin": s.quote,
                "source": "user",
                "quote": s.quote,
            }
            for s in statements
        ],
        "triples": [
            {
                "subject": "user",
                "predicate": s.predicate,
                "object": s.object,
                "category": s.category,
                "confidence": 0.8,
            }
            for s in statements
        ],
        "next_retrieval_plan": [],
        "topics": list(dict.fromkeys(s.topic for s in statements)),
    }


def _demo_verdict(prompt: str) -> dict[str, Any]:
    node = _NODE_LINE.search(prompt)
    memory = node.group(2).strip() if node else "this memory"
    said = _exchange_user_text(prompt)
    quote = next(
        (s.quote for s in demo_statements(said) if s.description.casefold() == memory.casefold()),
        None,
    )
    if quote is not None:
        return {
            "debate": (
                f"Against: “{memory}” could be a passing remark, a joke or about someone "
                "else, and one sentence is thin evidence. For: the user said it in their own "
                f"words, “{quote}”, and nothing known contradicts it. It withstands."
            ),
            "verdict": "withstands",
        }
    return {
        "debate": (
            f"Against: nothing the user wrote in this exchange says “{memory}”; it may be "
            "the assistant's guess or an over-generalisation. For: it may have come up in an "
            "earlier conversation. Without the user's own words, it fails."
        ),
        "verdict": "fails",
    }


def _demo_episode(prompt: str) -> dict[str, Any]:
    match = re.search(r"^user: (.+)$", prompt, flags=re.MULTILINE)
    gist = _gist(match.group(1) if match else "", 80)
    said = f"The user said “{gist}”" if gist else "The user said nothing yet"
    return {
        "summary": f"{said}, and the demo model answered with its canned reply.",
        "decisions": "",
        "outcome": "The demo model answered.",
        "lesson": "",
    }


_DEMO_WORKING_ON = re.compile(
    r"\b(?:i'?m|i am) (?:now )?working on (?:a |an |the |my )?([^.!?\n]{2,80})", re.IGNORECASE
)
_DEMO_FROM_NOW_ON = re.compile(r"\bfrom now on,? ([^.!?\n]{2,160})", re.IGNORECASE)


def _demo_world(prompt: str) -> dict[str, Any]:
    """The world modifier's operations for what the demo understands: a project the user works
    on, an instruction "from now on …"; otherwise no change."""
    message = prompt.split("The user's new message:", 1)[-1].split("Reply with", 1)[0]
    ops = []
    project = _DEMO_WORKING_ON.search(message)
    if project:
        ops.append({"op": "set", "path": "project", "value": project.group(1).strip()})
    instruction = _DEMO_FROM_NOW_ON.search(message)
    if instruction:
        ops.append({"op": "append", "path": "behaviour", "value": instruction.group(1).strip()})
    return {"ops": ops, "reason": "what the user said" if ops else "nothing changes"}


_DEMO_ANSWERS: dict[str, Callable[[str], dict[str, Any]]] = {
    "Reflection": _demo_reflection,
    "CriticVerdict": _demo_verdict,
    "EpisodeSummary": _demo_episode,
    "WorldOps": _demo_world,
}


def demo_structured_reply(response_format: dict[str, Any], prompt: str) -> str | None:
    """The demo model's JSON for the background calls it knows, shaped by the request's own
    schema (fields it lacks are dropped, required ones it adds are filled); None for others."""
    if response_format.get("type") != "json_schema":
        return None
    spec = response_format.get("json_schema") or {}
    answer = _DEMO_ANSWERS.get(spec.get("name", ""))
    if answer is None:
        return None
    schema = spec.get("schema") or {}
    return json.dumps(_fit_to_schema(answer(prompt), schema, schema), ensure_ascii=False)


def _fit_to_schema(value: Any, schema: Any, root: Any) -> Any:
    while isinstance(schema, dict) and "$ref" in schema:
        schema = _resolve_ref(schema["$ref"], root)
    if not isinstance(schema, dict):
        return value
    if isinstance(value, dict):
        properties = schema.get("properties") or {}
        required = schema.get("required") or []
        return {
            name: (
                _fit_to_schema(value[name], prop, root)
                if name in value
                else schema_instance(prop, root)
            )
            for name, prop in properties.items()
            if name in value or name in required
        }
    if isinstance(value, list):
        return [_fit_to_schema(item, schema.get("items") or {}, root) for item in value]
    return value


def _break_json(text: str) -> str:
    broken = text[: len(text) // 2]
    try:
        json.loads(broken)
    except ValueError:
        return broken
    return _GARBAGE_BODY.decode()


def normalize_reply(reply: Any) -> dict[str, Any]:
    """Validate a scripted reply; a bare string is shorthand for ``{"content": s}``."""
    if isinstance(reply, str):
        return {"content": reply}
    if not isinstance(reply, dict):
        raise ValueError(f"a reply must be a dict or a string, got {type(reply).__name__}")
    unknown = set(reply) - REPLY_KEYS
    if unknown:
        raise ValueError(f"unknown reply keys: {sorted(unknown)}")
    if "content" in reply and "json" in reply:
        raise ValueError("a reply takes 'content' or 'json', not both")
    if "content" in reply and not isinstance(reply["content"], str):
        raise ValueError("'content' must be a string")
    if "match" in reply and not isinstance(reply["match"], str):
        raise ValueError("'match' must be a string")
    if reply.get("endpoint", "chat") not in ENDPOINTS:
        raise ValueError(f"'endpoint' must be one of {sorted(ENDPOINTS)}")
    if "finish_reason" in reply and not isinstance(reply["finish_reason"], str):
        raise ValueError("'finish_reason' must be a string")
    _check_timing_and_fault(reply)
    if "retry_after" in reply and not _is_positive_int(reply["retry_after"]):
        raise ValueError("'retry_after' must be an integer >= 1")
    if "json" in reply:
        json.dumps(reply["json"])  # fail at scripting time, not mid-request
    if "tool_calls" in reply:
        _check_tool_calls(reply["tool_calls"])
    return copy.deepcopy(reply)


def _check_tool_calls(calls: Any) -> None:
    if not isinstance(calls, list) or not calls:
        raise ValueError("'tool_calls' must be a non-empty list")
    for call in calls:
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            raise ValueError("each tool call must be a dict with a 'name' string")
        if set(call) - {"name", "arguments"}:
            raise ValueError("a tool call takes only 'name' and 'arguments'")
        arguments = call.get("arguments", {})
        if not isinstance(arguments, str):
            json.dumps(arguments)


def _tool_calls_message(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The scripted calls as an OpenAI message's ``tool_calls``: arguments are a JSON string."""
    message_calls = []
    for call in calls:
        arguments = call.get("arguments", {})
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments)
        message_calls.append(
            {
                "id": f"call_{uuid.uuid4().hex[:24]}",
                "type": "function",
                "function": {"name": call["name"], "arguments": arguments},
            }
        )
    return message_calls


def _check_timing_and_fault(values: dict[str, Any]) -> None:
    for key in ("ttft", "tps"):
        if key in values and (not _is_number(values[key]) or values[key] < 0):
            raise ValueError(f"'{key}' must be a number >= 0")
    fault = values.get("fault")
    if fault is not None and fault not in FAULTS:
        raise ValueError(f"'fault' must be null or one of {sorted(FAULTS)}")


def _check_settings(values: dict[str, Any]) -> None:
    _check_timing_and_fault(values)
    for key in ("context", "slots"):
        value = values.get(key)
        if value is not None and not _is_positive_int(value):
            raise ValueError(f"'{key}' must be null or an integer >= 1")
    for key in BOOLEAN_SETTINGS:
        if key in values and not isinstance(values[key], bool):
            raise ValueError(f"'{key}' must be true or false")
    for key, choices in CHOICE_SETTINGS.items():
        if key in values and values[key] not in choices:
            raise ValueError(f"'{key}' must be one of {list(choices)}")
    missing = values.get("missing_models", [])
    if not isinstance(missing, list) or not all(isinstance(m, str) for m in missing):
        raise ValueError("'missing_models' must be a list of strings")
    formats = values.get("response_formats", [])
    if not isinstance(formats, list) or not all(isinstance(f, str) for f in formats):
        raise ValueError("'response_formats' must be a list of strings")


def _is_positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


# ---------------------------------------------------------- what a real model sends

_FILLER_VOCABULARY = """
    the a an this that every some many few other each our their its his her my your
    system model answer question idea reason result method process change value state
    point matter detail example problem solution pattern context memory signal record
    garden river window morning evening winter summer city village market teacher
    student friend neighbour journey letter story picture song voice light shadow
    stone paper table kitchen bridge harbour mountain forest island engine machine
    number measure season history future moment distance direction surface balance
    is was becomes seems remains makes takes gives finds keeps brings shows holds
    turns follows carries reaches leaves builds covers opens moves grows returns
    explains describes suggests considers involves requires supports connects
    quickly slowly carefully quietly often rarely nearly perhaps certainly usually
    simply gently clearly mostly partly early later again still already
    small large quiet bright early late simple careful certain common different
    important possible useful narrow wide warm cold green golden heavy light
    ancient modern gentle steady hidden open broken careful distant familiar
    with from into over under between through across around beyond within without
    and but or because while although since unless until whereas
"""
FILLER_WORDS: tuple[str, ...] = tuple(dict.fromkeys(_FILLER_VOCABULARY.split()))


def filler_text(seed: str, n: int) -> str:
    """`n` words of English-like filler that never settles into a loop.

    Words are drawn pseudo-randomly (seeded by `seed`, so the same request gets the same
    filler) into sentences of 5 to 14 words, so a repetition detector has nothing to find.
    """
    digest = hashlib.blake2b(seed.encode("utf-8"), digest_size=8).digest()
    rng = random.Random(int.from_bytes(digest, "big"))
    words: list[str] = []
    previous = ""
    left_in_sentence = 0
    while len(words) < n:
        word = rng.choice(FILLER_WORDS)
        if word == previous:
            continue
        previous = word
        if left_in_sentence == 0:
            left_in_sentence = rng.randint(5, 14)
            word = word.capitalize()
        left_in_sentence -= 1
        if left_in_sentence == 0:
            word += rng.choice(".....?!")
        elif rng.random() < 0.06:
            word += ","
        words.append(word)
    return " ".join(words)


def first_words(text: str, n: int) -> str:
    """`text` up to and including its `n`-th whitespace-separated word."""
    if n <= 0:
        return ""
    for index, match in enumerate(re.finditer(r"\S+", text)):
        if index == n - 1:
            return text[: match.end()]
    return text


def shape_reply(
    content: str,
    *,
    eos: bool,
    loop: bool,
    special_tokens: bool,
    limit: int | None,
    seed: str,
) -> tuple[str, bool]:
    """The text a server sends for `content`, and whether it ran into `limit` (tokens).

    A model that never stops (no `eos`, or a `loop`) always runs into the limit, so the
    caller must give one.
    """
    text = content
    if special_tokens:
        text = LEAK_BEFORE + text + LEAK_AFTER
    if loop or not eos:
        if limit is None:
            raise ValueError("a model that never stops needs a limit")
        missing = limit - len(text.split())
        ends_a_word = bool(text) and not text[-1].isspace()
        if missing > 0 and loop:
            more = LOOP_LINE * (missing // len(LOOP_LINE.split()) + 1)
            text += ("\n" if ends_a_word else "") + more
        elif missing > 0:
            text += (" " if ends_a_word else "") + filler_text(seed, missing)
    if limit is not None and len(text.split()) > limit:
        return first_words(text, limit), True
    return text, loop or not eos


def truncated_prompt(text: str, context: int) -> str:
    """What Ollama keeps of an overlong prompt: its first ``TRUNCATE_KEEP`` words and the
    newest ones after them, ``context - 1`` words in all (one place is left for the reply)."""
    words = text.split()
    room = context - 1
    keep = min(TRUNCATE_KEEP, room)
    return " ".join(words[:keep] + words[len(words) - (room - keep) :])


def _last_words(text: str, n: int) -> str:
    words = text.split()
    return text if len(words) <= n else " ".join(words[len(words) - n :])


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


@dataclass(frozen=True)
class _Plan:
    content: str | None
    ttft: float
    tps: float
    fault: str | None
    finish_reason: str
    # The scripted reply it came from: given back if its client leaves before the end.
    scripted: dict[str, Any] | None = None
    tool_calls: list[dict[str, Any]] | None = None
    retry_after: int | None = None

    @classmethod
    def from_reply(cls, reply: dict[str, Any]) -> _Plan:
        if "content" in reply:
            content: str | None = reply["content"]
        elif "json" in reply:
            content = json.dumps(reply["json"])
        else:
            content = None
        return cls(
            content=content,
            ttft=float(reply.get("ttft", 0)),
            tps=float(reply.get("tps", 0)),
            fault=reply.get("fault"),
            finish_reason=reply.get(
                "finish_reason", "tool_calls" if "tool_calls" in reply else "stop"
            ),
            scripted=reply,
            tool_calls=_tool_calls_message(reply["tool_calls"]) if "tool_calls" in reply else None,
            retry_after=reply.get("retry_after"),
        )


def _requested_max_tokens(body: dict[str, Any]) -> int | None:
    for key in ("max_tokens", "max_completion_tokens"):
        if _is_positive_int(body.get(key)):
            return body[key]
    return None


def _request_context(body: dict[str, Any], settings: dict[str, Any]) -> int | None:
    """The context window for this request: Ollama's ``num_ctx`` option when the server
    honours it, else the server's."""
    if settings["honours_num_ctx"]:
        options = body.get("options")
        num_ctx = options.get("num_ctx") if isinstance(options, dict) else None
        for value in (num_ctx, body.get("num_ctx")):
            if _is_positive_int(value):
                return value
    return settings["context"]


# ---------------------------------------------------------------------------- server


class StubServer:
    """In-process OpenAI-compatible stub; ``url`` is the ``base_url`` for OpenAI clients."""

    def __init__(
        self,
        port: int = 0,
        host: str = "127.0.0.1",
        *,
        dim: int | None = None,
        demo: bool = False,
        models: list[str] | tuple[str, ...] | None = None,
    ) -> None:
        self.host = host
        self._port = port
        self.dim = default_dim() if dim is None else dim
        if self.dim < 1:
            raise ValueError("dim must be >= 1")
        self.demo = demo
        self.models = list(DEFAULT_MODELS if models is None else models)
        self._cond = threading.Condition()
        self._queue: list[dict[str, Any]] = []
        self._requests: list[dict[str, Any]] = []
        self._first_token_seconds: list[float] = []
        self._defaults: dict[str, Any] = copy.deepcopy(DEFAULT_SETTINGS)
        self._slot_queue: deque[object] = deque()
        self._generating = 0
        self._max_concurrent = 0
        self._stopping = threading.Event()
        self._httpd: _StubHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # lifecycle -------------------------------------------------------------------

    def start(self) -> StubServer:
        if self._httpd is not None or self._stopping.is_set():
            raise RuntimeError("StubServer can only be started once")
        self._httpd = _StubHTTPServer((self.host, self._port), self)
        self._port = self._httpd.server_address[1]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"llm-stub:{self._port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        httpd = self._httpd
        if httpd is None:
            return
        # Wakes handlers sleeping in ttft/tps/hang so shutdown doesn't wait for them.
        self._stopping.set()
        with self._cond:
            self._cond.notify_all()  # and requests waiting for a slot
        httpd.shutdown()
        httpd.server_close()
        httpd.disconnect_all()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None
        self._thread = None

    def __enter__(self) -> StubServer:
        return self if self._httpd is not None else self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def port(self) -> int:
        return self._port

    @property
    def root_url(self) -> str:
        return f"http://{self.host}:{self._port}"

    @property
    def url(self) -> str:
        return f"{self.root_url}/v1"

    # scripting -------------------------------------------------------------------

    def script(self, *replies: dict[str, Any] | str) -> None:
        """Append scripted replies to the FIFO queue (all validated before any is queued)."""
        normalized = [normalize_reply(r) for r in replies]
        with self._cond:
            self._queue.extend(normalized)

    def set_defaults(self, **kw: Any) -> None:
        """Persistent settings: ``ttft``/``tps``/``fault`` for chat requests no scripted reply
        matches, and the server's behaviour (see the module docstring and DEFAULT_SETTINGS)."""
        unknown = set(kw) - DEFAULT_KEYS
        if unknown:
            raise ValueError(f"unknown default keys: {sorted(unknown)}")
        _check_settings(kw)
        with self._cond:
            self._defaults.update(copy.deepcopy(kw))
            self._cond.notify_all()  # a change of slots lets waiting requests in

    @property
    def defaults(self) -> dict[str, Any]:
        with self._cond:
            return copy.deepcopy(self._defaults)

    def reset(self) -> None:
        """Clear the queue, the request log and ``max_concurrent``; restore the settings."""
        with self._cond:
            self._queue.clear()
            self._requests.clear()
            self._defaults = copy.deepcopy(DEFAULT_SETTINGS)
            self._max_concurrent = self._generating
            self._cond.notify_all()

    @property
    def pending(self) -> list[dict[str, Any]]:
        with self._cond:
            return copy.deepcopy(self._queue)

    @property
    def requests(self) -> list[dict[str, Any]]:
        with self._cond:
            return copy.deepcopy(self._requests)

    @property
    def generating(self) -> int:
        """The chat generations running now (a reply's last byte can reach its client before its
        handler has given its slot back)."""
        with self._cond:
            return self._generating

    @property
    def max_concurrent(self) -> int:
        """The most chat generations that ran at once (since start or ``reset()``)."""
        with self._cond:
            return self._max_concurrent

    @property
    def first_token_seconds(self) -> list[float]:
        """Per streamed chat reply: from its request arriving to its first text sent.

        The stub's own time to first token (the scripted ttft, or its handling when that takes
        longer, plus the scheduling of its thread), which a benchmark subtracts to find what the
        caller itself added.
        """
        with self._cond:
            return list(self._first_token_seconds)

    def wait_for_requests(self, n: int, timeout: float = 5.0) -> list[dict[str, Any]]:
        with self._cond:
            if not self._cond.wait_for(lambda: len(self._requests) >= n, timeout):
                raise TimeoutError(
                    f"expected {n} requests within {timeout}s, got {len(self._requests)}"
                )
            return copy.deepcopy(self._requests)

    # used by the handler -----------------------------------------------------------

    def _record(self, path: str, body: Any) -> dict[str, Any]:
        entry = {"path": path, "body": copy.deepcopy(body)}
        with self._cond:
            self._requests.append(entry)
            self._cond.notify_all()
        return entry

    def _annotate(self, entry: dict[str, Any], **fields: Any) -> None:
        with self._cond:
            entry.update(fields)

    def _take_slot(self, client_gone: Callable[[], bool]) -> bool:
        """Wait, in arrival order, for a free generation slot; False if the server stops or
        the client goes away first."""
        ticket = object()
        with self._cond:
            self._slot_queue.append(ticket)
            try:
                while self._slot_queue[0] is not ticket or not self._slot_free():
                    if self._stopping.is_set() or client_gone():
                        return False
                    self._cond.wait(0.05)  # also polls for the client going away
            finally:
                self._slot_queue.remove(ticket)
                self._cond.notify_all()
            self._generating += 1
            self._max_concurrent = max(self._max_concurrent, self._generating)
            return True

    def _slot_free(self) -> bool:
        slots = self._defaults["slots"]
        return slots is None or self._generating < slots

    def _release_slot(self) -> None:
        with self._cond:
            self._generating -= 1
            self._cond.notify_all()

    def _take_plan(self, endpoint: str, text: str, schema: str | None = None) -> _Plan:
        reserved = schema in RESERVED_SCHEMAS
        with self._cond:
            for index, reply in enumerate(self._queue):
                if reply.get("endpoint", "chat") != endpoint:
                    continue
                if reply.get("schema") is not None and reply["schema"] != schema:
                    continue
                if reserved and reply.get("schema") != schema:
                    continue
                match = reply.get("match")
                if match is not None and match not in text:
                    continue
                del self._queue[index]
                return _Plan.from_reply(reply)
            if endpoint != "chat":
                return _Plan(None, 0.0, 0.0, None, "stop")
            defaults = dict(self._defaults)
        return _Plan(
            content=None,
            ttft=float(defaults["ttft"]),
            tps=float(defaults["tps"]),
            fault=defaults["fault"],
            finish_reason="stop",
        )

    def _give_back(self, plan: _Plan) -> None:
        """A scripted reply marked `resend` whose client left before its end was not
        delivered: the next matching request gets it, as a real model would write the same
        reply again (a client that gives way and asks later). Others are used up, as a
        stopped answer is."""
        if plan.scripted is not None and plan.scripted.get("resend"):
            with self._cond:
                self._queue.insert(0, plan.scripted)

    def _default_chat_content(
        self, body: dict[str, Any], last_user: str, json_junk: str | None
    ) -> str:
        response_format = body.get("response_format")
        demo = self.demo or body.get("model") == "demo"
        if isinstance(response_format, dict) and response_format.get("type") in STRUCTURED_FORMATS:
            if demo and json_junk is None:
                prompt = _messages_text(body.get("messages") or [])
                reply = demo_structured_reply(response_format, prompt)
                if reply is not None:
                    return reply
            return structured_reply(response_format, json_junk)
        if demo:
            if "Reply with the title only" in last_user:
                return demo_title(last_user)
            return demo_reply(last_user)
        return f"Stub reply to: {last_user[:200]}"

    def _sleep(self, seconds: float) -> bool:
        """Sleep unless the server stops first; returns False when it did."""
        if seconds <= 0:
            return not self._stopping.is_set()
        return not self._stopping.wait(seconds)


class _StubHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], stub: StubServer) -> None:
        self.stub = stub
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()
        super().__init__(address, _Handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind does a reverse DNS lookup (getfqdn) that can stall.
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name = str(host)
        self.server_port = int(port)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._open_lock:
            self._open.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._open_lock:
            self._open.discard(request)
        super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], OSError):
            return
        logger.exception("LLM stub: unhandled error serving %s", client_address)

    def disconnect_all(self) -> None:
        """Close kept-alive and in-flight connections so their threads end promptly."""
        with self._open_lock:
            sockets = list(self._open)
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


class _BadRequest(Exception):
    pass


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "ThalamusLLMStub/1.0"
    disable_nagle_algorithm = True
    timeout = 300  # idle keep-alive connections
    server: _StubHTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        pass  # one line per request is logged by _dispatch instead

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    @property
    def stub(self) -> StubServer:
        return self.server.stub

    # plumbing --------------------------------------------------------------------

    def _dispatch(self, method: str) -> None:
        self._plan = None
        started = self._started = time.monotonic()
        self._status = "-"
        self._note = ""
        self._headers_sent = False
        path = urlsplit(self.path).path
        try:
            body = self._read_json() if method == "POST" else None
            self._route(method, path, body)
        except _BadRequest as exc:
            self._send_error_json(400, str(exc), "invalid_request_error")
        except OSError:
            self.close_connection = True
            self._note = self._note or " (connection lost)"
        except Exception:
            logger.exception("LLM stub: error handling %s %s", method, path)
            self.close_connection = True
            if not self._headers_sent:
                with contextlib.suppress(OSError):
                    self._send_error_json(500, "stub internal error", "server_error")
        finally:
            elapsed = (time.monotonic() - started) * 1000
            logger.info("%s %s -> %s%s (%.0f ms)", method, path, self._status, self._note, elapsed)

    def _read_json(self) -> Any:
        try:
            if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
                raw = self._read_chunked()
            else:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length > 0 else b""
        except ValueError as exc:
            self.close_connection = True
            raise _BadRequest("malformed request body framing") from exc
        if not raw.strip():
            return None
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise _BadRequest(f"request body is not valid JSON: {exc}") from exc

    def _read_chunked(self) -> bytes:
        chunks: list[bytes] = []
        while True:
            size = int(self.rfile.readline(65537).split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                    pass
                return b"".join(chunks)
            chunks.append(self.rfile.read(size))
            self.rfile.readline()

    def _send_bytes(
        self,
        status: int,
        data: bytes,
        content_type: str = "application/json",
        headers: dict[str, str] | None = None,
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self._headers_sent = True
        self._status = str(status)
        self.wfile.write(data)

    def _send_json(self, status: int, payload: Any) -> None:
        self._send_bytes(status, json.dumps(payload).encode("utf-8"))

    def _send_error_json(
        self,
        status: int,
        message: str,
        err_type: str,
        code: str | None = None,
        retry_after: int | None = None,
    ) -> None:
        error = {"message": message, "type": err_type, "param": None, "code": code}
        headers = {"Retry-After": str(retry_after)} if retry_after else None
        self._send_bytes(status, json.dumps({"error": error}).encode("utf-8"), headers=headers)

    def _start_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self._headers_sent = True
        self._status = "200"

    def _write_chunk(self, data: bytes) -> None:
        if data:
            self.wfile.write(b"%X\r\n%s\r\n" % (len(data), data))
        else:
            self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _write_event(self, payload: Any) -> None:
        self._write_chunk(b"data: " + json.dumps(payload).encode("utf-8") + b"\n\n")

    def _drop(self) -> None:
        """Close the socket abruptly: no (further) response bytes, no [DONE]."""
        self.close_connection = True
        self._note = " (dropped)"
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def _abort_until_first_token(self, ttft: float) -> bool:
        """Wait until `ttft` after the request arrived (reading and parsing it count towards it,
        as they do for a real server); True if the server stops or the client leaves first,
        as a server stops reading the prompt of a client that left."""
        return self._abort_while_generating(ttft - (time.monotonic() - self._started))

    def _abort_while_generating(self, seconds: float) -> bool:
        """Take `seconds` to generate, stopping early (True) if the server stops or the client
        goes away, as a real server stops generating for a client that left."""
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            if self._abort_if_stopping(min(left, 0.05)):
                return True
            if self._client_gone():
                self._client_left()
                return True
        return False

    def _client_left(self) -> None:
        self._drop()
        self._note = " (client gone)"
        plan = getattr(self, "_plan", None)
        if plan is not None:
            self.stub._give_back(plan)

    def _client_gone(self) -> bool:
        """True once the client has closed its end of the connection."""
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def _abort_if_stopping(self, seconds: float) -> bool:
        if self.stub._sleep(seconds):
            return False
        self._drop()
        self._note = " (server stopping)"
        return True

    # routing ---------------------------------------------------------------------

    def _route(self, method: str, path: str, body: Any) -> None:
        if path.startswith("/_stub/"):
            self._control(method, path, body)
            return
        server = self.stub.defaults["server"]
        if server == "llamacpp" and (method, path) == ("GET", "/props"):
            self._llamacpp_props()
            return
        if server == "ollama" and (method, path) == ("POST", "/api/show"):
            self._ollama_show(body)
            return
        api = path[3:] if path.startswith("/v1/") else path
        api = api.rstrip("/") or "/"
        missing = self.stub.defaults["missing_models"]
        if method == "GET" and api == "/models":
            listed = [self._model(m) for m in self.stub.models if m not in missing]
            self._send_json(200, {"object": "list", "data": listed})
        elif method == "GET" and api.startswith("/models/"):
            model = api[len("/models/") :]
            if model in self.stub.models:
                self._send_json(200, self._model(model))
            else:
                self._send_error_json(
                    404, f"model {model!r} not found", "invalid_request_error", "model_not_found"
                )
        elif method == "POST" and api in ("/chat/completions", "/embeddings"):
            if not isinstance(body, dict):
                raise _BadRequest("request body must be a JSON object")
            entry = self.stub._record(path, body)
            # Which key the client sent, so tests can tell where an operator's key went.
            entry["authorization"] = self.headers.get("Authorization")
            if body.get("model") in missing:
                # Ollama's /v1 for a model not pulled.
                message = f'model "{body["model"]}" not found, try pulling it first'
                self._send_error_json(404, message, "not_found_error")
            elif api == "/chat/completions":
                self._chat(body, entry)
            else:
                self._embeddings(body)
        else:
            self._send_error_json(404, f"no route for {method} {path}", "invalid_request_error")

    def _model(self, model: str) -> dict[str, Any]:
        entry = {"id": model, "object": "model", "created": 0, "owned_by": "thalamus-stub"}
        settings = self.stub.defaults
        if settings["server"] == "vllm":
            entry["max_model_len"] = settings["context"] or 4096
        return entry

    def _llamacpp_props(self) -> None:
        settings = self.stub.defaults
        model = self.stub.models[0] if self.stub.models else DEFAULT_CHAT_MODEL
        self._send_json(
            200,
            {
                "default_generation_settings": {
                    "n_ctx": settings["context"] or 4096,
                    "params": {"n_predict": -1},
                },
                "total_slots": settings["slots"] or 1,
                "model_path": f"/models/{model}.gguf",
                "build_info": "stub",
            },
        )

    def _ollama_show(self, body: Any) -> None:
        body = body if isinstance(body, dict) else {}
        model = body.get("model") or body.get("name")
        if model not in self.stub.models or model in self.stub.defaults["missing_models"]:
            self._send_json(404, {"error": f"model '{model}' not found"})
            return
        context = self.stub.defaults["context"]
        parameters = 'stop "<|im_end|>"'
        if context is not None:
            parameters = f"num_ctx {context}\n{parameters}"
        self._send_json(
            200,
            {
                "model_info": {"general.architecture": "qwen2", "qwen2.context_length": 32768},
                "parameters": parameters,
                "details": {
                    "format": "gguf",
                    "family": "qwen2",
                    "parameter_size": "7.6B",
                    "quantization_level": "Q4_K_M",
                },
            },
        )

    def _control(self, method: str, path: str, body: Any) -> None:
        stub = self.stub
        route = (method, path.rstrip("/"))
        try:
            if route == ("POST", "/_stub/script"):
                replies = body if isinstance(body, list) else [body]
                stub.script(*replies)
                self._send_json(200, {"queued": len(stub.pending)})
            elif route == ("GET", "/_stub/script"):
                self._send_json(200, stub.pending)
            elif route == ("POST", "/_stub/defaults"):
                if not isinstance(body, dict):
                    raise ValueError("defaults must be a JSON object")
                stub.set_defaults(**body)
                self._send_json(200, {"defaults": stub.defaults})
            elif route == ("POST", "/_stub/reset"):
                stub.reset()
                self._send_json(200, {"ok": True})
            elif route == ("GET", "/_stub/requests"):
                self._send_json(200, stub.requests)
            elif route == ("GET", "/_stub/stats"):
                self._send_json(
                    200, {"max_concurrent": stub.max_concurrent, "requests": len(stub.requests)}
                )
            else:
                self._send_error_json(404, f"no route for {method} {path}", "invalid_request_error")
        except ValueError as exc:
            raise _BadRequest(str(exc)) from exc

    # fault handling shared by chat and embeddings ----------------------------------

    def _apply_fault(self, plan: _Plan, stream: bool = False) -> bool:
        """Answer error faults up front; a streaming "drop" is left to the stream itself."""
        dropped = plan.fault in ("drop", "drop_done") and not stream
        if plan.fault in ("http_500", "http_429") or dropped:
            self._note = f" [{plan.fault}]"
            if self._abort_if_stopping(plan.ttft):
                return True
            if dropped:
                self._drop()
            elif plan.fault == "http_500":
                self._send_error_json(
                    500,
                    "Scripted stub failure",
                    "server_error",
                    "stub_fault",
                    retry_after=plan.retry_after,
                )
            else:
                self._send_error_json(
                    429,
                    "Scripted rate limit",
                    "rate_limit_error",
                    "rate_limit_exceeded",
                    retry_after=plan.retry_after,
                )
            return True
        return False

    # chat --------------------------------------------------------------------------

    def _chat(self, body: dict[str, Any], entry: dict[str, Any]) -> None:
        messages = body.get("messages")
        if not isinstance(messages, list):
            raise _BadRequest("'messages' must be a list")
        settings = self.stub.defaults
        prompt_text = _messages_text(messages)
        prompt_tokens = count_tokens(prompt_text)
        max_tokens = _requested_max_tokens(body)
        self.stub._annotate(
            entry,
            prompt_tokens=prompt_tokens,
            prompt_tokens_used=prompt_tokens,
            truncated=False,
            completion_tokens=0,
            finish_reason=None,
            max_tokens=max_tokens,
            slot_wait=0.0,
        )
        if self._reject_response_format(body, settings["response_formats"]):
            return
        if body.get("tools") and not settings["tools"]:
            # llama-server without --jinja, to the letter.
            self._send_error_json(500, "tools param requires --jinja flag", "server_error")
            return

        context = _request_context(body, settings)
        last_user = _last_user_text(messages)
        prompt_tokens_used = prompt_tokens
        if context is not None and prompt_tokens >= context:
            if settings["overflow"] == "reject":
                self._send_context_error(prompt_tokens, context)
                return
            prompt_tokens_used = count_tokens(truncated_prompt(prompt_text, context))
            last_user = _last_words(last_user, max(0, prompt_tokens_used - TRUNCATE_KEEP))
            self.stub._annotate(entry, prompt_tokens_used=prompt_tokens_used, truncated=True)

        plan = self._plan = self.stub._take_plan("chat", prompt_text, _schema_name(body))
        stream = bool(body.get("stream"))
        model = body.get("model") or DEFAULT_CHAT_MODEL

        ttft = plan.ttft
        if plan.fault == "hang":
            self._note = " [hang]"
            if self._abort_if_stopping(plan.ttft or HANG_SECONDS):
                return
            ttft = 0.0
        if self._apply_fault(plan, stream):
            return

        try:
            content = plan.content
            if content is None and plan.tool_calls:
                content = ""
            elif content is None:
                content = self.stub._default_chat_content(body, last_user, settings["json_junk"])
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise _BadRequest(f"cannot build a reply for response_format: {exc}") from exc

        garbage_body = False
        if plan.fault == "garbage":
            self._note = " [garbage]"
            response_format = body.get("response_format")
            if isinstance(response_format, dict) and response_format.get("type") in (
                "json_object",
                "json_schema",
            ):
                content = _break_json(content)
            else:
                garbage_body = True

        runaway = settings["loop"] or not settings["eos"]
        limit = max_tokens
        if runaway and limit is None:
            limit = context - prompt_tokens_used if context is not None else RUNAWAY_TOKENS
        text, hit_limit = shape_reply(
            content,
            eos=settings["eos"],
            loop=settings["loop"],
            special_tokens=settings["special_tokens"],
            limit=limit,
            seed=prompt_text,
        )
        finish_reason = "length" if hit_limit else plan.finish_reason
        usage = {"prompt_tokens": prompt_tokens_used, "completion_tokens": count_tokens(text)}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        self.stub._annotate(
            entry, completion_tokens=usage["completion_tokens"], finish_reason=finish_reason
        )
        completion_id = f"chatcmpl-stub-{uuid.uuid4().hex[:24]}"

        waiting_since = time.monotonic()
        if not self.stub._take_slot(self._client_gone):
            self._drop()
            return
        slot_wait = time.monotonic() - waiting_since
        self.stub._annotate(entry, slot_wait=slot_wait)
        # The time to first token starts when the slot does, as on a real server.
        ttft += slot_wait
        try:
            if stream:
                self._stream_chat(
                    body, plan, ttft, text, finish_reason, model, completion_id, usage, garbage_body
                )
            else:
                generating = 0.0
                if runaway and plan.tps:
                    # so that a client's timeout meets a runaway reply as it would a real one
                    generating = (usage["completion_tokens"] - 1) / plan.tps
                self._send_completion(
                    ttft,
                    generating,
                    text,
                    finish_reason,
                    model,
                    completion_id,
                    usage,
                    garbage_body,
                    plan.tool_calls,
                )
        finally:
            self.stub._release_slot()

    def _send_completion(
        self,
        ttft: float,
        generating: float,
        text: str,
        finish_reason: str,
        model: str,
        completion_id: str,
        usage: dict[str, int],
        garbage_body: bool,
        tool_calls: list[dict[str, Any]] | None = None,
    ) -> None:
        if self._abort_until_first_token(ttft) or self._abort_while_generating(generating):
            return
        if garbage_body:
            self._send_bytes(200, _GARBAGE_BODY)
            return
        message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": None}
        if tool_calls:
            message.update(content=text or None, tool_calls=tool_calls)
        self._send_json(
            200,
            {
                "id": completion_id,
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "system_fingerprint": "thalamus-stub",
                "choices": [
                    {
                        "index": 0,
                        "message": message,
                        "logprobs": None,
                        "finish_reason": finish_reason,
                    }
                ],
                "usage": usage,
            },
        )

    def _reject_response_format(self, body: dict[str, Any], accepted: list[str]) -> bool:
        response_format = body.get("response_format")
        kind = response_format.get("type") if isinstance(response_format, dict) else None
        if kind is None or kind == "text" or kind in accepted:
            return False
        message = f"response_format type '{kind}' is not supported"
        self._send_json(
            400, {"error": {"code": 400, "message": message, "type": "invalid_request_error"}}
        )
        return True

    def _send_context_error(self, prompt_tokens: int, context: int) -> None:
        """llama-server's answer to a prompt that does not fit, to the letter."""
        self._note = " (context exceeded)"
        message = (
            f"request ({prompt_tokens} tokens) exceeds the available context size "
            f"({context} tokens), try increasing it"
        )
        error = {
            "code": 400,
            "message": message,
            "type": "exceed_context_size_error",
            "n_prompt_tokens": prompt_tokens,
            "n_ctx": context,
        }
        self._send_json(400, {"error": error})

    def _stream_chat(
        self,
        body: dict[str, Any],
        plan: _Plan,
        ttft: float,
        content: str,
        finish_reason: str,
        model: str,
        completion_id: str,
        usage: dict[str, int],
        garbage_body: bool,
    ) -> None:
        stream_options = body.get("stream_options")
        include_usage = isinstance(stream_options, dict) and bool(
            stream_options.get("include_usage")
        )
        created = int(time.time())

        def chunk(choices: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
            return {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "system_fingerprint": "thalamus-stub",
                "choices": choices,
                **extra,
            }

        def delta(fields: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
            choice = {"index": 0, "delta": fields, "logprobs": None, "finish_reason": finish_reason}
            return chunk([choice])

        self._start_stream()
        if self._abort_until_first_token(ttft):
            return
        self._write_event(delta({"role": "assistant", "content": ""}))
        if garbage_body:
            self._write_chunk(b"data: " + _GARBAGE_BODY + b"\n\n")
            self._write_chunk(b"")
            return

        tokens = split_tokens(content)
        cut = len(tokens) // 2 if plan.fault == "drop" else None
        started = time.monotonic()
        for index, token in enumerate(tokens):
            if index == cut:
                break
            if plan.tps > 0 and index > 0:
                delay = started + index / plan.tps - time.monotonic()
                if delay > 0 and self._abort_if_stopping(delay):
                    return
            if index > 0 and self._client_gone():
                self._client_left()
                return
            self._write_event(delta({"content": token}))
            if index == 0:
                with self.stub._cond:
                    self.stub._first_token_seconds.append(time.monotonic() - self._started)
        if cut is not None:
            self._drop()
            return
        for index, call in enumerate(plan.tool_calls or []):
            # Streamed as servers do: the call's id and name first, its arguments in pieces.
            arguments = call["function"]["arguments"]
            half = len(arguments) // 2
            opening = {**call, "index": index, "function": {"name": call["function"]["name"]}}
            opening["function"]["arguments"] = ""
            self._write_event(delta({"tool_calls": [opening]}))
            for piece in (arguments[:half], arguments[half:]):
                if piece:
                    piece_delta = {"index": index, "function": {"arguments": piece}}
                    self._write_event(delta({"tool_calls": [piece_delta]}))

        self._write_event(delta({}, finish_reason))
        if include_usage:
            self._write_event(chunk([], usage=usage))
        if plan.fault == "drop_done":
            self._drop()
            return
        self._write_chunk(b"data: [DONE]\n\n")
        self._write_chunk(b"")

    # embeddings --------------------------------------------------------------------

    def _embeddings(self, body: dict[str, Any]) -> None:
        texts = self._embedding_texts(body.get("input"))
        dimensions = body.get("dimensions")
        if dimensions is None:
            dim = self.stub.dim
        elif _is_number(dimensions) and int(dimensions) == dimensions and dimensions > 0:
            dim = int(dimensions)
        else:
            raise _BadRequest("'dimensions' must be a positive integer")

        plan = self.stub._take_plan("embeddings", "\n".join(texts))
        if plan.fault == "hang":
            self._note = " [hang]"
            if self._abort_if_stopping(plan.ttft or HANG_SECONDS):
                return
        elif self._apply_fault(plan) or self._abort_until_first_token(plan.ttft):
            return
        if plan.fault == "garbage":
            self._note = " [garbage]"
            self._send_bytes(200, b'{"data": [')
            return

        base64_format = body.get("encoding_format") == "base64"
        data = []
        for index, text in enumerate(texts):
            vector = embed_text(text, dim)
            embedding: Any = (
                base64.b64encode(struct.pack(f"<{dim}f", *vector)).decode("ascii")
                if base64_format
                else vector
            )
            data.append({"object": "embedding", "index": index, "embedding": embedding})
        tokens = sum(count_tokens(text) for text in texts)
        self._send_json(
            200,
            {
                "object": "list",
                "data": data,
                "model": body.get("model") or DEFAULT_EMBED_MODEL,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            },
        )

    @staticmethod
    def _embedding_texts(raw: Any) -> list[str]:
        if isinstance(raw, str):
            return [raw]
        if isinstance(raw, list) and raw:
            if all(isinstance(item, str) for item in raw):
                return list(raw)
            # Token-id input: hash the ids as words so the result is still deterministic.
            if all(isinstance(item, int) for item in raw):
                return [" ".join(map(str, raw))]
            if all(isinstance(item, list) for item in raw):
                return [" ".join(map(str, item)) for item in raw]
        raise _BadRequest("'input' must be a string or a non-empty list of strings")


# ------------------------------------------------------------------------------- CLI


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m llm_stub", description="OpenAI-compatible LLM stub server"
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8089, help="0 picks a free port")
    parser.add_argument(
        "--dim", type=int, default=None, help="embedding size (default $THALAMUS_EMBED_DIM or 768)"
    )
    parser.add_argument("--demo", action="store_true", help="friendly demo replies")
    parser.add_argument(
        "--model",
        action="append",
        dest="models",
        help=f"model id to advertise (repeatable; default: {', '.join(DEFAULT_MODELS)})",
    )
    args = parser.parse_args(argv)

    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s llm-stub %(message)s"
    )
    stop_requested: list[int] = []

    def request_stop(signum: int, frame: FrameType | None) -> None:
        stop_requested.append(signum)

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)

    stub = StubServer(args.port, args.host, dim=args.dim, demo=args.demo, models=args.models)
    stub.start()
    logger.info(
        "listening on %s (models=%s, dim=%d, demo=%s)",
        stub.url,
        ",".join(stub.models),
        stub.dim,
        stub.demo,
    )
    try:
        # Polling rather than Event.wait: setting an Event from a signal handler can deadlock.
        while not stop_requested:
            time.sleep(0.2)
    finally:
        stub.stop()
        logger.info("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
