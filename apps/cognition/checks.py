from __future__ import annotations

from django.core import checks

from apps.core.prompts import PROMPT_PLACEHOLDERS, prompt_path, validate_template


@checks.register()
def check_prompt_templates(app_configs=None, **kwargs):
    errors = []
    for name in PROMPT_PLACEHOLDERS:
        path = prompt_path(name)
        if not path.exists():
            errors.append(checks.Error(f"missing prompt template {path}", id="cognition.E001"))
            continue
        for problem in validate_template(name, path.read_text(encoding="utf-8")):
            errors.append(checks.Error(problem, obj=str(path), id="cognition.E002"))
    return errors
