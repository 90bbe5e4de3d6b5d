from __future__ import annotations

import math
from zoneinfo import available_timezones

from django import forms
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import AuthenticationForm, UserCreationForm
from django.core.exceptions import ValidationError

from apps.accounts.lockout import WARN_FROM, attempts_left, cooloff_seconds
from apps.accounts.models import LEARNABLE_CATEGORIES, UserSettings
from apps.accounts.selectors import is_time_zone
from apps.core.models import RuntimeConfig


class _WarnsBeforeLockout:
    """A failed login says how many tries are left once only a few are."""

    def get_invalid_login_error(self):
        error = super().get_invalid_login_error()
        username = self.cleaned_data.get("username")
        if self.request is None or not username:
            return error
        left = attempts_left(self.request, username)
        if not 0 < left <= WARN_FROM:
            return error
        minutes = math.ceil(cooloff_seconds() / 60)
        warning = (
            f"{left} attempt{'' if left == 1 else 's'} left: then logins to this account from "
            f"here pause for {minutes} minute{'' if minutes == 1 else 's'}."
        )
        return ValidationError([error, ValidationError(warning, code="attempts_left")])


class LoginForm(_WarnsBeforeLockout, AuthenticationForm):
    pass


class AdminLoginForm(_WarnsBeforeLockout, AdminAuthenticationForm):
    pass


class SignupForm(UserCreationForm):
    class Meta(UserCreationForm.Meta):
        fields = ("username",)


class ApiKeyForm(forms.Form):
    name = forms.CharField(
        max_length=100, help_text="What the key is for, e.g. “Open WebUI on my laptop”."
    )


class MemorySettingsForm(forms.ModelForm):
    learn_categories = forms.MultipleChoiceField(
        choices=LEARNABLE_CATEGORIES,
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="What Thalamus may learn",
        help_text="What is said about an unticked kind is not remembered.",
    )

    class Meta:
        model = UserSettings
        fields = ("memory_enabled", "learn_categories", "knowledge_language")
        labels = {
            "memory_enabled": "Memory",
            "knowledge_language": "Language of what Thalamus knows",
        }
        help_texts = {
            "memory_enabled": "Off: your chats read nothing from memory and teach it nothing.",
            "knowledge_language": "How the facts it knows about you are written into its prompt.",
        }

    def __init__(self, *args, site_language: str = "", **kwargs):
        super().__init__(*args, **kwargs)
        names = dict(RuntimeConfig.Language.choices)
        self.fields["knowledge_language"].choices = [
            ("", f"The site's ({names.get(site_language, site_language or 'English')})"),
            *RuntimeConfig.Language.choices,
        ]


class InstructionsForm(forms.ModelForm):
    class Meta:
        model = UserSettings
        fields = ("about_me", "answer_style")
        labels = {"about_me": "About me", "answer_style": "How to answer"}
        help_texts = {
            "about_me": "What Thalamus should always know about you, e.g. “I am a nurse in Lyon”.",
            "answer_style": "How you like answers, e.g. “Short, with code first”.",
        }
        widgets = {
            "about_me": forms.Textarea(attrs={"rows": 3, "maxlength": 2000}),
            "answer_style": forms.Textarea(attrs={"rows": 3, "maxlength": 2000}),
        }


class TimeZoneForm(forms.ModelForm):
    time_zone = forms.ChoiceField(
        label="Time zone",
        help_text="Used for today's date in Thalamus's prompt, the time it tells, and the dates "
        "on these pages.",
    )

    class Meta:
        model = UserSettings
        fields = ("time_zone",)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["time_zone"].choices = [(name, name) for name in time_zone_names()]

    def clean_time_zone(self) -> str:
        name = self.cleaned_data["time_zone"]
        if not is_time_zone(name):
            raise forms.ValidationError("Not a known time zone.")
        return name


class ThemeForm(forms.ModelForm):
    class Meta:
        model = UserSettings
        fields = ("theme",)


class DetectedTimeZoneForm(forms.Form):
    """The browser's time zone (Intl), sent by base.html's script on a page view."""

    time_zone = forms.CharField(max_length=64)

    def clean_time_zone(self) -> str:
        name = self.cleaned_data["time_zone"]
        if not is_time_zone(name) or name not in time_zone_names():
            raise forms.ValidationError("Not a known time zone.")
        return name


def time_zone_names() -> list[str]:
    return sorted(available_timezones() - {"localtime", "Factory"})
