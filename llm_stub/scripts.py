"""What tests script: replies (validated when scripted), the server's settings, and the plan a
request follows (the scripted reply it takes, or the settings' defaults)."""

from __future__ import annotations

import copy
import json
import uuid
from dataclasses import dataclass
from typing import Any

from llm_stub.schemas import is_number, is_positive_int

# "drop_done": a streamed reply arrives whole, finish reason and usage included, then the
# connection drops before "data: [DONE]" (non-streamed, it is "drop").
# "http_401" and "http_422": a server that refuses the key, or the request's shape.
FAULTS = frozenset(
    {"http_500", "http_429", "http_401", "http_422", "drop", "drop_done", "garbage", "hang"}
)
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
        # A reasoning model's thinking before the reply, sent as reasoning_format says.
        "reasoning",
        # Seconds in the Retry-After header of an http_429 or http_500 fault.
        "retry_after",
    }
)
DEFAULT_SETTINGS: dict[str, Any] = {
    "ttft": 0.0,
    "tps": 0.0,
    "fault": None,
    "context": None,
    "overflow": "reject",
    "honours_num_ctx": False,
    "modelfile_num_ctx": True,
    "eos": True,
    "loop": False,
    "special_tokens": False,
    "json_junk": None,
    "response_formats": ["json_schema", "json_object"],
    "slots": None,
    "server": "plain",
    "missing_models": [],
    "tools": True,
    "reasoning_format": "deepseek",
}
DEFAULT_KEYS = frozenset(DEFAULT_SETTINGS)
BOOLEAN_SETTINGS = (
    "honours_num_ctx",
    "modelfile_num_ctx",
    "eos",
    "loop",
    "special_tokens",
    "tools",
)
CHOICE_SETTINGS: dict[str, tuple[Any, ...]] = {
    "overflow": ("reject", "truncate"),
    "json_junk": (None, "empty", "meaningless", "prose"),
    "server": ("plain", "llamacpp", "ollama", "vllm"),
    "reasoning_format": ("deepseek", "ollama", "none"),
}


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
    if "reasoning" in reply and not isinstance(reply["reasoning"], str):
        raise ValueError("'reasoning' must be a string")
    if "match" in reply and not isinstance(reply["match"], str):
        raise ValueError("'match' must be a string")
    if reply.get("endpoint", "chat") not in ENDPOINTS:
        raise ValueError(f"'endpoint' must be one of {sorted(ENDPOINTS)}")
    if "finish_reason" in reply and not isinstance(reply["finish_reason"], str):
        raise ValueError("'finish_reason' must be a string")
    _check_timing_and_fault(reply)
    if "retry_after" in reply and not is_positive_int(reply["retry_after"]):
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
        if key in values and (not is_number(values[key]) or values[key] < 0):
            raise ValueError(f"'{key}' must be a number >= 0")
    fault = values.get("fault")
    if fault is not None and fault not in FAULTS:
        raise ValueError(f"'fault' must be null or one of {sorted(FAULTS)}")


def check_settings(values: dict[str, Any]) -> None:
    _check_timing_and_fault(values)
    for key in ("context", "slots"):
        value = values.get(key)
        if value is not None and not is_positive_int(value):
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


@dataclass(frozen=True)
class Plan:
    content: str | None
    ttft: float
    tps: float
    fault: str | None
    finish_reason: str
    # The scripted reply it came from: given back if its client leaves before the end.
    scripted: dict[str, Any] | None = None
    tool_calls: list[dict[str, Any]] | None = None
    retry_after: int | None = None
    reasoning: str | None = None

    @classmethod
    def from_reply(cls, reply: dict[str, Any]) -> Plan:
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
            reasoning=reply.get("reasoning"),
        )
