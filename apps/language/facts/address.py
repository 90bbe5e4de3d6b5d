"""A memory as the user reads it: said to them ("You live in Ghent"), in its own language.

Memories are stored as the model is given them, of "the user" ("The user lives in Ghent",
apps.language.facts.describe); the pages that show a user their own memories say them in the
second person. A memory written from a type's template in Italian, French, German or Spanish
is matched against that template and written from its second-person twin (tu, vous, du, tú,
as each language's products address people); English is turned by its grammar
(apps.language.english.second_person), which also covers the user's own clauses. Anything
else (an admin's note, a memory about someone else) is shown as it is.
"""

from __future__ import annotations

import re
from functools import cache

from apps.language.english import second_person
from apps.language.facts.describe import TEMPLATES
from apps.language.text import word_set

# Each third-person template's twin, said to the user; {R} is the relative with "your".
SECOND_PERSON = {
    "it": {
        "name": "Il tuo nome è {v}",
        "age": "Hai {v} anni",
        "home": "Vivi a {p}",
        "origin": "Vieni da {p}",
        "occupation": "Lavori come {v}",
        "teach": "Insegni {v}",
        "employer": "Lavori presso {v}",
        "studies": "Studi {v}",
        "languages": "Parli {v}",
        "likes": "Ti piace {v}",
        "dislikes": "Non ti piace {v}",
        "answers": "Preferisci risposte {v}",
        "diet": "Non mangi {v}",
        "diet_is": "Sei {v}",
        "health": "Sei allergico a {v}",
        "health_intolerant": "Sei intollerante a {v}",
        "health_has": "Hai {v}",
        "health_is": "Sei {v}",
        "relative_name": "{R} si chiama {v}",
        "relative": "{R}",
        "answers_whole": "Preferisci {v}",
        "answers_without": "Preferisci risposte senza {v}",
        "demonym": "Sei {v}",
        "relative_names": "{R} si chiamano {v}",
        "said": "Dici: «{c}»",
    },
    "fr": {
        "name": "Votre nom est {v}",
        "age": "Vous avez {v} ans",
        "home": "Vous habitez à {p}",
        "origin": "Vous venez de {p}",
        "occupation": "Vous travaillez comme {v}",
        "teach": "Vous enseignez {v}",
        "employer": "Vous travaillez chez {v}",
        "studies": "Vous étudiez {v}",
        "languages": "Vous parlez {v}",
        "likes": "Vous aimez {v}",
        "dislikes": "Vous n'aimez pas {v}",
        "answers": "Vous préférez des réponses {v}",
        "diet": "Vous ne mangez pas {v}",
        "diet_is": "Vous êtes {v}",
        "health": "Vous êtes allergique à {v}",
        "health_intolerant": "Vous êtes intolérant à {v}",
        "health_has": "Vous avez {v}",
        "health_is": "Vous êtes {v}",
        "relative_name": "{R} s'appelle {v}",
        "relative": "{R}",
        "answers_whole": "Vous préférez {v}",
        "answers_without": "Vous préférez des réponses sans {v}",
        "demonym": "Vous êtes {v}",
        "relative_names": "{R} s'appellent {v}",
        "said": "Vous dites : « {c} »",
    },
    "de": {
        "name": "Dein Name ist {v}",
        "age": "Du bist {v} Jahre alt",
        "home": "Du wohnst in {p}",
        "origin": "Du kommst aus {p}",
        "occupation": "Du arbeitest als {v}",
        "teach": "Du unterrichtest {v}",
        "employer": "Du arbeitest bei {v}",
        "studies": "Du studierst {v}",
        "languages": "Du sprichst {v}",
        "likes": "Du magst {v}",
        "dislikes": "Du magst {v} nicht",
        "answers": "Du bevorzugst Antworten {v}",
        "diet": "Du isst kein {v}",
        "diet_is": "Du bist {v}",
        "health": "Du bist allergisch gegen {v}",
        "health_intolerant": "Du verträgst kein {v}",
        "health_has": "Du hast {v}",
        "health_is": "Du bist {v}",
        "relative_name": "{R} heißt {v}",
        "relative": "{R}",
        "answers_whole": "Du bevorzugst {v}",
        "answers_without": "Du bevorzugst Antworten ohne {v}",
        "demonym": "Du bist {v}",
        "relative_names": "{R} heißen {v}",
        "said": "Du sagst: „{c}“",
    },
    "es": {
        "name": "Tu nombre es {v}",
        "age": "Tienes {v} años",
        "home": "Vives en {p}",
        "origin": "Eres de {p}",
        "occupation": "Trabajas como {v}",
        "teach": "Enseñas {v}",
        "employer": "Trabajas en {v}",
        "studies": "Estudias {v}",
        "languages": "Hablas {v}",
        "likes": "Te gusta {v}",
        "dislikes": "No te gusta {v}",
        "answers": "Prefieres respuestas {v}",
        "diet": "No comes {v}",
        "diet_is": "Eres {v}",
        "health": "Eres alérgico a {v}",
        "health_intolerant": "Eres intolerante a {v}",
        "health_has": "Tienes {v}",
        "health_is": "Eres {v}",
        "relative_name": "{R} se llama {v}",
        "relative": "{R}",
        "answers_whole": "Prefieres {v}",
        "answers_without": "Prefieres respuestas sin {v}",
        "demonym": "Eres {v}",
        "relative_names": "{R} se llaman {v}",
        "said": "Dices: «{c}»",
    },
}
# A relative's article, and the words that say "your" in its place ("La figlia" -> "La tua
# figlia", "Die Tochter" -> "Deine Tochter"). A relative with another article (the Italian
# "L'", which hides its gender) keeps the memory as it is.
_YOUR = {
    "it": {"il": "Il tuo", "lo": "Il tuo", "la": "La tua", "i": "I tuoi", "gli": "I tuoi",
           "le": "Le tue"},
    "fr": {"le": "Votre", "la": "Votre", "l'": "Votre", "les": "Vos"},
    "de": {"der": "Dein", "das": "Dein", "die": "Deine"},
    "es": {"el": "Tu", "la": "Tu", "los": "Tus", "las": "Tus"},
}  # fmt: skip
_RELATIVE = re.compile(r"(?P<article>\w+'|\w+ )(?P<word>\S.*)")
# Italian says "tua figlia", with no article, of one member of the family.
_ITALIAN_FAMILY = word_set(
    """padre madre figlio figlia fratello sorella marito moglie nonno nonna zio zia cugino
    cugina nipote suocero suocera cognato cognata"""
)


def addressed(description: str) -> str:
    """`description` said to the user it is about (see the module's docstring)."""
    for language, patterns in _patterns().items():
        for key, pattern in patterns:
            found = pattern.fullmatch(description)
            if found is None:
                continue
            values = found.groupdict()
            rest = values.pop("rest", "")
            if "R" in values:
                values["R"] = _your(language, values["R"])
                if values["R"] is None:
                    return description
            return SECOND_PERSON[language][key].format(**values) + rest
    return second_person(description)


def _your(language: str, relative: str) -> str | None:
    found = _RELATIVE.fullmatch(relative)
    if found is None:
        return None
    your = _YOUR[language].get(found["article"].strip().casefold())
    if your is None:
        return None
    if language == "it" and found["word"].casefold() in _ITALIAN_FAMILY:
        your = your.split()[-1].capitalize()
    return f"{your} {found['word']}"


@cache
def _patterns() -> dict[str, list[tuple[str, re.Pattern]]]:
    """Each language's templates as patterns that capture their values; "relative" is the
    start of a sentence whose rest is the user's own words about the relative."""
    patterns = {}
    for language in SECOND_PERSON:
        patterns[language] = []
        for key, template in TEMPLATES[language].items():
            pattern = re.sub(
                r"\\\{(\w)\\\}",
                lambda slot: rf"(?P<{slot[1]}>.+?)",
                re.escape(template),
            )
            if key == "relative":
                pattern += r"(?P<rest>(?:,|\s).*)?"
            patterns[language].append((key, re.compile(pattern, re.DOTALL)))
        # The longer templates first: "relative_name" before the "relative" it starts with.
        patterns[language].sort(key=lambda item: item[0] == "relative")
    return patterns
