from __future__ import annotations

import json
from typing import Literal

import pytest
from pydantic import BaseModel, Field

from apps.cognition.schemas import EpisodeSummary, stated_quotes_max_tokens, stated_quotes_schema
from apps.core.llm import structured
from apps.core.llm.limits import role_endpoint
from apps.core.llm.outcomes import InvalidReply, TooLong
from apps.core.llm.structured import complete_as, first_json_object, json_candidates

SUMMARY = {"summary": "Talked about Rome", "decisions": "", "outcome": "", "lesson": ""}
ASK = [{"role": "user", "content": "Summarise this stretch of conversation."}]


def test_json_in_prose_with_a_fence_is_found():
    reply = f"Sure! Here it is:\n```json\n{json.dumps(SUMMARY)}\n```\nAnything else?"

    assert json.dumps(SUMMARY) in json_candidates(reply)


def test_json_followed_by_rambling_is_found():
    reply = json.dumps(SUMMARY) + " and then the model went on and on { about nothing"

    assert json.loads(first_json_object(reply)) == SUMMARY


def test_braces_and_escaped_quotes_inside_strings_do_not_end_the_object():
    tricky = {"summary": 'a "}" brace and a \\ backslash {', "decisions": "}", "outcome": ""}
    reply = "Note {this}: " + json.dumps(tricky) + "} trailing"

    assert json.loads(first_json_object(reply)) == tricky


def test_a_reply_without_json_has_no_object():
    assert first_json_object("No JSON here, only {braces} and {more: of them}") is None
    assert first_json_object('{"cut": "off') is None


@pytest.fixture
def fresh_modes(db):
    """The stub's endpoint starts, and ends, as never refused."""
    endpoint = role_endpoint("episode")
    structured.structured_mode_forget(endpoint=endpoint)
    yield endpoint
    structured.structured_mode_forget(endpoint=endpoint)


def _formats(llm_stub) -> list[str | None]:
    return [
        (r["body"].get("response_format") or {}).get("type")
        for r in llm_stub.requests
        if r["path"].endswith("/chat/completions")
    ]


def test_a_server_without_json_schema_is_asked_for_json_object_from_then_on(llm_stub, fresh_modes):
    llm_stub.set_defaults(response_formats=["json_object"])
    llm_stub.script({"json": SUMMARY}, {"json": SUMMARY})

    assert complete_as(EpisodeSummary, role="episode", prompt=ASK).summary == SUMMARY["summary"]
    assert complete_as(EpisodeSummary, role="episode", prompt=ASK).summary == SUMMARY["summary"]

    assert _formats(llm_stub) == ["json_schema", "json_object", "json_object"]
    assert structured.structured_mode(endpoint=fresh_modes) == "json_object"
    asked = llm_stub.requests[-1]["body"]["messages"][-1]["content"]
    assert '"summary"' in asked  # the schema is written into the prompt


def test_a_server_without_response_format_gets_the_schema_in_the_prompt_from_then_on(
    llm_stub, fresh_modes
):
    llm_stub.set_defaults(response_formats=[])
    fenced = f"Here you go:\n```json\n{json.dumps(SUMMARY)}\n```"
    llm_stub.script({"content": fenced}, {"content": fenced})

    complete_as(EpisodeSummary, role="episode", prompt=ASK)
    complete_as(EpisodeSummary, role="episode", prompt=ASK)

    assert _formats(llm_stub) == ["json_schema", "json_object", None, None]
    assert structured.structured_mode(endpoint=fresh_modes) == "prompt"


def test_a_server_that_takes_json_schema_stays_on_it(llm_stub, fresh_modes):
    llm_stub.script({"json": SUMMARY}, {"json": SUMMARY})

    complete_as(EpisodeSummary, role="episode", prompt=ASK)
    complete_as(EpisodeSummary, role="episode", prompt=ASK)

    assert _formats(llm_stub) == ["json_schema", "json_schema"]


def test_a_prompt_too_long_is_not_taken_for_a_refused_format(llm_stub, fresh_modes):
    llm_stub.set_defaults(context=5, overflow="reject")

    with pytest.raises(TooLong):
        complete_as(EpisodeSummary, role="episode", prompt=ASK)

    assert _formats(llm_stub) == ["json_schema"]
    assert structured.structured_mode(endpoint=fresh_modes) == "json_schema"


def test_json_followed_by_rambling_until_max_tokens_is_used(llm_stub, fresh_modes):
    llm_stub.set_defaults(eos=False)
    llm_stub.script({"json": SUMMARY})

    summary = complete_as(EpisodeSummary, role="episode", prompt=ASK)

    assert summary.summary == SUMMARY["summary"]
    assert len(_formats(llm_stub)) == 1  # no repair call was needed


def test_prose_around_the_json_needs_no_repair(llm_stub, fresh_modes):
    llm_stub.set_defaults(json_junk="prose")

    complete_as(EpisodeSummary, role="episode", prompt=ASK)

    assert len(_formats(llm_stub)) == 1


def test_an_empty_object_is_repaired_once_then_invalid(llm_stub, fresh_modes):
    llm_stub.set_defaults(json_junk="empty")

    with pytest.raises(InvalidReply, match="summary"):
        complete_as(EpisodeSummary, role="episode", prompt=ASK)

    assert len(_formats(llm_stub)) == 2
    repair = llm_stub.requests[-1]["body"]["messages"][-1]["content"]
    assert "does not match the required JSON schema" in repair


def test_a_reply_is_done_only_when_its_outer_object_closes():
    from apps.core.llm.structured import json_object_closed

    assert not json_object_closed('{"memories": [{"action": "add"}')
    assert not json_object_closed("Sure! {not json} and then")
    assert json_object_closed('Sure! {not json} {"memories": [{"a": 1}]} and on and on')
    assert json_object_closed('{"memories": []}')


def test_nul_characters_in_a_reply_never_reach_the_parsed_text():
    """PostgreSQL refuses NUL in text: a model's stray NUL, raw or escaped, is dropped, while an
    escaped backslash followed by "u0000" stays the text it is."""
    reply = (
        '{"summary": "Bees\\u0000 in Turin\\u0000", "decisions": "Keep\x00 them",'
        ' "outcome": "a path C:\\\\u0000x", "lesson": "\\\\\\u0000ok"}'
    )
    parsed = structured.parse_reply(EpisodeSummary, reply)
    assert parsed.summary == "Bees in Turin"
    assert parsed.decisions == "Keep them"
    assert parsed.outcome == "a path C:\\u0000x"
    assert parsed.lesson == "\\ok"
    assert not any("\x00" in value for value in parsed.model_dump().values())


@pytest.mark.django_db
def test_a_memory_with_a_nul_in_the_models_reply_is_saved_without_it(user, llm_stub):
    from apps.memory.services import memory_node_create

    parsed = structured.parse_reply(
        EpisodeSummary,
        '{"summary": "Alice\\u0000 keeps bees", "decisions": "", "outcome": "", "lesson": ""}',
    )
    node = memory_node_create(owner=user, description=parsed.summary, source="admin")
    node.refresh_from_db()
    assert node.description == "Alice keeps bees"


def test_a_long_exchange_in_json_object_mode_is_fitted_with_its_schema_and_repair(
    llm_stub, fresh_modes, config
):
    # A 4,096-token llama.cpp without json_schema: the schema goes into the prompt, and the
    # repair re-sends prompt, reply and request; each must fit, or the server answers 400.
    from apps.cognition.schemas import stated_quotes_schema
    from apps.core.llm.fitting import bodies, template_prompt

    config(context_tokens=4096, background_max_tokens=512)
    llm_stub.set_defaults(
        server="llamacpp", context=4096, overflow="reject", response_formats=["json_object"]
    )
    llm_stub.script(
        {"content": "not json " * 400},
        {"json": {"message_1": []}},
    )
    said = "message_1: " + "I told you a long story about my life " * 1500
    prompt = template_prompt("extract", slots={"messages": bodies([said])})

    reflection = complete_as(stated_quotes_schema(1), role="reflection", prompt=prompt)

    assert reflection.message_1 == []
    requests = [r for r in llm_stub.requests if r["path"].endswith("/chat/completions")]
    # json_schema refused once (the ladder steps down), then the ask and its repair, both
    # answered: a refusal of their length would have raised TooLong.
    assert len(requests) == 3 and "response_format" in requests[0]["body"]
    first, repair = (r["body"] for r in requests[1:])
    assert first["response_format"] == {"type": "json_object"}
    assert "JSON schema" in first["messages"][-1]["content"]
    assert [m["role"] for m in repair["messages"]][-2:] == ["assistant", "user"]
    for body in (first, repair):
        # The stub counts a token a word and refuses a prompt of the window or more.
        assert sum(len(m["content"].split()) for m in body["messages"]) < 4096


class _Bounded(BaseModel):
    note: str = Field(max_length=40)
    ids: list[int] = Field(max_length=3)
    kind: Literal["a", "bb"]
    extra: str | None = Field(default=None, max_length=10)


class _Unbounded(BaseModel):
    note: str
    ids: list[int] = Field(max_length=3)


def test_a_bounded_schema_is_asked_for_no_more_tokens_than_its_longest_reply(llm_stub, fresh_modes):
    longest = structured.schema_max_tokens(_Bounded)
    reply = {"note": "n" * 40, "ids": [1234567, 2345678, 3456789], "kind": "bb", "extra": "e" * 10}
    llm_stub.script({"json": reply})

    assert complete_as(_Bounded, role="episode", prompt=ASK).ids == reply["ids"]

    sent = llm_stub.requests[-1]["body"]["max_tokens"]
    assert sent == longest < 1024
    # Counted high: the longest reply, at two characters a token, fits.
    assert len(json.dumps(reply, indent=2)) / 2 < longest


def test_an_unbounded_schema_keeps_the_roles_cap(llm_stub, fresh_modes):
    assert structured.schema_max_tokens(_Unbounded) is None
    llm_stub.script({"json": {"note": "fine", "ids": []}})

    complete_as(_Unbounded, role="episode", prompt=ASK)

    assert llm_stub.requests[-1]["body"]["max_tokens"] == 1024


def test_the_extraction_schema_is_sized_as_its_own_count_sizes_it():
    for messages in (1, 4):
        assert structured.schema_max_tokens(stated_quotes_schema(messages)) == pytest.approx(
            stated_quotes_max_tokens(messages), rel=0.05
        )
