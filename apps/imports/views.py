"""The import page: upload another assistant's export, watch it become conversations."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from apps.imports import selectors, services
from apps.imports.formats import MAX_IMPORT_BYTES, ImportFileError


class ExportUploadForm(forms.Form):
    file = forms.FileField(label="Export file (.json or .zip)")


@require_GET
def import_page(request):
    # A visit is also when an import whose worker restarted mid-way is picked up again.
    services.imports_resume_stalled(owner=request.user)
    return render(
        request,
        "imports/page.html",
        {"form": ExportUploadForm(), "imports": selectors.imports_for(user=request.user)},
    )


@require_POST
def import_upload(request):
    form = ExportUploadForm(request.POST, request.FILES)
    if not form.is_valid():
        messages.error(request, "Choose an export file to import.")
        return redirect("imports:page")
    upload = form.cleaned_data["file"]
    try:
        if upload.size > MAX_IMPORT_BYTES:
            raise ImportFileError(
                f"The file is {upload.size / 1024 / 1024:,.0f} MB; the limit is "
                f"{MAX_IMPORT_BYTES // 1024 // 1024} MB."
            )
        started, export = services.import_start(
            user=request.user, data=upload.read(), filename=upload.name
        )
    except ImportFileError as exc:
        messages.error(request, f"Nothing was imported: {exc}")
        return redirect("imports:page")
    if export is None:
        when = started.created_at.strftime("%Y-%m-%d %H:%M")
        messages.info(request, f"This file was already imported on {when}; nothing was added.")
        return redirect("imports:page")
    left_out = ""
    if export.skipped:
        left_out = (
            f" ({export.skipped} could not be read and "
            f"{'is' if export.skipped == 1 else 'are'} left out: {export.first_problem})"
        )
    messages.success(
        request,
        f"Importing {started.conversations_total} {started.get_source_display()} "
        f"conversations{left_out}. You can leave this page: the import goes on in the "
        "background.",
    )
    return redirect("imports:page")
