"""Kept only while apps/cognition/answer.py imports these from here (#12): prompt templates live
in apps/core/prompts.py, the admin's overrides are read by apps.core.selectors.prompt_text."""

from __future__ import annotations

from apps.core.prompts import fill_prompt as fill_prompt
from apps.core.selectors import prompt_text as prompt_text
