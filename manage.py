#!/usr/bin/env python
"""Django's command-line utility, with the embedded servers started for commands that need them."""

from __future__ import annotations

import os
import sys

# Commands that manage the embedded servers themselves, or need no database at all.
SELF_MANAGED = {"up", "llm_stub", "help", "--help", "-h", "version", "--version", "makemigrations"}


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "thalamus_site.settings")
    from django.core.management import execute_from_command_line

    from apps.core import embedded

    command = sys.argv[1] if len(sys.argv) > 1 else "help"
    if command in SELF_MANAGED:
        execute_from_command_line(sys.argv)
        return
    try:
        embedded.acquire()
    except embedded.EmbeddedError as exc:
        sys.exit(f"thalamus: {exc}")
    try:
        execute_from_command_line(sys.argv)
    finally:
        embedded.release()


if __name__ == "__main__":
    main()
