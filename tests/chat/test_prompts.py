from __future__ import annotations

import pytest

from apps.cognition.checks import check_prompt_templates
from apps.core import prompts
from apps.core.selectors import prompt_text


def test_the_shipped_prompts_pass_the_system_check():
    assert check_prompt_templates() == []


def _copy_shipped_prompts(tmp_path, settings):
    (tmp_path / "prompts").mkdir()
    for name in prompts.PROMPT_PLACEHOLDERS:
        shipped = prompts.prompt_path(name).read_text(encoding="utf-8")
        (tmp_path / "prompts" / f"{name}.txt").write_text(shipped, encoding="utf-8")
    settings.BASE_DIR = tmp_path


def test_an_unknown_placeholder_fails_the_check(tmp_path, settings):
    _copy_shipped_prompts(tmp_path, settings)
    (tmp_path / "prompts" / "answer.txt").write_text("{{date}} {{user_name}} {{memory}} {{mood}}")
    errors = check_prompt_templates()
    assert [e.id for e in errors] == ["cognition.E002"]
    assert "{{mood}}" in errors[0].msg


def test_a_broken_prompt_stops_start_up_through_the_system_checks(tmp_path, settings):
    from django.core.management import call_command
    from django.core.management.base import SystemCheckError

    _copy_shipped_prompts(tmp_path, settings)
    (tmp_path / "prompts" / "answer.txt").write_text("{{date}} {{user_name}} {{memory}} {{mood}}")
    # `check` runs every registered check, as `up` and the server do before they start.
    with pytest.raises(SystemCheckError, match=r"cognition\.E002.*\{\{mood\}\}"):
        call_command("check")


def test_a_missing_placeholder_fails_the_check(tmp_path, settings):
    _copy_shipped_prompts(tmp_path, settings)
    (tmp_path / "prompts" / "answer.txt").write_text("{{date}} {{user_name}}")
    assert "lacks {{memory}}" in check_prompt_templates()[0].msg


@pytest.mark.django_db  # an admin's override in the database wins over the file
def test_filling_a_template_needs_every_placeholder():
    text = prompts.fill_prompt("title", prompt_text("title"), exchange="user: hi")
    assert "user: hi" in text and "{{" not in text
    with pytest.raises(prompts.PromptError):
        prompts.fill_prompt("title", prompt_text("title"))
