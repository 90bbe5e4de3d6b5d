from __future__ import annotations

from django import forms

from apps.memory.models import MemoryNode

BLANK = [("", "Any")]


class MemoryFilterForm(forms.Form):
    q = forms.CharField(required=False, label="Search", max_length=500)
    similar = forms.CharField(required=False, label="Similar to", max_length=500)
    kind = forms.ChoiceField(required=False, choices=BLANK + MemoryNode.Kind.choices)
    state = forms.ChoiceField(required=False, choices=BLANK + MemoryNode.State.choices)
    min_confidence = forms.IntegerField(required=False, label="Confidence from")
    max_confidence = forms.IntegerField(required=False, label="to")
    as_of = forms.DateField(
        required=False,
        label="As of",
        widget=forms.DateInput(attrs={"type": "date"}),
        help_text="What I believed at the end of that day.",
    )


class MemoryEditForm(forms.ModelForm):
    class Meta:
        model = MemoryNode
        fields = ["description", "topic", "kind", "importance"]
        widgets = {"description": forms.Textarea(attrs={"rows": 3})}


class MemoryImportForm(forms.Form):
    file = forms.FileField(label="Export file (JSON)")


class ForgetAllForm(forms.Form):
    PHRASE = "forget everything"
    confirm = forms.CharField(label=f'Type "{PHRASE}" to confirm')

    def clean_confirm(self) -> str:
        value = self.cleaned_data["confirm"]
        if value.strip().lower() != self.PHRASE:
            raise forms.ValidationError(f'Type "{self.PHRASE}" exactly.')
        return value
