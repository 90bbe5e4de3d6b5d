"""Names for the admin's inputs that Django leaves without a label: the fields of a tabular
inline (labelled only by their column's heading) and the date and time halves of a split
date-time field. A screen reader reads an unlabelled input as "edit text"."""

from __future__ import annotations

from django import forms
from django.forms.models import BaseInlineFormSet


def label_inputs(field: forms.Field, name: str) -> None:
    """Give `field`'s input, or each half of a split one, `name` as its accessible name."""
    widget = field.widget
    parts = getattr(widget, "widgets", None)
    if parts and len(parts) == 2 and isinstance(field, forms.SplitDateTimeField):
        parts[0].attrs.setdefault("aria-label", f"{name}: date")
        parts[1].attrs.setdefault("aria-label", f"{name}: time")
    else:
        widget.attrs.setdefault("aria-label", name)


class LabelledInlineFormSet(BaseInlineFormSet):
    """A tabular inline's formset whose every input is named after its column."""

    def add_fields(self, form, index):
        super().add_fields(form, index)
        for field in form.fields.values():
            label_inputs(field, str(field.label))


class LabelledSplitDateTimes:
    """A ModelAdmin mixin: each half of a split date-time field is named."""

    def formfield_for_dbfield(self, db_field, request, **kwargs):
        formfield = super().formfield_for_dbfield(db_field, request, **kwargs)
        if isinstance(formfield, forms.SplitDateTimeField):
            label_inputs(formfield, str(formfield.label))
        return formfield
