"""The admin as the system's control panel: runtime configuration, prompts, beat schedules."""

from __future__ import annotations

import time
import warnings

import pytest
from django.urls import reverse
from django_celery_beat.models import PeriodicTask

from apps.core.forms import percent_of
from apps.core.models import PromptOverride, RuntimeConfig
from apps.core.ports import free_port
from apps.core.prompts import file_prompt_text
from apps.core.selectors import prompt_text

pytestmark = pytest.mark.django_db


def _config_form(**changes) -> dict:
    config = RuntimeConfig()
    data = {
        field.name: getattr(config, field.name)
        for field in RuntimeConfig._meta.fields
        if field.editable and field.name != "id"
    }
    # The admin shows the confidence thresholds in percent, as the pages show confidence.
    for name in ("promotion_threshold", "minimum_score"):
        data[name] = percent_of(data[name])
    data.update(changes)
    return {k: ("on" if v is True else v) for k, v in data.items() if v is not False}


def test_a_runtime_config_with_an_out_of_range_threshold_is_refused(admin_client):
    response = admin_client.post(
        reverse("admin:core_runtimeconfig_add"), _config_form(promotion_threshold=0)
    )
    assert response.status_code == 200
    assert "promotion_threshold" in response.context["adminform"].form.errors
    assert not RuntimeConfig.objects.exists()


# Committed: the endpoints are asked once the admin's transaction has committed.
@pytest.mark.django_db(transaction=True)
def test_saving_an_unreachable_endpoint_warns_but_saves(no_outbound_in_atomic, admin_client):
    dead = f"http://127.0.0.1:{free_port()}/v1"
    response = admin_client.post(
        reverse("admin:core_runtimeconfig_add"), _config_form(llm_base_url=dead), follow=True
    )
    assert RuntimeConfig.objects.get().llm_base_url == dead
    texts = [str(m) for m in response.context["messages"]]
    assert any("not usable" in text and "unreachable" in text for text in texts), texts


# Committed: the endpoints are asked once the admin's transaction has committed.
@pytest.mark.django_db(transaction=True)
def test_saving_a_reachable_endpoint_does_not_warn(no_outbound_in_atomic, admin_client, llm_stub):
    response = admin_client.post(
        reverse("admin:core_runtimeconfig_add"), _config_form(), follow=True
    )
    assert RuntimeConfig.objects.exists()
    assert not any("not usable" in str(m) for m in response.context["messages"])


def test_the_prompt_list_shows_every_template_file(admin_client):
    response = admin_client.get(reverse("admin:core_promptoverride_changelist"))
    body = response.content.decode()
    assert "prompts/answer.txt" in body and "prompts/title.txt" in body
    assert "{{exchange}}" in body


def test_the_add_form_starts_from_the_files_text(admin_client):
    response = admin_client.get(reverse("admin:core_promptoverride_add"), {"name": "title"})
    assert response.context["adminform"].form.initial["text"] == file_prompt_text("title")


def test_a_prompt_missing_or_inventing_a_placeholder_is_refused(admin_client):
    response = admin_client.post(
        reverse("admin:core_promptoverride_add"),
        {"name": "title", "text": "Name this chat: {{conversation}}"},
    )
    errors = response.context["adminform"].form.errors["text"]
    assert any("lacks {{exchange}}" in error for error in errors)
    assert any("uses {{conversation}}" in error for error in errors)
    assert not PromptOverride.objects.exists()


def test_an_override_applies_from_the_next_call_and_reverting_restores_the_file(
    admin_client, django_capture_on_commit_callbacks
):
    assert prompt_text("title") == file_prompt_text("title")  # cached: no override
    with django_capture_on_commit_callbacks(execute=True):
        admin_client.post(
            reverse("admin:core_promptoverride_add"),
            {"name": "title", "text": "Title for: {{exchange}}"},
        )
    assert prompt_text("title") == "Title for: {{exchange}}"

    override = PromptOverride.objects.get()
    with django_capture_on_commit_callbacks(execute=True):
        admin_client.post(
            reverse("admin:core_promptoverride_changelist"),
            {"action": "revert", "_selected_action": [override.pk]},
        )
    assert not PromptOverride.objects.exists()
    assert prompt_text("title") == file_prompt_text("title")


def test_every_runtime_setting_is_editable_in_the_admin():
    from django.contrib import admin

    model_admin = admin.site._registry[RuntimeConfig]
    in_admin = set()
    for _, options in model_admin.fieldsets:
        for entry in options["fields"]:
            in_admin.update(entry if isinstance(entry, tuple) else [entry])
    editable = {f.name for f in RuntimeConfig._meta.fields if f.editable and f.name != "id"}
    assert editable - in_admin == set()


@pytest.mark.django_db(transaction=True)
def test_a_maintenance_schedule_runs_now_from_the_admin_in_a_real_worker(
    admin_client, celery_worker, user, default_schedules
):
    from datetime import timedelta

    from django.utils import timezone

    from apps.memory import services
    from apps.memory.models import MemoryNode

    stale = services.memory_node_create(
        owner=user,
        description="a doubtful memory",
        confidence_score=-1,
        embed=False,
        source="admin",
    )
    long_ago = timezone.now() - timedelta(days=30)
    MemoryNode.objects.filter(pk=stale.pk).update(created_at=long_ago, last_accessed_at=long_ago)
    schedule = PeriodicTask.objects.get(task="memory.decay")  # a default schedule

    response = admin_client.post(
        reverse("admin:django_celery_beat_periodictask_changelist"),
        {"action": "run_tasks", "_selected_action": [schedule.pk]},
        follow=True,
    )

    assert any("successfully run" in str(m) for m in response.context["messages"])
    for _ in range(100):
        if not MemoryNode.objects.filter(pk=stale.pk).exists():
            break
        time.sleep(0.1)
    assert not MemoryNode.objects.filter(pk=stale.pk).exists()


@pytest.mark.django_db(transaction=True)
def test_a_worker_uses_the_admins_new_model_and_prompt_from_its_next_task(
    admin_client, celery_worker, llm_stub, user
):
    from apps.chat.models import Conversation, Message
    from apps.chat.tasks import title_conversation

    llm_stub.script({"content": "Beekeeping"})
    admin_client.post(
        reverse("admin:core_runtimeconfig_add"),
        _config_form(llm_base_url=llm_stub.url, chat_model="admin-picked:1b"),
    )
    admin_client.post(
        reverse("admin:core_promptoverride_add"),
        {"name": "title", "text": "ADMIN TITLE PROMPT\n{{exchange}}"},
    )
    conversation = Conversation.objects.create(owner=user)
    Message.objects.create(conversation=conversation, role="user", content="I keep bees")

    title_conversation.delay(conversation.pk).get(timeout=45)

    sent = [r["body"] for r in llm_stub.requests if r["path"].endswith("/chat/completions")][-1]
    assert sent["model"] == "admin-picked:1b"
    assert sent["messages"][0]["content"].startswith("ADMIN TITLE PROMPT")
    conversation.refresh_from_db()
    assert conversation.title == "Beekeeping"


def test_an_endpoint_typed_without_a_scheme_is_taken_as_plain_http(admin_client, llm_stub):
    from django.utils.deprecation import RemovedInDjango60Warning

    typed = llm_stub.url.removeprefix("http://")
    # Said explicitly, not left to Django's default, which becomes https in Django 6.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        admin_client.post(reverse("admin:core_runtimeconfig_add"), _config_form(llm_base_url=typed))
    assert RuntimeConfig.objects.get().llm_base_url == f"http://{typed}"
    assert not [w for w in caught if issubclass(w.category, RemovedInDjango60Warning)]


def test_the_configuration_page_shows_each_models_window_and_cap(admin_client, llm_stub):
    llm_stub.set_defaults(server="llamacpp", context=4096)

    page = admin_client.get(reverse("admin:core_runtimeconfig_add")).content.decode()

    assert "Models in use" in page
    assert "llama.cpp /props" in page and "4,096" in page and "1,024" in page


def test_the_configuration_page_warns_of_a_server_that_silently_truncates(admin_client, llm_stub):
    from apps.core.llm.limits import CHAT, role_endpoint, truncation_warn

    truncation_warn(endpoint=role_endpoint(CHAT), role=CHAT, sent_estimate=3900, reported=2048)

    response = admin_client.get(reverse("admin:core_runtimeconfig_changelist"), follow=True)

    texts = [str(m) for m in response.context["messages"]]
    assert any("2,048" in text and "num_ctx" in text for text in texts), texts
