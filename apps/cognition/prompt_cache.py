"""The start every answer shares, read by the chat's server before a conversation's first turn.

A server reads again only what follows the longest start a new prompt shares with a prompt it
kept: llama.cpp keeps its slots' prompts and, in host memory, earlier ones (`--cache-ram`, on by
default), and restores the best match when a request comes; Ollama keeps the last prompt of each
of its parallel slots. Every answer's system prompt starts with the template's instructions and,
with memory on, the sentence on datamarks (apps/cognition/system_prompt.py, `answer_start`):
some 190 tokens, which a CPU reads at 30-40 tokens a second, so without them in the cache a
conversation's first answer waited seconds before its first token. A web process that starts
sends them once (`prompt_cache_prime`, a warm-up step) as background work: it waits for or
gives way to answers, asks for one token, and runs at most once per PRIME_EVERY_SECONDS for a
server, model and template.
"""

from __future__ import annotations

import hashlib
import logging

from django.core.cache import cache

from apps.cognition.system_prompt import answer_start
from apps.core.llm.gateway import complete
from apps.core.llm.limits import CHAT, role_endpoint
from apps.core.llm.outcomes import LLMError
from apps.core.models import RuntimeConfig
from apps.core.selectors import prompt_text, runtime_config

logger = logging.getLogger(__name__)

# llama.cpp keeps the prefix in host memory once read; the interval only bounds how often the
# web's processes ask again (a server restarted meanwhile, Ollama's slot taken by other work).
PRIME_EVERY_SECONDS = 15 * 60


def prompt_cache_prime(*, config: RuntimeConfig | None = None) -> bool:
    """Send the answers' shared start to the chat's model once, as background work; whether it
    was sent (not within PRIME_EVERY_SECONDS of the last, and not given way to an answer)."""
    config = config or runtime_config()
    prefix = answer_start(prompt_text("answer"))
    endpoint = role_endpoint(CHAT, config)
    digest = hashlib.sha1(f"{endpoint.key}|{prefix}".encode()).hexdigest()[:16]
    key = f"prompt-cache-primed:{digest}"
    if not prefix or not cache.add(key, True, PRIME_EVERY_SECONDS):
        return False
    try:
        complete(
            role=CHAT,
            prompt=[{"role": "system", "content": prefix}],
            max_tokens=1,
            temperature=0.0,
            foreground=False,
            config=config,
        )
    except LLMError as exc:  # Preempted included: the next web process to start asks again
        cache.delete(key)
        logger.info("the answers' prompt start was not sent to %s: %s", endpoint.model, exc)
        return False
    return True
