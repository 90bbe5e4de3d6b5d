"""Hostile output in Chromium: what a model says, or a memory holds, shows as text, does nothing.

Every payload of the corpus (tests/security/payloads.py) sits between two plain words,
`before0042` and `after0042`, which must both stay on screen. Nothing may run (alert, confirm,
prompt and print are hooked, dialogs are watched, and our own payloads set `window.__pwned`),
nothing may be fetched from another origin, and htmx must find nothing to process in it.
"""

from __future__ import annotations

import threading
from urllib.parse import urlsplit

import pytest

from apps.chat.models import Conversation, Message
from apps.core.models import Event
from apps.core.services import event_record
from apps.memory import services as memory_services
from tests.security.payloads import Payload, batches, hostile_payloads, reply_of

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PAYLOADS = hostile_payloads()

# The page's Content-Security-Policy would block an inline script or a foreign image anyway: a
# violation report means something got past the renderer and only CSP stopped it.
HOOKS = """
window.__ran = [];
['alert', 'confirm', 'prompt', 'print'].forEach(function (name) {
  window[name] = function () { window.__ran.push(name); };
});
window.__blocked = [];
document.addEventListener('securitypolicyviolation', function (e) {
  window.__blocked.push(e.effectiveDirective + ' ' + e.blockedURI);
});
"""

# Elements carrying an htmx attribute, or that htmx has processed, inside `selector`.
JS_LIVE_HTMX = """
selector => {
  let live = 0;
  document.querySelectorAll(selector).forEach(root => {
    root.querySelectorAll('*').forEach(el => {
      const data = el['htmx-internal-data'];
      const attr = Array.from(el.attributes).some(a => /^(data-)?(hx|ws|sse)-/i.test(a.name));
      if (attr || (data && data.initHash)) live += 1;
    });
  });
  return live;
}
"""

# Elements that only raw HTML could have made, inside `selector` (a Markdown image of a path on
# this server is allowed: it is an image of ours).
RAW_TAGS = (
    "script, iframe, frame, object, embed, img:not([src^='/']), img[src^='//'],"
    " svg:not(.katex svg), form, input, style, link,"
    " meta, base, video, audio, details, textarea, select, template, marquee,"
    " button:not(.copy-btn)"
)
JS_RAW_ELEMENTS = f"""
selector => document.querySelectorAll(
  selector.split(',').map(s => `${{s}} :is({RAW_TAGS})`).join(',')
).length
"""


class Watch:
    """What a page did besides showing text: ran code, or asked another origin for anything."""

    def __init__(self, page, origin: str):
        self.page = page
        self.host = urlsplit(origin).netloc
        self.dialogs: list[str] = []
        self.foreign: list[str] = []
        page.add_init_script(HOOKS)
        page.on("dialog", self._dialog)
        page.on("request", self._request)
        page.on("websocket", lambda ws: self._url(ws.url))

    def _dialog(self, dialog) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()

    def _request(self, request) -> None:
        self._url(request.url)

    def _url(self, url: str) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https", "ws", "wss") or parts.netloc != self.host:
            self.foreign.append(url)

    def executed(self) -> list[str]:
        ran = self.page.evaluate("window.__ran.concat(window.__pwned ? ['__pwned'] : [])")
        return ran + self.dialogs

    def blocked_by_csp(self) -> list[str]:
        """What only the CSP stopped (inline styles aside: KaTeX and the admin use them)."""
        blocked = self.page.evaluate("window.__blocked")
        return [entry for entry in blocked if not entry.startswith("style-src")]

    def live_htmx(self, selector: str) -> int:
        return self.page.evaluate(JS_LIVE_HTMX, selector)

    def raw_elements(self, selector: str) -> int:
        return self.page.evaluate(JS_RAW_ELEMENTS, selector)

    def text(self, selector: str) -> str:
        """What a person sees in every element matching `selector`."""
        return self.page.eval_on_selector_all(
            selector, "els => els.map(e => e.innerText).join('\\n')"
        )


def _lost_words(text: str, payloads: list[Payload]) -> list[str]:
    return [word for p in payloads for word in (p.before, p.after) if word not in text]


def _assert_clean(watch: Watch, selector: str, payloads: list[Payload]) -> None:
    text = watch.text(selector)
    assert watch.executed() == []
    assert watch.foreign == []
    assert watch.blocked_by_csp() == []
    assert watch.live_htmx(selector) == 0
    assert watch.raw_elements(selector) == 0
    assert _lost_words(text, payloads) == []


def test_the_corpus_holds_over_a_thousand_payloads_of_every_family():
    families = {p.family for p in PAYLOADS}
    assert len(PAYLOADS) >= 1000
    assert families == {"blns", "filter-evasion", "raw-html", "htmx", "markdown-link", "katex"}


def test_saved_hostile_replies_run_nothing_load_nothing_and_lose_no_word(
    page, asgi_server, log_in, user
):
    conversation = Conversation.objects.create(owner=user, title="hostile")
    for number, batch in enumerate(batches(PAYLOADS, 50)):
        Message.objects.create(conversation=conversation, role="user", content=f"batch {number}")
        Message.objects.create(
            conversation=conversation, role="assistant", content=reply_of(batch), status="complete"
        )
    watch = Watch(page, asgi_server)
    log_in("alice")
    page.goto(f"{asgi_server}/c/{conversation.pk}/")
    page.wait_for_function(
        "() => Array.from(document.querySelectorAll('.msg-assistant .md-out'))"
        ".every(out => out.querySelector('p'))"
    )
    page.wait_for_timeout(300)

    _assert_clean(watch, ".msg-assistant .md-out", PAYLOADS)
    shown = watch.text(".msg-assistant .md-out")
    assert "<details><summary>Details</summary>" in shown, "raw HTML is shown as text"
    assert "<script>window.__pwned=1</script>" in shown


def test_streamed_hostile_replies_run_nothing_load_nothing_and_lose_no_word(
    page, asgi_server, log_in, user, llm_stub, config
):
    config(turns_per_minute=0, answer_max_tokens=4000)
    stream = batches(PAYLOADS, 200)
    llm_stub.script(
        *[
            {"content": reply_of(batch), "tps": 3000, "match": f"stream batch {number:02d}"}
            for number, batch in enumerate(stream)
        ]
    )
    watch = Watch(page, asgi_server)
    log_in("alice")
    page.click("text=+ New conversation")
    page.wait_for_selector(".chat[data-live='on']", state="attached")
    for number in range(len(stream)):
        page.wait_for_selector("#composer textarea:not([disabled])")
        page.fill("#composer textarea", f"stream batch {number:02d}")
        page.keyboard.press("Enter")
        page.locator(".msg-assistant.complete").nth(number).wait_for()
    page.wait_for_selector("#composer textarea:not([disabled])")
    page.wait_for_timeout(300)

    replies = list(Message.objects.filter(role="assistant").order_by("pk"))
    assert [reply.content for reply in replies] == [reply_of(batch) for batch in stream]
    _assert_clean(watch, ".msg-assistant .md-out", PAYLOADS)


def test_a_reply_with_nul_bytes_is_saved_and_shown_without_them(
    page, asgi_server, log_in, user, llm_stub
):
    llm_stub.script({"content": "one\x00two, then <details> and more words", "match": "nul"})
    log_in("alice")
    page.click("text=+ New conversation")
    page.wait_for_selector(".chat[data-live='on']", state="attached")
    page.fill("#composer textarea", "send a nul")
    page.keyboard.press("Enter")
    page.wait_for_selector(".msg-assistant.complete")

    reply = Message.objects.get(role="assistant")
    assert reply.content == "onetwo, then <details> and more words"
    assert page.inner_text(".msg-assistant .md-out") == "onetwo, then <details> and more words"


@pytest.fixture
def hostile_memories(user, page):
    """One memory per batch of 50 payloads, and a dashboard event quoting each."""
    nodes = []

    def create():
        for batch in batches(PAYLOADS, 50):
            text = reply_of(batch)
            node = memory_services.memory_node_create(
                owner=user, description=text, embed=False, source="admin"
            )
            nodes.append(node)
            event_record(
                kind=Event.Kind.PERCEPTION,
                summary="remembered",
                owner=user,
                payload={"memory": text},
            )

    # Outside Playwright's event loop: the on-commit pushes use async_to_sync.
    thread = threading.Thread(target=create)
    thread.start()
    thread.join(60)
    assert len(nodes) == len(batches(PAYLOADS, 50))
    return nodes


def test_hostile_memories_in_the_memory_browser_run_nothing_and_lose_no_word(
    page, asgi_server, log_in, hostile_memories
):
    watch = Watch(page, asgi_server)
    log_in("alice")
    page.goto(f"{asgi_server}/memory/")
    assert page.locator(".memory-row").count() == len(hostile_memories)

    _assert_clean(watch, ".memory-text", PAYLOADS)


def test_hostile_memories_on_the_dashboard_run_nothing_and_lose_no_word(
    page, asgi_server, log_in, hostile_memories
):
    watch = Watch(page, asgi_server)
    log_in("alice")
    page.goto(f"{asgi_server}/dashboard/")
    page.locator("#live-status.on").wait_for()
    page.locator(f"#graph-status[data-nodes='{len(hostile_memories)}']").wait_for()
    page.evaluate("document.querySelectorAll('#mind-stream details').forEach(d => d.open = true)")
    _assert_clean(watch, "#mind-stream dd", PAYLOADS)

    # Each memory as the node card a click on the graph opens.
    for node, batch in zip(hostile_memories, batches(PAYLOADS, 50), strict=True):
        page.evaluate(
            "url => htmx.ajax('GET', url, {target: '#node-detail', swap: 'innerHTML'})",
            f"/dashboard/node/{node.pk}/",
        )
        page.locator(f"#node-card-{node.pk}").wait_for()
        _assert_clean(watch, "#node-detail .node-text", batch)


def test_hostile_memories_in_the_admin_list_run_nothing(
    page, asgi_server, log_in, hostile_memories, django_user_model
):
    django_user_model.objects.create_superuser("root", "root@example.com", "pw-root-9")
    watch = Watch(page, asgi_server)
    log_in("root")
    page.goto(f"{asgi_server}/admin/memory/memorynode/")
    rows = page.locator("#result_list tbody tr")
    assert rows.count() == len(hostile_memories)

    # The list shows each memory's first 120 characters: the word before its first payload.
    firsts = [batch[0] for batch in batches(PAYLOADS, 50)]
    cells = "#result_list .field-short_description"
    text = watch.text(cells)
    assert watch.executed() == []
    assert watch.foreign == []
    assert watch.blocked_by_csp() == []
    assert watch.live_htmx(cells) == 0
    assert watch.raw_elements(cells) == 0
    assert [p.before for p in firsts if p.before not in text] == []
