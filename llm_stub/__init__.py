"""The OpenAI-compatible LLM stub: tests, benchmarks and `up --demo` talk to it over real HTTP.

It lives outside `apps/`: the product never imports it. `python -m llm_stub --port 8089`.
Its settings and scripted replies are described in `llm_stub.server`.

`server` (StubServer, the CLI) serves `state` (the scripting API, request log and slots) through
`routes` (every endpoint), `chat` (chat completions) and `handler` (HTTP plumbing, faults).
`scripts` validates replies and settings; `tokens`, `schemas`, `demo` and `embeddings` make
the replies.
"""

from llm_stub.demo import demo_statements, demo_structured_reply
from llm_stub.embeddings import embed_text
from llm_stub.schemas import schema_instance
from llm_stub.scripts import DEFAULT_SETTINGS
from llm_stub.server import StubServer, main

__all__ = [
    "DEFAULT_SETTINGS",
    "StubServer",
    "demo_statements",
    "demo_structured_reply",
    "embed_text",
    "main",
    "schema_instance",
]
