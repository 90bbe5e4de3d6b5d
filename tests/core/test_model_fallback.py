"""Model roles: chosen from what the endpoint lists, flagged when missing, a fallback chain each."""

from __future__ import annotations

import time

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from apps.core.llm.gateway import complete
from apps.core.llm.limits import (
    CHAT,
    EMBEDDING,
    REFLECTION,
    ROLES,
    TITLE,
    Endpoint,
    endpoint_models,
    role_endpoints,
)
from apps.core.llm.outcomes import Refused, TooLong
from apps.core.models import FALLBACK_ROLES, RuntimeConfig
from apps.core.ports import free_port

pytestmark = pytest.mark.django_db

ASK = [{"role": "user", "content": "Say something short."}]


def _warnings(response) -> list[str]:
    return [str(message) for message in response.context["messages"]]


def test_the_endpoints_models_are_read_from_its_list_and_none_when_it_cannot_be_asked(llm_stub):
    assert endpoint_models(llm_stub.url) == ["qwen2.5:7b", "nomic-embed-text", "demo"]
    assert endpoint_models(f"http://127.0.0.1:{free_port()}/v1") is None


def test_the_admin_offers_each_role_the_models_its_endpoint_lists(admin_client, llm_stub):
    body = admin_client.get(reverse("admin:core_runtimeconfig_add")).content.decode()

    assert 'list="id_critic_model_listed"' in body
    datalist = body.split('<datalist id="id_critic_model_listed">', 1)[1].split("</datalist>")[0]
    assert '<option value="qwen2.5:7b">' in datalist and '<option value="demo">' in datalist


def test_a_model_the_endpoint_does_not_list_is_flagged_in_the_admin(admin_client, config, llm_stub):
    config(critic_model="llama3:70b", model_fallbacks={"reflection": ["demo"]})
    llm_stub.set_defaults(missing_models=["demo"])

    response = admin_client.get(reverse("admin:core_runtimeconfig_changelist"), follow=True)

    warnings = _warnings(response)
    assert any(
        "llama3:70b (the critic model) is not among the models" in text for text in warnings
    ), warnings
    assert any("demo (the reflection fallback)" in text for text in warnings), warnings
    assert not any("qwen2.5:7b" in text for text in warnings)


def test_healthz_flags_a_missing_model_with_the_fix(admin_client, config, llm_stub):
    config(title_model="tiny", model_fallbacks={"chat": ["demo"]})

    models = admin_client.get("/healthz").json()["models"]

    assert models["ok"] is False
    assert models["roles"]["title"]["listed"] is False
    assert models["roles"]["chat"]["listed"] is True
    assert models["roles"]["chat"]["fallbacks"] == [
        {"model": "demo", "base_url": llm_stub.url, "listed": True}
    ]
    assert models["error"].startswith("tiny (the title model) is not among the models")
    assert "choose a listed one in the runtime configuration" in models["error"]


def test_healthz_is_content_when_every_model_is_listed(admin_client, llm_stub):
    models = admin_client.get("/healthz").json()["models"]

    assert models["ok"] is True
    assert all(role["listed"] is True for role in models["roles"].values())


def test_the_fallback_chains_are_edited_one_model_a_line_per_role(admin_client, llm_stub):
    from tests.memory.test_admin_config import _config_form

    admin_client.post(
        reverse("admin:core_runtimeconfig_add"),
        _config_form(
            model_fallbacks_chat="demo\n\nhttp://127.0.0.1:9/v1 qwen2.5:3b\n",
            model_fallbacks_title="demo",
        ),
    )

    saved = RuntimeConfig.objects.get()
    assert saved.model_fallbacks == {
        "chat": ["demo", "http://127.0.0.1:9/v1 qwen2.5:3b"],
        "title": ["demo"],
    }
    page = admin_client.get(
        reverse("admin:core_runtimeconfig_change", args=[saved.pk])
    ).content.decode()
    assert "demo\nhttp://127.0.0.1:9/v1 qwen2.5:3b</textarea>" in page
    assert 'name="model_fallbacks_title"' in page


def test_a_fallback_that_is_not_a_model_is_refused(admin_client, llm_stub):
    from tests.memory.test_admin_config import _config_form

    response = admin_client.post(
        reverse("admin:core_runtimeconfig_add"),
        _config_form(model_fallbacks_critic="two models here"),
    )

    errors = response.context["adminform"].form.errors["model_fallbacks"]
    assert "'two models here' is neither a model nor an endpoint and a model" in errors[0]
    assert not RuntimeConfig.objects.exists()


def test_every_role_but_the_embedding_can_fall_back():
    assert set(FALLBACK_ROLES) == set(ROLES) - {EMBEDDING}


def test_the_embedding_cannot_fall_back_to_another_model():
    config = RuntimeConfig(model_fallbacks={"embedding": ["other-embedder"]})

    with pytest.raises(ValidationError, match="'embedding' cannot fall back"):
        config.full_clean()


def test_a_roles_chain_is_its_own_endpoint_then_its_fallbacks_in_order(config, llm_stub):
    config(model_fallbacks={"title": ["small", "http://10.0.0.2:8080/v1 tiny", "small"]})

    assert role_endpoints(TITLE) == [
        Endpoint(llm_stub.url, "qwen2.5:7b"),
        Endpoint(llm_stub.url, "small"),
        Endpoint("http://10.0.0.2:8080/v1", "tiny"),
    ]
    assert role_endpoints(CHAT) == [Endpoint(llm_stub.url, "qwen2.5:7b")]


def test_a_background_call_falls_back_when_its_model_is_not_found(config, llm_stub):
    config(title_model="gone", model_fallbacks={"title": ["demo"]})
    llm_stub.set_defaults(missing_models=["gone"])
    llm_stub.script({"content": "Trip to Rome"})

    completion = complete(role=TITLE, prompt=ASK)

    assert completion.content == "Trip to Rome"
    assert (completion.model, completion.base_url) == ("demo", llm_stub.url)
    assert completion.fallback_from == [
        {
            "model": "gone",
            "base_url": llm_stub.url,
            "error": 'HTTP 404: model "gone" not found, try pulling it first',
        }
    ]
    assert [r["body"]["model"] for r in llm_stub.requests] == ["gone", "demo"]


def test_a_background_call_falls_back_on_a_server_error(config, llm_stub):
    config(model_fallbacks={"reflection": ["demo"]})
    llm_stub.script({"fault": "http_500"}, {"content": "Fine."})

    completion = complete(role=REFLECTION, prompt=ASK)

    assert (completion.content, completion.model) == ("Fine.", "demo")
    assert completion.fallback_from[0]["error"].startswith("HTTP 500")


def test_a_background_call_falls_back_from_a_server_that_is_not_there(config, llm_stub):
    dead = f"http://127.0.0.1:{free_port()}/v1"
    config(
        reflection_base_url=dead,
        reflection_model="big",
        model_fallbacks={"reflection": ["bigger", f"{llm_stub.url} demo"]},
    )

    completion = complete(role=REFLECTION, prompt=ASK)

    assert (completion.model, completion.base_url) == ("demo", llm_stub.url)
    assert [(f["model"], f["error"]) for f in completion.fallback_from] == [
        ("big", "unreachable"),
        ("bigger", "unreachable"),
    ]


def test_a_call_that_times_out_falls_back(config, llm_stub):
    config(router_timeout_seconds=1, model_fallbacks={"chat": ["demo"]})
    llm_stub.script({"fault": "hang", "ttft": 10}, {"content": "answer directly"})

    started = time.monotonic()
    # A round of the tool loop: the chat's, before the answer, with the router's time limit.
    completion = complete(role=CHAT, prompt=ASK)

    assert completion.model == "demo" and completion.content == "answer directly"
    assert completion.fallback_from[0]["error"] == "timed out"
    # At the router's 1 s limit, not at the end of the hang's 10 s.
    assert time.monotonic() - started < 5


def test_a_prompt_too_long_for_every_model_of_the_chain_is_never_resent_over_a_known_window(
    config, llm_stub
):
    config(model_fallbacks={"reflection": ["demo"]})
    llm_stub.set_defaults(context=20)

    with pytest.raises(TooLong):
        complete(role=REFLECTION, prompt=[{"role": "user", "content": "w " * 50}])

    # Each model is asked once, learns its window from the refusal, and is not asked again
    # with a prompt its window cannot hold.
    assert [r["body"]["model"] for r in llm_stub.requests] == ["qwen2.5:7b", "demo"]


def test_when_the_whole_chain_fails_the_last_error_is_raised(config, llm_stub):
    config(model_fallbacks={"title": ["demo"]})
    llm_stub.set_defaults(missing_models=["qwen2.5:7b", "demo"])

    with pytest.raises(Refused, match="demo"):
        complete(role=TITLE, prompt=ASK)

    assert [r["body"]["model"] for r in llm_stub.requests] == ["qwen2.5:7b", "demo"]
