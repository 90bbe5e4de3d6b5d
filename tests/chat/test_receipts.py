"""The memory receipt under an answer: counts, the memories, and their corrections."""

from __future__ import annotations

import asyncio
import re

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.layers import get_channel_layer

from apps.chat.broadcasts import conversation_group
from apps.chat.models import Conversation, Message
from apps.cognition.reflection import reflect_on_message
from apps.core.models import Event
from apps.memory import undo_services
from apps.memory.browser_services import memories_forget_all_recorded
from apps.memory.models import MemoryNode
from tests.cognition.conftest import reflection

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice_client(client, user):
    client.force_login(user)
    return client


def _node(owner, description: str, **fields) -> MemoryNode:
    return MemoryNode.objects.create(owner=owner, description=description, **fields)


def _answer(conversation, *, used=(), reflected=None, content="An answer.", said="Hi") -> Message:
    asked = Message.objects.create(conversation=conversation, role="user", content=said)
    trace = {"memory": {"memories": [{"id": node.pk, "score": 0.5} for node in used]}}
    if reflected is not None:
        trace["reflection"] = reflected
    return Message.objects.create(
        conversation=conversation,
        role="assistant",
        status="complete",
        content=content,
        reply_to=asked,
        trace=trace,
    )


@pytest.fixture
def conversation(user):
    return Conversation.objects.create(owner=user)


def test_the_receipt_counts_what_the_answer_used_and_what_it_taught(
    alice_client, user, other_user, conversation
):
    tea = _node(user, "The user likes tea", source="user")
    rome = _node(user, "The user lives in Rome", source="inferred")
    everyones = _node(None, "Water boils at 100 °C", source="imported")
    mallorys = _node(other_user, "Mallory's secret plan")
    learned = _node(user, "The user has a cat named Miso", source="user")
    _answer(
        conversation,
        used=[tea, rome, everyones, mallorys],
        reflected={"created": [learned.pk], "updated": [], "left": [tea.pk]},
    )

    page = alice_client.get(f"/c/{conversation.pk}/").content.decode()

    # It counts what it lists: the owner's two, the global one apart, never another user's.
    assert "used 2 memories · 1 shared fact · learned 1" in page
    assert "You like tea" in page and "You have a cat named Miso" in page
    assert "you said" in page and "my guess" in page
    receipt = page.split('class="receipt"')[1].split('class="trace ')[0]
    shared = receipt.split('class="receipt-memories receipt-shared"')[1]
    assert "Water boils" in shared and "<form" not in shared, "global knowledge is not corrected"
    assert receipt.count('class="receipt-memory"') == 4
    # The "What I used" panel names global knowledge the answer used; never another user's.
    assert "Water boils" in page and "Mallory" not in page


def test_the_receipt_waits_for_reflection_before_it_says_what_was_learnt(
    alice_client, user, conversation
):
    _answer(conversation, used=[_node(user, "The user likes tea")])
    page = alice_client.get(f"/c/{conversation.pk}/").content.decode()
    assert "used 1 memory</span>" in page and "learned" not in page.split("receipt-line")[1][:80]


def test_forget_confirm_and_wrong_work_without_javascript(alice_client, user, conversation):
    tea = _node(user, "The user likes tea")
    rome = _node(user, "The user lives in Rome")
    milan = _node(user, "The user lives in Milan")
    reply = _answer(conversation, used=[tea, rome, milan])
    base = f"/c/{conversation.pk}/memories"

    confirmed = alice_client.post(f"{base}/{tea.pk}/confirm", {"message_id": reply.pk})
    wrong = alice_client.post(f"{base}/{milan.pk}/wrong", {"message_id": reply.pk})
    forgot = alice_client.post(f"{base}/{rome.pk}/forget", {"message_id": reply.pk})

    assert confirmed.status_code == wrong.status_code == forgot.status_code == 302
    assert forgot["Location"] == f"/c/{conversation.pk}/#msg-{reply.pk}"
    tea.refresh_from_db()
    milan.refresh_from_db()
    rome.refresh_from_db()
    assert tea.confidence_score == 2 and milan.valid_to is not None
    assert rome.valid_to is not None, "hidden at once, deleted when its Undo has passed"
    actions = [event.payload.get("action") for event in Event.objects.filter(owner=user)]
    assert {"confirm", "wrong", "forget_pending"} <= set(actions), "the browser's own services"
    page = alice_client.get(f"/c/{conversation.pk}/").content.decode()
    receipt = page.split(f'id="receipt-{reply.pk}"')[1].split("</details>")[0]
    assert "You live in Rome" not in receipt and "You live in Milan" not in receipt
    # The last correction's notice follows the redirect, its Undo and "forget now" as forms.
    notice = page.split('id="memory-undo"')[1].split("</div>")[0]
    undo = f"/c/{conversation.pk}/memories/{rome.pk}/forget/undo?message_id={reply.pk}"
    assert "Forgotten" in notice and f'action="{undo}"' in notice
    assert f'action="/memory/{rome.pk}/forget/now"' in notice

    undone = alice_client.post(undo)

    assert undone["Location"] == f"/c/{conversation.pk}/#msg-{reply.pk}"
    page = alice_client.get(f"/c/{conversation.pk}/").content.decode()
    assert "You live in Rome" in page.split(f'id="receipt-{reply.pk}"')[1]
    assert "<strong>Kept</strong>" in page


def test_with_htmx_the_action_answers_with_the_open_receipt(alice_client, user, conversation):
    tea = _node(user, "The user likes tea")
    reply = _answer(conversation, used=[tea])
    response = alice_client.post(
        f"/c/{conversation.pk}/memories/{tea.pk}/forget",
        {"message_id": reply.pk},
        HTTP_HX_REQUEST="true",
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert html.lstrip().startswith(f'<details id="receipt-{reply.pk}" class="receipt" open>')
    receipt, notice = html.split('id="memory-undo"')
    assert "You like tea" not in receipt
    assert "used 0 memories" in receipt, "a forgotten memory leaves no trace behind"
    assert 'hx-swap-oob="true"' in notice and 'data-seconds="10"' in notice
    assert "<strong>Forgotten</strong>" in notice and "You like tea" in notice


@pytest.mark.parametrize(("action", "said"), [("wrong", "Back in use"), ("forget", "Kept")])
def test_undo_from_the_receipt_lists_the_memory_again(
    alice_client, user, conversation, action, said
):
    tea = _node(user, "The user likes tea")
    reply = _answer(conversation, used=[tea])
    base = f"/c/{conversation.pk}/memories/{tea.pk}/{action}"
    alice_client.post(base, {"message_id": reply.pk}, HTTP_HX_REQUEST="true")

    response = alice_client.post(f"{base}/undo?message_id={reply.pk}", HTTP_HX_REQUEST="true")

    html = response.content.decode()
    # The notice's form swaps nothing: the receipt comes out of band, listing the memory again.
    assert re.match(rf'\s*<details id="receipt-{reply.pk}" [^>]*hx-swap-oob="true"', html)
    assert "used 1 memory" in html and "You like tea" in html.split('id="memory-undo"')[0]
    assert f"<strong>{said}</strong>" in html
    tea.refresh_from_db()
    assert tea.valid_to is None
    if action == "forget":
        # Its pending forgetting is gone with the Undo: the task that comes later keeps it.
        assert undo_services.memory_node_forget_now(node_id=tea.pk) is None
        assert MemoryNode.objects.filter(pk=tea.pk).exists()


def test_a_receipts_forget_left_to_run_out_is_forgotten_for_good(alice_client, user, conversation):
    tea = _node(user, "The user likes tea")
    reply = _answer(conversation, used=[tea])
    alice_client.post(
        f"/c/{conversation.pk}/memories/{tea.pk}/forget",
        {"message_id": reply.pk},
        HTTP_HX_REQUEST="true",
    )

    finished = alice_client.post(f"/memory/{tea.pk}/forget/now", HTTP_HX_REQUEST="true")

    assert "Forgot 1 memory" in finished.content.decode()
    assert not MemoryNode.objects.filter(pk=tea.pk).exists()
    late = alice_client.post(
        f"/c/{conversation.pk}/memories/{tea.pk}/forget/undo?message_id={reply.pk}",
        HTTP_HX_REQUEST="true",
    )
    assert late.status_code == 404, "nothing is left to take back"


def test_another_users_memory_or_conversation_is_a_404(
    alice_client, user, other_user, conversation
):
    mine = _node(user, "The user likes tea")
    mallorys = _node(other_user, "Mallory's secret plan")
    reply = _answer(conversation, used=[mine])
    theirs = Conversation.objects.create(owner=other_user)
    their_reply = _answer(theirs, used=[mallorys])

    for url, message_id in [
        (f"/c/{conversation.pk}/memories/{mallorys.pk}/forget", reply.pk),
        (f"/c/{conversation.pk}/memories/{mallorys.pk}/confirm", reply.pk),
        (f"/c/{conversation.pk}/memories/{mallorys.pk}/wrong", reply.pk),
        (f"/c/{theirs.pk}/memories/{mine.pk}/forget", their_reply.pk),
        (f"/c/{conversation.pk}/memories/{mine.pk}/forget", their_reply.pk),
        (f"/c/{conversation.pk}/memories/{mallorys.pk}/wrong/undo", reply.pk),
        (f"/c/{conversation.pk}/memories/{mallorys.pk}/forget/undo", reply.pk),
        (f"/c/{theirs.pk}/memories/{mine.pk}/forget/undo", their_reply.pk),
    ]:
        assert alice_client.post(url, {"message_id": message_id}).status_code == 404, url
    assert MemoryNode.objects.filter(pk__in=[mine.pk, mallorys.pk]).count() == 2
    assert alice_client.get(f"/c/{conversation.pk}/memories/{mine.pk}/forget").status_code == 405


def test_the_conversation_page_reads_every_receipt_in_one_query(
    alice_client, user, conversation, django_assert_max_num_queries
):
    nodes = [_node(user, f"Memory number {i}") for i in range(20)]
    for i in range(15):
        _answer(conversation, used=nodes[i : i + 3], reflected={"created": [nodes[i].pk]})
    alice_client.get(f"/c/{conversation.pk}/")  # warm caches (runtime config, session)
    with django_assert_max_num_queries(12):
        page = alice_client.get(f"/c/{conversation.pk}/").content.decode()
    assert page.count('class="receipt"') == 15 and "Memory number 16" in page


def test_a_finished_reflection_pushes_the_receipt_to_the_open_conversation(
    user, conversation, llm_stub, config, django_capture_on_commit_callbacks
):
    config(critic_enabled=False)
    reply = _answer(conversation, content="Welcome to Rome!", said="I moved to Rome last week")
    llm_stub.script(reflection("I moved to Rome last week"))

    def reflect() -> None:
        with django_capture_on_commit_callbacks(execute=True):
            reflect_on_message(message_id=reply.pk)

    async def pushed() -> str:
        layer = get_channel_layer()
        channel = await layer.new_channel()
        await layer.group_add(conversation_group(conversation.pk), channel)
        await sync_to_async(reflect)()
        html = ""
        while f'id="receipt-{reply.pk}-summary"' not in html:
            html = (await asyncio.wait_for(layer.receive(channel), timeout=5))["html"]
        return html

    html = async_to_sync(pushed)()
    assert "learned 1" in html and "You moved to Rome last week" in html
    assert "<details" not in html, "an open receipt stays open"


def test_a_pushed_answers_panel_is_read_when_opened_and_only_by_its_owner(
    alice_client, user, other_user, conversation
):
    from apps.chat.broadcasts import render_message

    tea = _node(user, "The user likes tea")
    everyones = _node(None, "Water boils at 100 °C")
    mallorys = _node(other_user, "Mallory's secret plan")
    reply = _answer(conversation, used=[tea, everyones, mallorys])
    url = f"/c/{conversation.pk}/messages/{reply.pk}/used"

    # Pushed to every open page: the panel is there, empty, and says where to read it.
    pushed = render_message(reply)
    assert "What I used" in pushed and f'hx-get="{url}"' in pushed
    assert "Water boils" not in pushed.split('class="trace ')[1]
    # Its receipt names the global memory as a shared fact.
    assert "used 1 memory · 1 shared fact" in pushed
    # Opened: the panel names the owner's and global memories, never another user's.
    panel = alice_client.get(url, HTTP_HX_REQUEST="true")
    html = panel.content.decode()
    assert panel.status_code == 200 and html.strip().startswith('<div class="trace-used">')
    assert "You like tea" in html and "Water boils" in html and "Mallory" not in html
    # Without htmx: the conversation, where every panel is drawn.
    assert alice_client.get(url)["Location"] == f"/c/{conversation.pk}/#msg-{reply.pk}"
    # Someone else's answer, a question, or an answer named under another conversation: 404.
    theirs = Conversation.objects.create(owner=other_user)
    their_reply = _answer(theirs, used=[mallorys])
    for other in (
        f"/c/{theirs.pk}/messages/{their_reply.pk}/used",
        f"/c/{conversation.pk}/messages/{their_reply.pk}/used",
        f"/c/{conversation.pk}/messages/{reply.reply_to_id}/used",
    ):
        assert alice_client.get(other, HTTP_HX_REQUEST="true").status_code == 404, other


def _status_line(page: str, reply: Message) -> dict[str, str]:
    """Each part's text on the reply's status line, by subsystem."""
    line = page.split(f'id="msg-{reply.pk}-turn"')[1].split("</p>")[0]
    found = re.findall(r'data-subsystem="(\w+)"><span class="turn-name">[^<]*</span> ([^<]*)', line)
    return dict(found)


def test_global_knowledge_is_shown_as_shared_facts_and_counted_alike_on_the_status_line(
    alice_client, user, conversation
):
    from apps.memory import graph_services

    water = graph_services.triple_upsert(
        owner=None, subject="water", predicate="boils_at", object="100 °C"
    )
    rome = graph_services.triple_upsert(
        owner=None, subject="Rome", predicate="is_capital_of", object="Italy"
    )
    reply = _answer(conversation)
    reply.model = "demo"
    reply.trace["memory"]["triples"] = [
        {"id": triple.pk, "category": "knowledge", "global": True} for triple in (water, rome)
    ]
    reply.trace["spans"] = [{"name": "recall", "ms": 12}]
    reply.trace["answered_by"] = {"model": "demo", "fallback_from": ["qwen2.5:7b"]}
    reply.save()

    page = alice_client.get(f"/c/{conversation.pk}/").content.decode()

    # A new user's first answer: no memory of theirs, two facts everyone shares.
    assert "used 0 memories · 2 shared facts</span>" in page
    shared = page.split('class="receipt-memories receipt-shared"')[1].split("</ul>")[0]
    assert shared.count("<li") == 2 and "Italy" in shared
    line = _status_line(page, reply)
    assert line["retrieval"].startswith("0 memories, 2 shared facts")
    assert line["llm"] == "demo", "the model that answered, not the configured one"
    assert line["reflection"] == "queued"


@pytest.mark.parametrize("where", ["memory off", "temporary chat"])
def test_where_nothing_is_learned_the_receipt_and_the_status_line_say_so(alice_client, user, where):
    conversation = Conversation.objects.create(owner=user, temporary=where == "temporary chat")
    reply = _answer(conversation)
    reply.trace["spans"] = [{"name": "recall", "ms": 3}]
    reply.trace["memory"]["off"] = where == "memory off"
    reply.save()

    page = alice_client.get(f"/c/{conversation.pk}/").content.decode()

    assert "used 0 memories · nothing is learned here</span>" in page
    assert _status_line(page, reply)["reflection"] == "nothing is learned here"
    assert "reflection queued" not in page


@pytest.fixture
def proposed(user, conversation, llm_stub, config):
    """An answer to "I live in Ghent", which only the rules read, while Gent is known."""
    config(critic_enabled=False)
    gent = MemoryNode.objects.create(
        owner=user,
        description="The user lives in Gent",
        fact_key="home_city",
        source="user",
        quote="I live in Gent",
    )
    reply = _answer(conversation, content="Noted.", said="I live in Ghent")
    llm_stub.script(reflection())  # the model quotes nothing
    reflect_on_message(message_id=reply.pk)
    return gent, reply


def test_the_receipt_asks_before_a_new_value_found_once_replaces_a_fact(
    alice_client, user, conversation, proposed
):
    gent, reply = proposed
    page = alice_client.get(f"/c/{conversation.pk}/").content.decode()
    receipt = page.split(f'id="receipt-{reply.pk}"')[1].split("</details>")[0]
    assert "1 to confirm" in receipt
    assert (
        "You said “I live in Ghent”; I know: You live in Gent. Update to “You live in Ghent”?"
    ) in receipt

    response = alice_client.post(
        f"/c/{conversation.pk}/proposals/0/confirm",
        {"message_id": reply.pk},
        HTTP_HX_REQUEST="true",
    )

    html = response.content.decode()
    assert response.status_code == 200
    assert html.lstrip().startswith(f'<details id="receipt-{reply.pk}" class="receipt" open>')
    assert "to confirm" not in html and "Changes to confirm" not in html
    learned = html.split("Learned from this exchange")[1]
    assert "You live in Ghent" in learned and "found by rules" in learned
    gent.refresh_from_db()
    assert gent.description == "The user lives in Ghent" and gent.valid_to is None
    assert MemoryNode.objects.get(owner=user, valid_to__isnull=False).description == (
        "The user lives in Gent"
    )


def test_the_update_works_without_javascript_and_only_once(
    alice_client, user, conversation, proposed
):
    gent, reply = proposed
    url = f"/c/{conversation.pk}/proposals/0/confirm"

    response = alice_client.post(url, {"message_id": reply.pk})
    again = alice_client.post(url, {"message_id": reply.pk})

    assert response.status_code == again.status_code == 302
    assert response["Location"] == f"/c/{conversation.pk}/#msg-{reply.pk}"
    assert MemoryNode.objects.filter(owner=user, fact_key="home_city").count() == 2
    assert Event.objects.filter(owner=user, payload__action="proposal_confirm").count() == 1
    beyond = f"/c/{conversation.pk}/proposals/7/confirm"
    assert alice_client.post(beyond, {"message_id": reply.pk}).status_code == 302
    gent.refresh_from_db()
    assert gent.description == "The user lives in Ghent"


def test_another_users_proposal_is_a_404(client, other_user, conversation, proposed):
    gent, reply = proposed
    client.force_login(other_user)
    theirs = Conversation.objects.create(owner=other_user)

    for pk in (conversation.pk, theirs.pk):
        response = client.post(f"/c/{pk}/proposals/0/confirm", {"message_id": reply.pk})
        assert response.status_code == 404
    assert client.get(f"/c/{conversation.pk}/proposals/0/confirm").status_code == 405
    gent.refresh_from_db()
    assert gent.description == "The user lives in Gent"


def test_forgetting_everything_forgets_the_proposals_too(user, proposed):
    _, reply = proposed
    memories_forget_all_recorded(owner=user)

    assert Message.objects.get(pk=reply.pk).trace["reflection"]["proposed"] == []
