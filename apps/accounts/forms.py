from __future__ import annotations

from django import forms
from django.contrib.auth.forms import UserCreationForm


class SignupForm(UserCreationForm):
    class Meta(UserCreationForm.Meta):
        fields = ("username",)


class ApiKeyForm(forms.Form):
    name = forms.CharField(
        max_length=100, help_text="What the key is for, e.g. “Open WebUI on my laptop”."
    )
