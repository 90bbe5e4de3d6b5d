from __future__ import annotations

from django.conf import settings
from django.contrib.auth import login
from django.contrib.auth.decorators import login_not_required
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from apps.accounts import services
from apps.accounts.forms import ApiKeyForm, SignupForm
from apps.accounts.models import ApiKey
from apps.accounts.selectors import api_key_for_user, api_keys_for_user


def _get_api_key_for_user(request, pk: int) -> ApiKey:
    key = api_key_for_user(user=request.user, pk=pk)
    if key is None:
        raise Http404("No such API key.")
    return key


@login_not_required
@require_http_methods(["GET", "POST"])
def signup(request):
    if not settings.THALAMUS_OPEN_SIGNUP:
        raise Http404("Sign-up is closed; ask an administrator for an account.")
    form = SignupForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        user = services.user_create(
            username=form.cleaned_data["username"], password=form.cleaned_data["password1"]
        )
        login(request, user, backend="django.contrib.auth.backends.ModelBackend")
        return redirect(settings.LOGIN_REDIRECT_URL)
    return render(request, "accounts/signup.html", {"form": form})


NEW_KEY_SESSION = "new_api_key"


def _settings_page(request, *, form: ApiKeyForm):
    # The secret waits in the session for exactly one page view, so a reload neither shows it
    # again nor creates a second key.
    new_key = request.session.pop(NEW_KEY_SESSION, None)
    return render(
        request,
        "accounts/settings.html",
        {
            "api_keys": api_keys_for_user(user=request.user),
            "form": form,
            "new_key": new_key,
            "api_base_url": request.build_absolute_uri("/v1"),
        },
    )


@require_GET
def settings_page(request):
    return _settings_page(request, form=ApiKeyForm())


@require_POST
def api_key_create(request):
    form = ApiKeyForm(request.POST)
    if not form.is_valid():
        return _settings_page(request, form=form)
    key, secret = services.api_key_create(user=request.user, name=form.cleaned_data["name"])
    request.session[NEW_KEY_SESSION] = {"name": key.name, "secret": secret}
    return redirect("settings")


@require_POST
def api_key_revoke(request, pk: int):
    key = services.api_key_revoke(key=_get_api_key_for_user(request, pk))
    if request.htmx:
        return render(request, "accounts/_api_key_row.html", {"key": key})
    return redirect("settings")
