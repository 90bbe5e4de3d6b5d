"""The category a clause's words name, in any of the five languages, for a clause no
construction places ("I forgot my umbrella at the office" -> work)."""

from __future__ import annotations

import re

_RELATIVES = (
    "daughter|son|wife|husband|partner|mother|mum|mom|father|dad|sister|brother|girlfriend"
    "|boyfriend|child|children|kids?|grandmother|grandfather|grandma|grandpa|aunt|uncle|cousin"
    "|niece|nephew|fiancée?|friend|boss|colleague|figli[oa]|moglie|marito|madre|padre|sorella"
    "|fratello|fille|fils|femme|mari|mère|père|sœur|frère|tochter|sohn|frau|mann|mutter|vater"
    "|schwester|bruder|hij[oa]|esposa|esposo|hermana|hermano"
)
_PETS = (
    "dog|cat|puppy|kitten|parrot|rabbit|hamster|horse|pet|cane|gatto|chien|chat|hund|katze"
    "|perro|gato"
)
# In this order; a clause that none of them names has no category (`category_of_words`).
_CATEGORY_WORDS = [
    (
        "health",
        r"\b(?:allerg\w*|intoleran\w*|diabet\w*|asthma\w*|coeliac|celiac|vegetarian|vegan"
        r"|pregnan\w*|medication|illness|disease|migraines?|surgery|disabilit\w*|alérg\w*"
        r"|vegetari\w*|végétarien\w*|malattia|maladie|krankheit|enfermedad)\b",
    ),
    (
        "relationships",
        rf"\b(?:{_RELATIVES}|{_PETS}|married|divorced|sposat\w*|marié\w*|verheiratet|casad[oa])s?\b",
    ),
    (
        "work",
        r"\b(?:work\w*|job|office|career|company|employer|client\w*|colleague\w*|school"
        r"|universit\w*|college|degree|stud(?:y|ies|ying|ent)|exams?|thesis|lessons?"
        r"|lavor\w*|ufficio|travail\w*|bureau|arbeit\w*|büro|trabaj\w*|oficina|universi\w*)\b",
    ),
    (
        "places",
        r"\b(?:live[sd]?|living|moved?|city|town|village|country|home|house|flat|città|casa"
        r"|ville|maison|stadt|wohnung|ciudad)\b",
    ),
    ("goals", r"\b(?:want(?:s|ed)? to|plan\w*|goals?|hop(?:e|es|ing) to|aim\w*|dream\w*)\b"),
    (
        "preferences",
        r"\b(?:prefer\w*|lik(?:e|es|ed)|lov(?:e|es|ed)|enjoy\w*|hat(?:e|es|ed)|dislik\w*"
        r"|favou?rite|rather|fan of|tiring|boring|annoying|preferi\w*|préf[eè]r\w*|bevorzug\w*"
        r"|prefier\w*)\b",
    ),
    ("skills", r"\b(?:speak\w*|fluent|skill\w*|learn\w*|can (?:play|code|cook|drive))\b"),
    (
        "experiences",
        r"\b(?:went|visited|travell?ed|trip|holiday|vacation|forgot|lost|met|saw|bought"
        r"|yesterday|last (?:week|month|year|night)|ieri|hier|gestern|ayer)\b",
    ),
    ("knowledge", r"\b(?:know[sn]?|knew|learnt|read about|believes?|facts?)\b"),
]
_COMPILED = [(category, re.compile(words)) for category, words in _CATEGORY_WORDS]


def category_of_words(clause: str) -> str | None:
    """The category a clause's words name, or None when none does ("I collect old stamps").

    No category is a default: a user who lets reflection learn only some categories has a
    fact of no category withheld, not filed under one they allowed.
    """
    folded = clause.casefold()
    for category, words in _COMPILED:
        if words.search(folded):
            return category
    return None
