from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class TextPart(BaseModel):
    type: Literal["text"]
    text: str


class ChatMessage(BaseModel):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[TextPart] | None = None

    @property
    def text(self) -> str:
        if isinstance(self.content, list):
            return "".join(part.text for part in self.content)
        return self.content or ""


class StreamOptions(BaseModel):
    include_usage: bool = False


class ChatCompletionRequest(BaseModel):
    """The part of OpenAI's request Thalamus uses; other fields are accepted and ignored."""

    messages: list[ChatMessage] = Field(min_length=1)
    model: str | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, ge=0, le=1)
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    stop: str | list[str] | None = None
    seed: int | None = None

    def last_user_message(self) -> ChatMessage | None:
        return next((m for m in reversed(self.messages) if m.role == "user"), None)

    def system_prompt(self) -> str:
        """The client's own instructions (system and developer messages), in order."""
        parts = [m.text.strip() for m in self.messages if m.role in ("system", "developer")]
        return "\n\n".join(part for part in parts if part)

    def earlier_turns(self) -> list[tuple[str, str]]:
        """The user and assistant messages before the last user message: the client's history."""
        turns = [(m.role, m.text) for m in self.messages if m.role in ("user", "assistant")]
        last_user = max((i for i, (role, _) in enumerate(turns) if role == "user"), default=0)
        return [(role, text) for role, text in turns[:last_user] if text.strip()]

    def stop_list(self) -> list[str] | None:
        if self.stop is None:
            return None
        return [self.stop] if isinstance(self.stop, str) else self.stop[:4]
