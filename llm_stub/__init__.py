"""The OpenAI-compatible LLM stub: tests, benchmarks and `up --demo` talk to it over real HTTP.

It lives outside `apps/`: the product never imports it. `python -m llm_stub --port 8089`.
"""

from llm_stub.server import (
    DEFAULT_SETTINGS,
    StubServer,
    demo_statements,
    demo_structured_reply,
    embed_text,
    main,
    schema_instance,
)

__all__ = [
    "DEFAULT_SETTINGS",
    "StubServer",
    "demo_statements",
    "demo_structured_reply",
    "embed_text",
    "main",
    "schema_instance",
]
