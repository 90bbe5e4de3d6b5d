"""LLM metrics: counted per role and model in every process, read at /metrics and in the admin."""

from __future__ import annotations

import time
import uuid

import openai
import pytest
from django.urls import reverse
from prometheus_client.parser import text_string_to_metric_families

from apps.accounts.services import api_key_create
from apps.chat.models import Conversation, Message
from apps.cognition.reflection import reflect_on_message
from apps.core.llm.gateway import complete
from apps.core.llm.limits import TITLE, role_endpoint
from apps.core.llm.outcomes import Unreachable
from apps.core.metrics import histogram_quantile, record_llm_call
from tests.cognition.conftest import reflection

TOKEN = "scrape-me-" + "x" * 24


def _scrape(client, **headers) -> dict[tuple, float]:
    response = client.get("/metrics", **headers)
    assert response.status_code == 200, response.content
    return {
        (sample.name, *sorted(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(response.content.decode())
        for sample in family.samples
    }


def _value(scraped: dict, name: str, **labels) -> float:
    return scraped.get((name, *sorted(labels.items())), 0.0)


@pytest.fixture
def scrape(client, settings):
    settings.THALAMUS_METRICS_TOKEN = TOKEN
    return lambda: _scrape(client, HTTP_AUTHORIZATION=f"Bearer {TOKEN}")


@pytest.fixture
def api_client(asgi_server):
    def make(user) -> openai.OpenAI:
        _, secret = api_key_create(user=user, name="metrics")
        return openai.OpenAI(
            base_url=f"{asgi_server}/v1", api_key=secret, max_retries=0, timeout=20
        )

    return make


def _wait_for(condition, timeout: float = 45.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := condition():
            return value
        time.sleep(0.1)
    raise AssertionError("the condition did not come true in time")


@pytest.mark.django_db(transaction=True)
def test_an_answer_in_the_web_process_and_a_title_in_the_worker_are_counted_at_metrics(
    api_client, celery_worker, user, llm_stub, scrape, config
):
    config(reflection_quiet_seconds=1)  # the title waits for a quiet conversation (20 s shipped)
    before = scrape()
    llm_stub.script({"content": "Hello there, Alice.", "ttft": 0.3})

    # The answer runs in the uvicorn child; its title, queued by it, in this process's worker.
    api_client(user).chat.completions.create(
        model="thalamus", messages=[{"role": "user", "content": "Hi, I am Alice"}]
    )
    conversation = _wait_for(lambda: Conversation.objects.exclude(title="").first())
    reply = conversation.messages.get(role="assistant", status=Message.Status.COMPLETE)
    title_model = role_endpoint(TITLE).model
    after = _wait_for(
        lambda: (
            scraped
            if _value(
                scraped := scrape(),
                "thalamus_llm_requests_total",
                role="title",
                model=title_model,
                outcome="ok",
            )
            > _value(
                before,
                "thalamus_llm_requests_total",
                role="title",
                model=title_model,
                outcome="ok",
            )
            else None
        )
    )

    def grew(name: str, **labels) -> float:
        return _value(after, name, **labels) - _value(before, name, **labels)

    chat = {"role": "chat", "model": reply.model}
    assert grew("thalamus_llm_requests_total", **chat, outcome="ok") == 1
    assert grew("thalamus_llm_requests_total", **chat, outcome="error") == 0
    assert grew("thalamus_llm_tokens_total", **chat, direction="in") == reply.prompt_tokens > 0
    assert grew("thalamus_llm_tokens_total", **chat, direction="out") == reply.completion_tokens
    assert grew("thalamus_llm_ttft_seconds_count", **chat) == 1
    assert grew("thalamus_llm_ttft_seconds_sum", **chat) >= 0.3
    assert grew("thalamus_llm_latency_seconds_count", **chat) == 1
    assert grew("thalamus_llm_latency_seconds_sum", **chat) >= 0.3
    assert grew("thalamus_llm_latency_seconds_bucket", **chat, le="0.25") == 0
    assert grew("thalamus_llm_latency_seconds_bucket", **chat, le="+Inf") == 1

    title = {"role": "title", "model": title_model}
    assert grew("thalamus_llm_requests_total", **title, outcome="ok") == 1
    assert grew("thalamus_llm_tokens_total", **title, direction="in") > 0
    assert grew("thalamus_llm_tokens_total", **title, direction="out") > 0
    assert grew("thalamus_llm_latency_seconds_count", **title) == 1
    assert grew("thalamus_llm_ttft_seconds_count", **title) == 1


@pytest.mark.django_db(transaction=True)
def test_a_failed_answer_is_counted_as_an_error_of_its_kind(api_client, user, llm_stub, scrape):
    before = scrape()
    llm_stub.script({"fault": "http_500"})

    with pytest.raises(openai.APIStatusError):
        api_client(user).chat.completions.create(
            model="thalamus", messages=[{"role": "user", "content": "hi"}]
        )

    after = scrape()
    model = Message.objects.get(role="assistant", status=Message.Status.FAILED).model
    labels = {"role": "chat", "model": model}
    for name, extra in [
        ("thalamus_llm_requests_total", {"outcome": "error"}),
        ("thalamus_llm_errors_total", {"kind": "http_500"}),
        ("thalamus_llm_latency_seconds_count", {}),
    ]:
        assert _value(after, name, **labels, **extra) - _value(before, name, **labels, **extra) == 1
    assert _value(after, "thalamus_llm_ttft_seconds_count", **labels) == _value(
        before, "thalamus_llm_ttft_seconds_count", **labels
    )


@pytest.mark.django_db
def test_a_failed_background_call_is_counted_as_an_error_of_its_role(llm_stub, scrape):
    model = role_endpoint(TITLE).model
    labels = {"role": "title", "model": model}
    before = scrape()
    llm_stub.script({"fault": "http_500"})

    with pytest.raises(Unreachable):
        complete(role=TITLE, prompt=[{"role": "user", "content": "a title?"}])

    after = scrape()
    for name, extra in [
        ("thalamus_llm_requests_total", {"outcome": "error"}),
        ("thalamus_llm_errors_total", {"kind": "http_500"}),
    ]:
        assert _value(after, name, **labels, **extra) - _value(before, name, **labels, **extra) == 1


@pytest.mark.django_db
def test_metrics_are_refused_without_a_staff_login_or_the_right_token(
    client, settings, user, admin_user
):
    settings.THALAMUS_METRICS_TOKEN = TOKEN
    record_llm_call(
        role="chat",
        model="m",
        prompt_tokens=1,
        completion_tokens=1,
        ttft_s=0.1,
        latency_s=0.2,
        error=None,
    )

    anonymous = client.get("/metrics")
    assert anonymous.status_code == 401 and anonymous["WWW-Authenticate"].startswith("Bearer")
    wrong = client.get("/metrics", HTTP_AUTHORIZATION="Bearer not-the-token")
    assert wrong.status_code == 403
    client.force_login(user)
    assert client.get("/metrics").status_code == 403
    for refused in (anonymous, wrong):
        assert b"thalamus_llm" not in refused.content

    assert (
        b"thalamus_llm_requests_total"
        in client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").content
    )
    client.force_login(admin_user)
    staff = client.get("/metrics")
    assert staff.status_code == 200 and staff["Content-Type"].startswith("text/plain")
    assert b"thalamus_llm_latency_seconds_bucket" in staff.content


@pytest.mark.django_db
def test_without_a_token_configured_no_bearer_is_let_in(client, settings):
    settings.THALAMUS_METRICS_TOKEN = ""  # the shipped default
    for header in ("Bearer ", "Bearer anything"):
        assert client.get("/metrics", HTTP_AUTHORIZATION=header).status_code == 403


@pytest.mark.django_db
def test_the_admin_page_shows_each_role_and_model_with_its_p95(client, admin_user, user):
    model = f"metrics-page-{uuid.uuid4().hex[:8]}"
    for _ in range(10):
        record_llm_call(
            role="router",
            model=model,
            prompt_tokens=100,
            completion_tokens=20,
            ttft_s=0.8,  # all in the (0.5 s, 1 s] bucket: p95 ≈ 0.5 + 0.5 × 0.95
            latency_s=8.0,  # all in (5 s, 10 s]: p95 ≈ 5 + 5 × 0.95
            error=None,
        )
    record_llm_call(
        role="router",
        model=model,
        prompt_tokens=None,
        completion_tokens=None,
        ttft_s=None,
        latency_s=None,
        error="APITimeoutError",
    )

    client.force_login(admin_user)
    index = client.get(reverse("admin:index"))
    assert reverse("llm_metrics") in index.content.decode()
    page = client.get(reverse("llm_metrics"))

    assert page.status_code == 200
    html = page.content.decode()
    assert "p95 ≈" in html
    row = html[html.index(model) :]
    row = row[: row.index("</tr>")]
    cells = [cell.split(">", 1)[1].split("<", 1)[0] for cell in row.split("<td")[1:]]
    # requests, errors, tokens in, out, TTFT mean, p95, latency mean, p95
    assert cells == ["11", "1", "1,000", "200", "800 ms", "975 ms", "8.00 s", "9.75 s"]

    client.force_login(user)
    assert client.get(reverse("llm_metrics")).status_code == 302  # to the admin's login


def test_the_quantile_is_interpolated_within_its_bucket_as_prometheus_does():
    # 100 observations: none up to 0.1 s, 50 up to 0.5 s, 90 up to 1 s, 10 beyond.
    buckets = [(0.1, 0), (0.5, 50), (1.0, 90), (float("inf"), 100)]

    assert histogram_quantile(0.5, buckets) == pytest.approx(0.5)
    assert histogram_quantile(0.25, buckets) == pytest.approx(0.1 + 0.4 * 25 / 50)
    assert histogram_quantile(0.7, buckets) == pytest.approx(0.5 + 0.5 * 20 / 40)
    # In the +Inf bucket the estimate is the highest finite bound.
    assert histogram_quantile(0.95, buckets) == pytest.approx(1.0)
    assert histogram_quantile(0.95, list(reversed(buckets))) == pytest.approx(1.0)
    assert histogram_quantile(0.95, [(1.0, 0), (float("inf"), 0)]) is None
    assert histogram_quantile(0.95, [(2.0, 4), (float("inf"), 4)]) == pytest.approx(2 * 0.95)


def test_a_metrics_failure_never_breaks_the_call_it_counts(caplog):
    # A counter cannot go down: prometheus_client raises, record_llm_call logs it.
    record_llm_call(
        role="chat",
        model="m",
        prompt_tokens=-5,
        completion_tokens=None,
        ttft_s=None,
        latency_s=None,
        error=None,
    )
    assert "recording an LLM call's metrics failed" in caplog.text


@pytest.mark.django_db
def test_memories_reflection_wrote_are_counted_by_what_found_them(
    user, llm_stub, scrape, config, django_capture_on_commit_callbacks
):
    config(critic_enabled=False)
    conversation = Conversation.objects.create(owner=user)
    said = Message.objects.create(
        conversation=conversation,
        role="user",
        content="I work as a nurse. I love jazz. Jazz makes my evenings.",
    )
    reply = Message.objects.create(
        conversation=conversation, role="assistant", status="complete", content="Nice.",
        reply_to=said,
    )  # fmt: skip
    llm_stub.script(reflection("I work as a nurse.", "Jazz makes my evenings."))
    before = scrape()

    with django_capture_on_commit_callbacks(execute=True):
        reflect_on_message(message_id=reply.pk)

    after = scrape()
    for found_by in ("both", "rules", "model"):
        labels = {"found_by": found_by, "outcome": "created"}
        grew = _value(after, "thalamus_memories_found_total", **labels) - _value(
            before, "thalamus_memories_found_total", **labels
        )
        assert grew == 1, found_by
