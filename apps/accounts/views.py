from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_not_required
from django.contrib.auth.forms import PasswordChangeForm
from django.contrib.auth.views import PasswordChangeView
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse, reverse_lazy
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from apps.accounts import services
from apps.accounts.forms import (
    ApiKeyForm,
    DetectedTimeZoneForm,
    InstructionsForm,
    MemorySettingsForm,
    SignupForm,
    ThemeForm,
    TimeZoneForm,
)
from apps.accounts.models import ApiKey
from apps.accounts.selectors import (
    admin_viewings_for,
    api_key_for_user,
    api_keys_for_user,
    user_settings_for,
)
from apps.core.selectors import runtime_config


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


def _settings_context(request, *, form: ApiKeyForm | None = None, **forms) -> dict:
    # The secret waits in the session for exactly one page view, so a reload neither shows it
    # again nor creates a second key.
    new_key = request.session.pop(NEW_KEY_SESSION, None)
    current = user_settings_for(user=request.user)
    sections = {
        name: forms.get(name) or _section_form(name, request=request, instance=current)
        for name in SECTIONS
    }
    password_form = forms.get("password") or PasswordChangeForm(request.user)
    # The password is one section among several: the page must not open scrolled to it.
    password_form.fields["old_password"].widget.attrs.pop("autofocus", None)
    return {
        "api_keys": api_keys_for_user(user=request.user),
        "form": form or ApiKeyForm(),
        "new_key": new_key,
        "api_base_url": request.build_absolute_uri("/v1"),
        "sections": sections,
        "password_form": password_form,
        "admin_viewings": admin_viewings_for(user=request.user),
    }


def _settings_page(request, *, form: ApiKeyForm | None = None, status: int = 200, **forms):
    return render(
        request,
        "accounts/settings.html",
        _settings_context(request, form=form, **forms),
        status=status,
    )


# The sections of the settings page saved by user_settings_save, each with its form.
SECTIONS = {
    "memory": MemorySettingsForm,
    "instructions": InstructionsForm,
    "time": TimeZoneForm,
}


def _section_form(name: str, *, request, instance, data=None):
    kwargs = {"data": data, "instance": instance, "prefix": name}
    if name == "memory":
        kwargs["site_language"] = runtime_config().renderer_language
    return SECTIONS[name](**kwargs)


@require_POST
def user_settings_save(request, section: str):
    """Save one section of the user's own settings; with htmx, the section comes back."""
    if section not in SECTIONS:
        raise Http404("No such settings section.")
    current = user_settings_for(user=request.user)
    form = _section_form(section, request=request, instance=current, data=request.POST)
    saved = form.is_valid()
    if saved:
        services.user_settings_update(user=request.user, **form.cleaned_data)
        if section == "time":
            # This very response already shows dates in the new zone.
            timezone.activate(form.cleaned_data["time_zone"])
    if request.htmx:
        return render(
            request,
            "accounts/_settings_section.html",
            {"name": section, "section": form, "saved": saved},
            status=200 if saved else 400,
        )
    if saved:
        messages.success(request, "Settings saved.")
        return redirect(f"{reverse('settings')}#settings-{section}")
    return _settings_page(request, status=400, **{section: form})


class SettingsPasswordChangeView(PasswordChangeView):
    """Django's password change, on the settings page; the session stays signed in
    (PasswordChangeView calls update_session_auth_hash)."""

    template_name = "accounts/settings.html"
    success_url = reverse_lazy("settings")

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        context.update(_settings_context(self.request, password=context["form"]))
        return context

    def form_invalid(self, form):
        response = super().form_invalid(form)
        response.status_code = 400
        return response

    def form_valid(self, form):
        response = super().form_valid(form)
        messages.success(self.request, "Password changed.")
        return response


@require_GET
def settings_page(request):
    return _settings_page(request)


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


@require_POST
def theme_save(request):
    """The header's theme switch: saved for the user; the page's script has already applied it,
    and without a script the page it came from is shown again in the new theme."""
    form = ThemeForm(request.POST, instance=user_settings_for(user=request.user))
    if not form.is_valid():
        return HttpResponse("Not a theme.", status=400)
    services.user_settings_update(user=request.user, theme=form.cleaned_data["theme"])
    back = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(
        back, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        back = reverse("home")
    if request.headers.get("X-Requested-With") == "fetch":
        return HttpResponse(status=204)
    return redirect(back)


@require_POST
def time_zone_detect(request):
    """The browser's time zone, taken as the user's unless they chose one on the settings page
    (or one was taken already); 204 either way, 400 for a name zoneinfo does not know."""
    form = DetectedTimeZoneForm(request.POST)
    if not form.is_valid():
        return HttpResponse("Not a known time zone.", status=400)
    services.user_time_zone_detect(user=request.user, time_zone=form.cleaned_data["time_zone"])
    return HttpResponse(status=204)
