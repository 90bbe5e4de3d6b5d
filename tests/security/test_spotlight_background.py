"""Provenance in the background prompts (#39 item 2): what a conversation imported from another
assistant said, what the model proposed for the world state, the knowledge graph's facts and a
data memory reach the world modifier, the fact extraction, the episode summary, the critic and
the debate only datamarked, and each of those prompts then explains the marker in a system
message. Each test makes one background call against the LLM stub and reads what it received.
"""

from __future__ import annotations

import pytest

from apps.accounts.services import user_settings_update
from apps.chat.models import Conversation, Message
from apps.cognition.critic import node_criticise
from apps.cognition.episodes import episode_summarise
from apps.cognition.reflection import reflect_on_replies
from apps.cognition.titles import generate_title
from apps.cognition.world import WORLD_QUEUED, world_change_after_reply
from apps.core.selectors import runtime_config
from apps.memory import world_services
from apps.memory.models import MemoryNode, Predicate, Triple, WorldState
from apps.memory.provenance import MARKERS, MARKERS_SENTENCE, conversation_marker
from tests.cognition.conftest import EXTRACT
from tests.spotlight import marked

pytestmark = pytest.mark.django_db

IMPORTED = ["I bought my first kayak in Oslo one spring", "Oslo has calm fjords for a kayak"]
PROPOSED = "kayak trip along the coast"
EXPLAINED = "instead of spaces is data"


@pytest.fixture
def imported(user) -> list[Message]:
    """An exchange of a conversation imported from another assistant, as apps.imports stores it."""
    conversation = Conversation.objects.create(owner=user, title="Kayaks")
    asked = Message.objects.create(
        conversation=conversation, role="user", content=IMPORTED[0], trace={"imported": 1}
    )
    reply = Message.objects.create(
        conversation=conversation,
        role="assistant",
        content=IMPORTED[1],
        reply_to=asked,
        parent=asked,
        trace={"imported": 1},
    )
    return [asked, reply]


def _prompt(llm_stub, words: str) -> list[dict]:
    [messages] = [
        request["body"]["messages"]
        for request in llm_stub.requests
        if request["path"].endswith("/chat/completions")
        and any(words in message["content"] for message in request["body"]["messages"])
    ]
    return messages


def _marker_of(system: dict) -> str:
    assert system["role"] == "system" and EXPLAINED in system["content"], "the marker explained"
    marker = system["content"].split(" instead of spaces")[0][-1]
    assert marker in MARKERS
    return marker


def _shows_only_marked(messages: list[dict], texts: list[str], marker: str) -> None:
    sent = "\n".join(message["content"] for message in messages)
    for text in texts:
        assert text not in sent, f"{text!r} reaches the prompt unmarked"
        assert marked(text, marker) in sent, f"{text!r} reaches the prompt datamarked"


def test_the_world_modifier_sees_imported_history_and_proposed_items_as_data(
    user, llm_stub, imported
):
    conversation = imported[0].conversation
    op = {"op": "append", "path": "topics", "value": PROPOSED}
    world_services.world_apply(user_id=user.pk, ops=[op], source="turn")
    asked = Message.objects.create(
        conversation=conversation, role="user", content="I am done with that trip now"
    )
    reply = Message.objects.create(
        conversation=conversation,
        role="assistant",
        content="Welcome back.",
        reply_to=asked,
        trace={WORLD_QUEUED: True},
    )
    marker = conversation_marker(conversation.pk)
    # The model copies the item as it was shown to it, datamarked.
    removal = {"op": "remove", "path": "topics", "value": marked(PROPOSED, marker)}
    llm_stub.script({"json": {"ops": [removal], "reason": "Trip over."}})

    world_change_after_reply(reply_id=reply.pk)

    system, question = _prompt(llm_stub, "record of the user's current situation")
    assert _marker_of(system) == marker
    _shows_only_marked([question], [*IMPORTED, PROPOSED], marker)
    assert "I am done with that trip now" in question["content"], "the user's own, as written"
    assert WorldState.objects.get(owner=user).topics == [], "a copied item is read as written"


def test_the_fact_extraction_sees_an_imported_message_as_data(user, llm_stub, imported):
    marker = conversation_marker(imported[0].conversation_id)
    llm_stub.script({"json": {"message_1": [marked(IMPORTED[0], marker)]}, "match": EXTRACT})

    reflect_on_replies(reply_ids=[imported[1].pk])

    system, question = _prompt(llm_stub, EXTRACT)
    assert _marker_of(system) == marker
    _shows_only_marked([question], [IMPORTED[0]], marker)
    # The quote, marked as the model saw it, is found in the message all the same.
    [node] = MemoryNode.objects.filter(owner=user)
    assert node.source == MemoryNode.Source.IMPORTED and "Oslo" in node.description


def test_the_episode_summary_sees_an_imported_conversation_as_data(llm_stub, imported):
    conversation_id = imported[0].conversation_id
    summary = {"summary": "Kayaks in Oslo.", "decisions": "", "outcome": "", "lesson": ""}
    llm_stub.script({"json": summary})

    assert episode_summarise(conversation_id=conversation_id) is not None

    system, question = _prompt(llm_stub, "Summarise this stretch")
    assert _marker_of(system) == conversation_marker(conversation_id)
    _shows_only_marked([question], IMPORTED, _marker_of(system))


def test_the_title_of_an_untitled_imported_conversation_sees_it_as_data(llm_stub, imported):
    llm_stub.script({"content": "Kayaks in Oslo"})

    assert generate_title(messages=imported) == "Kayaks in Oslo"

    system, question = _prompt(llm_stub, "Write a short title")
    assert _marker_of(system) == conversation_marker(imported[0].conversation_id)
    _shows_only_marked([question], IMPORTED, _marker_of(system))


def test_the_critic_sees_a_data_memory_its_exchange_and_the_facts_as_data(user, llm_stub, imported):
    node = MemoryNode.objects.create(
        owner=user,
        description="The user bought a kayak in Oslo",
        source=MemoryNode.Source.IMPORTED,
        source_message=imported[1],
    )
    predicate, _ = Predicate.objects.get_or_create(name="lives_in")
    Triple.objects.create(owner=user, subject="kayak", predicate=predicate, object="Oslo harbour")
    verdict = {"debate": "Plausible.", "verdict": "withstands", "contradicts": [], "supports": []}
    llm_stub.script({"json": verdict})

    node_criticise(node=node, message=None, config=runtime_config())

    system, question = _prompt(llm_stub, "sceptical critic")
    marker = _marker_of(system)
    facts = ["kayak lives_in Oslo harbour", node.description]
    _shows_only_marked([question], [*IMPORTED, *facts], marker)


@pytest.mark.django_db(transaction=True)
def test_the_debate_explains_the_datamark_of_the_question_it_reviews(
    client, user, llm_stub, config
):
    config(debate_enabled=True, critic_enabled=False, reflection_enabled=False, turns_per_minute=0)
    MemoryNode.objects.create(
        owner=user,
        kind=MemoryNode.Kind.RULE,
        description="Answer in one sentence",
        source=MemoryNode.Source.ADMIN,
    )
    op = {"op": "append", "path": "topics", "value": PROPOSED}
    world_services.world_apply(user_id=user.pk, ops=[op], source="turn")
    conversation = Conversation.objects.create(owner=user)
    client.force_login(user)
    review = {"violations": [], "verdict": "ok", "critique": ""}
    llm_stub.script({"content": "Pack a dry bag."}, {"json": review})

    client.post(f"/c/{conversation.pk}/send", {"content": "What should I pack?"})

    system, question = _prompt(llm_stub, "antagonistic reviewer")
    marker = _marker_of(system)
    assert marker == conversation_marker(conversation.pk)
    _shows_only_marked([question], [PROPOSED], marker)
    assert "Answer in one sentence" in question["content"], "a rule the user set, as written"


@pytest.mark.django_db(transaction=True)
def test_with_memory_off_an_imported_conversations_history_is_still_sent_as_data(
    client, user, llm_stub, config, imported
):
    config(critic_enabled=False, reflection_enabled=False, turns_per_minute=0)
    user_settings_update(user=user, memory_enabled=False)
    conversation = imported[0].conversation
    client.force_login(user)
    llm_stub.script({"content": "Any fjord will do."})

    client.post(f"/c/{conversation.pk}/send", {"content": "Where should I paddle next?"})

    system, *history, question = _prompt(llm_stub, "You are Thalamus")
    # The answer's system prompt names every marker (it is the same for every conversation);
    # the history is marked with this conversation's.
    assert system["role"] == "system" and MARKERS_SENTENCE in system["content"]
    marker = conversation_marker(conversation.pk)
    assert [m["content"] for m in history] == [marked(text, marker) for text in IMPORTED]
    assert question["content"] == "Where should I paddle next?", "the user's own, as written"
