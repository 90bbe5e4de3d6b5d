from __future__ import annotations

from django import forms

from apps.memory.models import MemoryNode, WorldState
from apps.memory.schemas import world_op_parse

BLANK = [("", "Any")]


class MemoryFilterForm(forms.Form):
    q = forms.CharField(required=False, label="Search", max_length=500)
    similar = forms.CharField(required=False, label="Similar to", max_length=500)
    kind = forms.ChoiceField(required=False, choices=BLANK + MemoryNode.Kind.choices)
    # The words the list's badges use (the model's labels are the engineers' names).
    state = forms.ChoiceField(
        required=False,
        choices=BLANK
        + [
            (MemoryNode.State.VOLATILE, "Short-term"),
            (MemoryNode.State.PROMOTED, "Long-term"),
            (MemoryNode.State.QUARANTINED, "Awaiting approval"),
        ],
    )
    # In percent, the scale every page shows confidence on (models.confidence_share).
    min_confidence = forms.IntegerField(
        required=False, label="Confidence ≥ %", min_value=0, max_value=100
    )
    max_confidence = forms.IntegerField(
        required=False, label="Confidence ≤ %", min_value=0, max_value=100
    )
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


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


class WorldStateForm(forms.Form):
    """The four fields of the world state; their rules are `world_apply`'s, not the form's."""

    topics = forms.CharField(
        required=False,
        max_length=10_000,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="What we are talking about now, one per line.",
    )
    project = forms.CharField(required=False, max_length=10_000, label="Active project", strip=True)
    goals = forms.CharField(
        required=False,
        max_length=10_000,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="What you want to achieve, one per line.",
    )
    behaviour = forms.CharField(
        required=False,
        max_length=10_000,
        label="How to answer",
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="How you want me to answer, one instruction per line.",
    )

    @staticmethod
    def values_of(state: WorldState) -> dict[str, str]:
        return {
            "topics": "\n".join(state.topics),
            "project": state.project,
            "goals": "\n".join(state.goals),
            "behaviour": "\n".join(state.behaviour),
        }

    @classmethod
    def for_state(cls, state: WorldState) -> WorldStateForm:
        return cls(initial=cls.values_of(state))

    def operations(self) -> list[dict]:
        """The whole state as set operations (an empty project removes it)."""
        data = self.cleaned_data
        project = data.get("project", "")
        return [
            {"op": "set", "path": "topics", "values": _lines(data.get("topics", ""))},
            {"op": "set", "path": "project", "value": project}
            if project
            else {"op": "remove", "path": "project"},
            {"op": "set", "path": "goals", "values": _lines(data.get("goals", ""))},
            {"op": "set", "path": "behaviour", "values": _lines(data.get("behaviour", ""))},
        ]


class WorldStateAdminForm(WorldStateForm, forms.ModelForm):
    """The admin's editor: the same fields, checked by the same operation rules before saving
    (a whole-list `set` depends on nothing but itself), then saved through `world_apply`."""

    class Meta:
        model = WorldState
        fields = ["owner"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            for name, value in self.values_of(self.instance).items():
                self.initial.setdefault(name, value)

    def clean(self):
        cleaned = super().clean()
        for op in self.operations():
            reason = world_op_parse(op)
            if isinstance(reason, str) and op["path"] not in self.errors:
                self.add_error(op["path"], reason)
        return cleaned
