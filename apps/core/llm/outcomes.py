"""What can go wrong with an LLM call, as the gateway reports it: five outcomes, never the SDK's
own exceptions.

- TooLong: the prompt does not fit the model's window (found by our budget before sending, or
  refused by the server with its own counts).
- Refused: the server answered and said no (authentication, a 4xx about the request, a model it
  does not have after the whole fallback chain).
- Unreachable: no answer (connection refused, timed out, a 5xx, a stream cut off); worth
  trying again later.
- InvalidReply: an answer that cannot be used (a structured reply that never validated, a
  chunk that is not a chat completion).
- Preempted: a background call closed its stream so that a call the user waits for could have
  the server's slot; its task asks again once the user is quiet (`priority`).

Each carries one sentence for people and, where the server spoke, its status code.
"""

from __future__ import annotations


class LLMError(Exception):
    """An LLM call that produced no usable reply; `str()` is one sentence."""

    kind = "error"
    # Worth asking again later (a background task retries it with backoff).
    transient = False

    def __init__(
        self, sentence: str, *, status_code: int | None = None, base_url: str = "", model: str = ""
    ):
        super().__init__(sentence)
        self.status_code = status_code
        self.base_url = base_url
        self.model = model
        # Why, in a few words ("timed out", "unreachable", "HTTP 404: …"), for traces.
        self.reason = sentence

    @property
    def label(self) -> str:
        """The metrics' `kind`: the server's status ("http_500"), else the outcome's kind."""
        return f"http_{self.status_code}" if self.status_code else self.kind


class TooLong(LLMError):
    """The prompt needs more tokens than the model's window leaves it."""

    kind = "too_long"

    def __init__(
        self, sentence: str = "", *, needed: int | None = None, budget: int | None = None, **kw
    ):
        if not sentence:
            sentence = f"the prompt needs about {needed} tokens; {budget} are available"
        super().__init__(sentence, **kw)
        self.needed = needed
        self.budget = budget


class Refused(LLMError):
    kind = "refused"


class Unreachable(LLMError):
    kind = "unreachable"
    transient = True


class TimedOut(Unreachable):
    kind = "timeout"


class Preempted(LLMError):
    """A background call gave its slot to the chat; `generated` counts the tokens it had.
    Not the server's failure: the chain does not fall back, and no retry budget is spent."""

    kind = "preempted"
    transient = True

    def __init__(self, sentence: str, *, generated: int = 0, **kw):
        super().__init__(sentence, **kw)
        self.generated = generated


class InvalidReply(LLMError):
    """The model's reply, even after one repair, does not have the required shape."""

    kind = "invalid_reply"
