from __future__ import annotations


class ChatError(ValueError):
    """A request the chat refuses, with a sentence for the user."""


class ChatRateLimited(ChatError):
    """Too many turns in the last minute; another is allowed in `retry_after` seconds."""

    def __init__(self, message: str, *, retry_after: int):
        super().__init__(message)
        self.retry_after = retry_after
