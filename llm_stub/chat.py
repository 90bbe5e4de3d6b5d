"""The chat completions endpoint: the request's limits and context, the reply a plan or the
defaults give, shaped as the server's settings say, sent whole or streamed."""

from __future__ import annotations

import re
import time
import uuid
from typing import Any

from llm_stub.demo import demo_reply, demo_structured_reply, demo_title
from llm_stub.handler import HANG_SECONDS, BadRequest, BaseHandler
from llm_stub.schemas import (
    GARBAGE_BODY,
    break_json,
    is_positive_int,
    schema_name,
    structured_reply,
)
from llm_stub.scripts import Plan
from llm_stub.state import DEFAULT_CHAT_MODEL
from llm_stub.tokens import (
    RUNAWAY_TOKENS,
    TRUNCATE_KEEP,
    count_tokens,
    cut_reasoning,
    last_user_text,
    last_words,
    messages_text,
    shape_reply,
    split_tokens,
    truncated_prompt,
)

STRUCTURED_FORMATS = ("json_schema", "json_object")
# The note Thalamus puts before a user's message: what its memory found for it.
NOTE = re.compile(r"\A<memory>\n.*?\n</memory>\n\n", re.DOTALL)
# Where a reasoning model's thinking goes, by the server's reasoning_format ("none": inline).
REASONING_FIELDS = {"deepseek": "reasoning_content", "ollama": "reasoning"}


def _requested_max_tokens(body: dict[str, Any]) -> int | None:
    for key in ("max_tokens", "max_completion_tokens"):
        if is_positive_int(body.get(key)):
            return body[key]
    return None


def _request_context(body: dict[str, Any], settings: dict[str, Any]) -> int | None:
    """The context window for this request: Ollama's ``num_ctx`` option when the server
    honours it, else the server's."""
    if settings["honours_num_ctx"]:
        options = body.get("options")
        num_ctx = options.get("num_ctx") if isinstance(options, dict) else None
        for value in (num_ctx, body.get("num_ctx")):
            if is_positive_int(value):
                return value
    return settings["context"]


def _generate(
    reasoning: str, content: str, settings: dict[str, Any], *, limit: int | None, seed: str
) -> tuple[dict[str, str], str, bool]:
    """What the model sends: its thinking as the message carries it (``{}``, or its field and
    text), its text, and whether it ran into `limit`. It thinks first, so a limit cuts the
    thinking first."""
    if reasoning and settings["reasoning_format"] == "none":
        content, reasoning = f"<think>\n{reasoning}\n</think>\n\n{content}", ""
    reasoning, reply_limit = cut_reasoning(reasoning, limit)
    thinking = {REASONING_FIELDS[settings["reasoning_format"]]: reasoning} if reasoning else {}
    if reply_limit == 0:
        return thinking, "", True
    text, hit_limit = shape_reply(
        content,
        eos=settings["eos"],
        loop=settings["loop"],
        special_tokens=settings["special_tokens"],
        limit=reply_limit,
        seed=seed,
    )
    return thinking, text, hit_limit


class ChatHandler(BaseHandler):
    """``POST /v1/chat/completions``."""

    def _chat(self, body: dict[str, Any], entry: dict[str, Any]) -> None:
        messages = body.get("messages")
        if not isinstance(messages, list):
            raise BadRequest("'messages' must be a list")
        settings = self.stub.defaults
        prompt_text = messages_text(messages)
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
        last_user = last_user_text(messages)
        prompt_tokens_used = prompt_tokens
        if context is not None and prompt_tokens >= context:
            if settings["overflow"] == "reject" and settings["server"] != "ollama":
                self._send_context_error(prompt_tokens, context)
                return
            prompt_tokens_used = count_tokens(truncated_prompt(prompt_text, context))
            last_user = last_words(last_user, max(0, prompt_tokens_used - TRUNCATE_KEEP))
            self.stub._annotate(entry, prompt_tokens_used=prompt_tokens_used, truncated=True)

        plan = self._plan = self.stub._take_plan("chat", prompt_text, schema_name(body))
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
                content = self._default_content(body, last_user, settings["json_junk"])
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise BadRequest(f"cannot build a reply for response_format: {exc}") from exc

        garbage_body = False
        if plan.fault == "garbage":
            self._note = " [garbage]"
            response_format = body.get("response_format")
            if isinstance(response_format, dict) and response_format.get("type") in (
                "json_object",
                "json_schema",
            ):
                content = break_json(content)
            else:
                garbage_body = True

        runaway = settings["loop"] or not settings["eos"]
        limit = max_tokens
        if runaway and limit is None:
            limit = context - prompt_tokens_used if context is not None else RUNAWAY_TOKENS
        thinking, text, hit_limit = _generate(
            plan.reasoning or "", content, settings, limit=limit, seed=prompt_text
        )
        finish_reason = "length" if hit_limit else plan.finish_reason
        completion_tokens = count_tokens(" ".join([*thinking.values(), text]))
        usage = {"prompt_tokens": prompt_tokens_used, "completion_tokens": completion_tokens}
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
                    body,
                    plan,
                    ttft,
                    text,
                    finish_reason,
                    model,
                    completion_id,
                    usage,
                    garbage_body,
                    thinking=thinking,
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
                    thinking=thinking,
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
        *,
        thinking: dict[str, str],
    ) -> None:
        if self._abort_until_first_token(ttft) or self._abort_while_generating(generating):
            return
        if garbage_body:
            self._send_bytes(200, GARBAGE_BODY)
            return
        message: dict[str, Any] = {
            "role": "assistant",
            "content": text,
            **thinking,
            "refusal": None,
        }
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
        plan: Plan,
        ttft: float,
        content: str,
        finish_reason: str,
        model: str,
        completion_id: str,
        usage: dict[str, int],
        garbage_body: bool,
        *,
        thinking: dict[str, str],
    ) -> None:
        """The thinking (``thinking``: its field and text) streams before the content, paced
        as one with it."""
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
            self._write_chunk(b"data: " + GARBAGE_BODY + b"\n\n")
            self._write_chunk(b"")
            return

        tokens = [
            (field, token) for field, text in thinking.items() for token in split_tokens(text)
        ]
        tokens += [("content", token) for token in split_tokens(content)]
        cut = len(tokens) // 2 if plan.fault == "drop" else None
        started = time.monotonic()
        for index, (field, token) in enumerate(tokens):
            if index == cut:
                break
            if plan.tps > 0 and index > 0:
                delay = started + index / plan.tps - time.monotonic()
                if delay > 0 and self._abort_if_stopping(delay):
                    return
            if index > 0 and self._client_gone():
                self._client_left()
                return
            self._write_event(delta({field: token}))
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

    def _default_content(self, body: dict[str, Any], last_user: str, json_junk: str | None) -> str:
        response_format = body.get("response_format")
        demo = self.stub.demo or body.get("model") == "demo"
        if isinstance(response_format, dict) and response_format.get("type") in STRUCTURED_FORMATS:
            if demo and json_junk is None:
                prompt = messages_text(body.get("messages") or [])
                reply = demo_structured_reply(response_format, prompt)
                if reply is not None:
                    return reply
            return structured_reply(response_format, json_junk)
        # A chat model answers the user's words, not the note memory put before them.
        said = NOTE.sub("", last_user, count=1)
        if demo:
            if "Reply with the title only" in said:
                return demo_title(said)
            return demo_reply(said)
        return f"Stub reply to: {said[:200]}"
