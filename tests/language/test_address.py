"""Memories said to the user they are about, in the language they are stored in."""

from __future__ import annotations

import pytest

from apps.language.english import second_person, third_person
from apps.language.facts.address import SECOND_PERSON, addressed
from apps.language.facts.describe import TEMPLATES

# How each language names "the user" in a stored memory.
THE_USER = {"en": "user", "it": "utente", "fr": "utilisateur", "de": "Nutzer", "es": "usuario"}
RELATIVE = {"en": "daughter", "it": "La figlia", "fr": "La fille", "de": "Die Tochter",
            "es": "La hija"}  # fmt: skip


@pytest.mark.parametrize(
    ("stored", "shown"),
    [
        ("The user lives in Ghent", "You live in Ghent"),
        ("The user's name is Ana", "Your name is Ana"),
        ("The user is 34 years old", "You are 34 years old"),
        ("The user has a cat named Miso", "You have a cat named Miso"),
        ("The user does not eat meat", "You do not eat meat"),
        ("The user studies law", "You study law"),
        ("The user teaches maths", "You teach maths"),
        ("The user really likes jazz", "You really like jazz"),
        ("The user always goes hiking on Sundays", "You always go hiking on Sundays"),
        ("The user was born in Rome", "You were born in Rome"),
        ("The user gave up meat two years ago", "You gave up meat two years ago"),
        ("The user can't stand coriander", "You can't stand coriander"),
        ("The user lives with their wife", "You live with your wife"),
        ("The user's daughter Liv can't have peanuts", "Your daughter Liv can't have peanuts"),
        ("Sofia says the user cooks well", "Sofia says you cook well"),
        ("Sofia visits the user every week", "Sofia visits you every week"),
        ("It is the user's birthday tomorrow", "It is your birthday tomorrow"),
        # Not about the user, or no verb to be sure of: as it is.
        ("Alice keeps bees in Turin", "Alice keeps bees in Turin"),
        ("Water boils at 100 °C", "Water boils at 100 °C"),
        ("The user, who loves tea, lives in Rome", "The user, who loves tea, lives in Rome"),
        ("L'utente vive a Torino", "Vivi a Torino"),
        ("All'utente non piace il caffè", "Non ti piace il caffè"),
        ("La figlia dell'utente si chiama Liv", "Tua figlia si chiama Liv"),
        ("Il cane dell'utente si chiama Rex", "Il tuo cane si chiama Rex"),
        ("L'utilisateur habite à Gand", "Vous habitez à Gand"),
        ("La fille de l'utilisateur, Liv, est allergique", "Votre fille, Liv, est allergique"),
        ("Der Name des Nutzers ist Ana", "Dein Name ist Ana"),
        ("Der Nutzer mag Jazz nicht", "Du magst Jazz nicht"),
        ("Die Kinder des Nutzers heißen Ana, Ben", "Deine Kinder heißen Ana, Ben"),
        ("El usuario vive en Gante", "Vives en Gante"),
        ("Al usuario le gusta el jazz", "Te gusta el jazz"),
        ("Los hijos del usuario se llaman Ana, Luis", "Tus hijos se llaman Ana, Luis"),
    ],
)
def test_a_memory_is_said_to_its_user(stored, shown):
    assert addressed(stored) == shown


@pytest.mark.parametrize("language", sorted(TEMPLATES))
def test_every_template_of_every_language_has_its_second_person(language):
    if language != "en":
        assert SECOND_PERSON[language].keys() == TEMPLATES[language].keys()
    for key, template in TEMPLATES[language].items():
        stored = template.format(
            v="Ana", p="Gent", a="a", c="ciao", R=RELATIVE[language], r=RELATIVE[language]
        )
        if key == "relative":
            stored += ", Liv, " + {"en": "can't have peanuts"}.get(language, "42")
        shown = addressed(stored)
        assert THE_USER[language] not in shown, (key, stored, shown)
        kept = [value for value in ("Ana", "Gent", "Liv", "ciao") if value in stored]
        assert kept and all(value in shown for value in kept), (key, stored, shown)


@pytest.mark.parametrize(
    "said",
    ["I live in Turin", "I really like jazz", "I am allergic to nuts", "My son plays chess",
     "I think my sister is right", "I have been to Japan", "I teach maths"],
)  # fmt: skip
def test_a_clause_made_third_person_comes_back_in_the_second(said):
    shown = second_person(third_person(said))
    assert "user" not in shown and shown.split()[0] in ("You", "Your")
