"""The production password hasher with fewer rounds, for the test process only."""

from __future__ import annotations

from django.contrib.auth.hashers import PBKDF2PasswordHasher


class FewRoundsPBKDF2PasswordHasher(PBKDF2PasswordHasher):
    """PBKDF2-SHA256 as in production, at a thousand rounds instead of over a million.

    A hash reads `pbkdf2_sha256$<rounds>$<salt>$<hash>`: the web server of the browser tests
    (production settings) verifies these with its own hasher and re-hashes them at full rounds on
    login, as it does any older hash. About a second of CPU per user created or login checked on
    a loaded 2-core machine, hundreds of times a run, is what this saves.
    """

    iterations = 1_000
