"""Whether a construction's value is of the right kind: a name is a name, a place a place, an
age a plausible number, a job a job. A value that is not ("call me later", "I live in fear")
makes the construction no fact at all."""

from __future__ import annotations

import re

from apps.language import lemmas, names, occupations, places
from apps.language.detect import ALL_STOPWORDS, STOPWORDS_BY_LANGUAGE
from apps.language.facts.grammar import Grammar
from apps.language.text import word_set

MAX_NAME_WORDS = 3
MAX_PLACE_WORDS = 4
MAX_PLACE_LEADS = 6
MAX_THING_WORDS = 10
# A place typed in lower case is taken only when it is this big: "i live in nantes" is Nantes,
# "i live in hope" no town of that name.
LOWERCASE_PLACE = 50_000
# ... and, when it is also a word of the language ("paura" is a town somewhere), this big.
LOWERCASE_WORD_PLACE = 250_000
_NAME_WORD = re.compile(r"^[^\W\d_]+(?:[-'][^\W\d_]+)*$")
_CALENDAR = word_set(
    """monday tuesday wednesday thursday friday saturday sunday january february march april
    may june july august september october november december lunedì martedì mercoledì
    giovedì venerdì sabato domenica lundi mardi mercredi jeudi vendredi samedi dimanche
    montag dienstag mittwoch donnerstag freitag samstag sonntag lunes martes miércoles
    jueves viernes sábado domingo"""
)
# Words that open a value about the conversation or someone, not a thing: "your", "tu", "ton".
_PRONOUNS_BY = {
    "en": word_set("i me my mine myself you your yours we us our he him his she her they them"
                   " their it its"),
    "it": word_set("io mi me mio mia tu ti te tuo tua noi ci voi lui lei loro"),
    "fr": word_set("je moi mon ma mes toi ton ta tes nous vous il elle ils elles"),
    "de": word_set("ich mich mir mein meine du dich dir dein deine wir uns ihr sie er es"),
    "es": word_set("yo mí mis tú ti tu tus nosotros vosotros él ella ellos ellas"),
}  # fmt: skip
_PRONOUNS = frozenset().union(*_PRONOUNS_BY.values())


def _stopwords(grammar: Grammar) -> frozenset[str]:
    return STOPWORDS_BY_LANGUAGE.get(grammar.code, ALL_STOPWORDS)


def _pronouns(grammar: Grammar) -> frozenset[str]:
    return _PRONOUNS_BY.get(grammar.code, _PRONOUNS)


_FOODS = word_set(
    """meat red pork beef chicken fish seafood shellfish dairy milk cheese eggs egg gluten
    wheat sugar alcohol caffeine coffee nuts peanuts peanut soy sesame lactose bread carbs
    fried sweets meat, carne maiale manzo pollo pesce latticini latte formaggio uova
    glutine zucchero alcol caffè noci arachidi frutti di mare crostacei viande porc bœuf
    boeuf poulet poisson laitages lait fromage œufs oeufs gluten sucre alcool café noix
    arachides cacahuètes fruits de mer fleisch schweinefleisch rindfleisch hähnchen fisch
    meeresfrüchte milch milchprodukte käse eier gluten zucker alkohol kaffee nüsse
    erdnüsse cerdo ternera pollo pescado marisco lácteos leche queso huevos gluten azúcar
    alcohol café nueces cacahuetes maní mariscos"""
)


def cut(value: str, grammar: Grammar) -> str:
    """The value up to where the clause goes on about something else."""
    end = grammar.regex("value_ends").search(value)
    return (value[: end.start()] if end else value).strip(" \"'.,!?")


def _capitalised(word: str) -> bool:
    return word[:1].isupper()


def person_name(value: str, grammar: Grammar, *, strength: str, at_start: bool = False) -> str:
    """The name `value` starts with, or "" when it starts with no name. One to three words of
    letters, none of them a common word of the language ("later", "not", "important").

    `strength` is how surely the construction names someone: "strong" ("my name is"): a given
    name of the list, or a word capitalised as typed that no dictionary lists; "relative"
    ("my daughter Liv"): capitalised as typed, or a listed name that is no ordinary word
    ("said"); "weak" ("call me", "I'm"): capitalised as typed, ending the clause, and a listed
    name or no ordinary word ("call me crazy", "I'm Italian" are not names).
    """
    taken = cut(value, grammar)
    tokens = taken.split()
    if not tokens or len(tokens) > MAX_NAME_WORDS:
        return ""
    if strength == "weak" and taken != value.strip(" .!,"):
        return ""
    typed_lower = taken == taken.lower()
    name = []
    for index, token in enumerate(tokens):
        folded = token.casefold()
        common = (
            not _NAME_WORD.match(token)
            or folded in _stopwords(grammar)
            or folded in _CALENDAR
            or folded in grammar.vague
            or folded in _pronouns(grammar) | occupations.LANGUAGE_NAMES
            or grammar.regex("diets").fullmatch(folded) is not None
            or _compound_of_words(token, grammar)
        )
        capital = _capitalised(token) and not (at_start and index == 0)
        if index and (common or not (capital or (typed_lower and names.is_first_name(token)))):
            # The name ends where a word that is no part of it begins ("Marta si sposa").
            return "" if strength == "weak" else " ".join(name)
        if common or not _name_word(token, grammar, strength=strength, first=index == 0,
                                    capital=capital):  # fmt: skip
            return ""
        name.append(token)
    return " ".join(name)


def _compound_of_words(token: str, grammar: Grammar) -> bool:
    """A hyphenated word with an ordinary word after its first part ("Schalke-Fan",
    "Kaffee-Junkie"), unless every part is a given name ("Jean-Marc", "Anne-Sophie")."""
    parts = token.split("-")
    return any(
        lemmas.is_dictionary_word(part.casefold(), language=grammar.code) for part in parts[1:]
    ) and not all(names.is_first_name(part) for part in parts)


def person_names(value: str, grammar: Grammar) -> str:
    """The names of a relative or of several ("Ines and Mara", "Noa (7) and Eli (4)"), each
    one as `person_name` takes a relative's; "" unless every one is a name."""
    plain_value = re.sub(r"\([^)]*\)", " ", value)
    head = re.split(r"\s*(?:[;:.!?]|\s-\s)", plain_value, maxsplit=1)[0]
    parts = [part for part in re.split(r"\s*,\s*|\s+(?:and|e|et|und|y|&)\s+", head) if part]
    if len(parts) == 1:
        return person_name(value, grammar, strength="relative")
    found = [person_name(part, grammar, strength="relative") for part in parts]
    if not all(found) or any(len(name.split()) > 2 for name in found):
        return ""
    return ", ".join(found)


def _name_word(token: str, grammar: Grammar, *, strength: str, first: bool, capital: bool) -> bool:
    known = names.is_first_name(token)
    if not first:
        return True  # a surname as typed ("Bianchi"), or a second given name
    if strength == "strong":
        return known or capital
    if strength == "weak" and not capital:
        # All in lower case, as many type: a listed name that is no ordinary word ("i'm jess").
        return known and not lemmas.is_dictionary_word(token.casefold(), language=grammar.code)
    ordinary = lemmas.is_dictionary_word(token.casefold(), language=grammar.code)
    if strength == "relative" and capital:
        return True
    return (known or capital) and not ordinary or (known and capital)


def place(value: str, grammar: Grammar, *, lowercase_message: bool) -> tuple[str, str]:
    """(the place `value` names, the value up to it) or ("", ""): a city, country or region,
    after at most a few words that say where about it ("a small village near Bergen")."""
    tokens = value.split()
    for start in range(min(len(tokens), MAX_PLACE_LEADS + 1)):
        lead = tokens[:start]
        if any(word.casefold().strip(",") not in grammar.place_leads for word in lead):
            return "", ""
        for size in range(min(MAX_PLACE_WORDS, len(tokens) - start), 0, -1):
            span = tokens[start : start + size]
            name = re.sub(r"^(?:d'|l')", "", " ".join(span).strip(" ,.!?;:()\"'"), flags=re.I)
            folded = name.casefold()
            if not name or folded in _stopwords(grammar) or folded in grammar.place_leads:
                continue
            if not places.is_place(name):
                spelt = re.sub(r"ue|oe|ae", lambda m: {"ue": "ü", "oe": "ö", "ae": "ä"}[m[0]], name)
                if grammar.code != "de" or not places.is_place(spelt):
                    continue
            first = re.sub(r"^(?:d'|l')", "", span[0].strip("\"'("), flags=re.I)
            if lowercase_message:
                # Typed all in lower case: capitals say nothing, the town's size does.
                people = places.population(name)
                small = size == 1 and (
                    people < LOWERCASE_PLACE
                    or (
                        people < LOWERCASE_WORD_PLACE
                        and lemmas.is_dictionary_word(folded, language=grammar.code)
                    )
                )
            else:
                small = not _capitalised(first) and first.casefold() not in grammar.articles
            if small:
                continue
            return name, " ".join([*lead, name])
    return "", ""


def age(value: str, *, of_user: bool) -> str:
    if not value.isdigit():
        return ""
    years = int(value)
    return value if (5 if of_user else 0) <= years <= 110 else ""


def _without_article(tokens: list[str], grammar: Grammar) -> list[str]:
    while tokens and (
        tokens[0].casefold() in grammar.articles or tokens[0].casefold() in ("l'", "un'")
    ):
        tokens = tokens[1:]
    if tokens and re.match(r"^(?:l'|un')", tokens[0], re.IGNORECASE):
        tokens = [tokens[0][tokens[0].index("'") + 1 :], *tokens[1:]]
    return tokens


# What a job's name keeps after a preposition: "prof de physique", "teacher of English".
_OF = word_set("of de d' des du di del della dei degli delle von vom für")


def job(value: str, grammar: Grammar, *, explicit: bool) -> str:
    tokens = _without_article(cut(value, grammar).split(), grammar)
    if not tokens or tokens[0].casefold() in _pronouns(grammar) | grammar.preps:
        return ""
    tokens = tokens[:1] + _until_prep(tokens[1:], grammar.preps - _OF)
    if occupations.is_job(tokens, language=grammar.code, stated_as_job=explicit):
        return " ".join(tokens)
    return ""


def _until_prep(tokens: list[str], preps: frozenset[str]) -> list[str]:
    at = next((i for i, token in enumerate(tokens) if token.casefold() in preps), None)
    return tokens[:at] if at is not None else tokens


def taught(value: str, grammar: Grammar) -> str:
    """What "I teach …" names: a subject, not "my kids" or "at home"."""
    tokens = _until_prep(cut(value, grammar).split(), grammar.preps)
    if not tokens or len(tokens) > 3 or tokens[0].casefold() in _pronouns(grammar) | ALL_STOPWORDS:
        return ""
    return " ".join(tokens)


# The fields people say they work in ("I work in marketing"); a place or a company is no field.
_FIELDS = word_set(
    """marketing sales finance banking insurance retail hospitality healthcare tech it
    software education construction logistics advertising publishing consulting accounting
    law hr recruitment media journalism pharma pharmaceuticals research engineering
    manufacturing telecoms government admin administration design fashion catering nursing
    property events tourism aviation security fintech biotech gaming ecommerce e-commerce
    pr communications policy academia data cybersecurity"""
)
_FIELD_PHRASES = ("real estate", "social care", "social work", "customer service",
                  "customer support", "the nhs", "the civil service", "the public sector",
                  "the private sector", "film", "tv", "music industry")  # fmt: skip


def field(value: str, grammar: Grammar) -> str:
    """The field "I work in …" names ("marketing", "real estate", "tech"), or ""."""
    taken = cut(value, grammar)
    folded = taken.casefold()
    for phrase in _FIELD_PHRASES:
        if folded == phrase or folded.startswith(phrase + " "):
            return taken[: len(phrase)]
    tokens = taken.split()
    # "it" typed in lower case is the pronoun ("I work in it"), "IT" the field.
    if tokens and len(tokens) <= 2 and tokens[0].casefold() in _FIELDS and tokens[0] != "it":
        return taken
    return ""


_TIMES = word_set(
    """home night nights day days morning mornings evening evenings weekend weekends moment
    myself yourself free fun peanuts now present minute hour week month year casa notte
    giorno mattina sera maison nuit jour matin soir hause nacht tag morgen abend noche día
    mañana tarde"""
)


def organisation(value: str, grammar: Grammar, *, at_start: bool = False) -> str:
    """An employer: a name as typed ("Google", "the NHS", "Intesa Sanpaolo", "l'hôpital
    Necker") or a definite noun phrase ("the city council"); never an indefinite one ("a
    startup"), a time or a pronoun ("at night", "for myself")."""
    tokens = cut(value, grammar).split()
    tokens = tokens[:1] + _until_prep(tokens[1:], grammar.preps - grammar.articles - _OF)
    while tokens and tokens[-1].casefold() in _OF:
        tokens = tokens[:-1]
    if not tokens or len(tokens) > 5:
        return ""
    folded = [token.casefold() for token in tokens]
    if any(word in _TIMES or word in _pronouns(grammar) for word in folded):
        return ""
    if folded[0] in grammar.indefinite:
        return ""
    named = [
        token
        for index, token in enumerate(tokens)
        if _capitalised(re.sub(r"^(?:l'|d')", "", token)) and not (at_start and index == 0)
    ]
    # German writes every noun with a capital: a name there is one without an article ("bei
    # Siemens", not "bei der Bank"), or of two words, or no dictionary word.
    bare = grammar.code == "de" and named[:1] == tokens[:1] and folded[0] not in grammar.articles
    if named and (grammar.code != "de" or bare or len(named) > 1 or _not_a_word(named[0], grammar)):
        return " ".join(tokens)
    if folded[0] in grammar.articles and len(tokens) > 1 and grammar.code != "de":
        return " ".join(tokens)
    return ""


def _not_a_word(token: str, grammar: Grammar) -> bool:
    bare = re.sub(r"^(?:l'|d')", "", token, flags=re.I)
    return bare.isupper() or not lemmas.is_dictionary_word(bare, language=grammar.code)


_NOT_SUBJECTS = word_set(
    """hard a lot lots every all late abroad online alone together at for to with how when
    there here tonight today tomorrow again more less too much non molto tanto sempre
    beaucoup trop toujours viel immer mucho siempre"""
)


def subject(value: str, grammar: Grammar) -> str:
    tokens = cut(value, grammar).split()
    tokens = tokens[:1] + _until_prep(tokens[1:], grammar.preps)
    if not tokens or len(tokens) > 4:
        return ""
    first = tokens[0].casefold()
    if first in _NOT_SUBJECTS or first in _pronouns(grammar) or first in grammar.vague:
        return ""
    if first in ALL_STOPWORDS and first not in grammar.articles:
        return ""
    return " ".join(tokens)


def spoken_languages(value: str, grammar: Grammar) -> str:
    named = occupations.languages_named(re.findall(r"[^\W\d_]+", value))
    return ", ".join(named)


# What a chat says of itself, not of the user: "I love the idea", "mi piace la risposta".
_CONVERSATION = word_set(
    """idea ideas way answer answers reply replies response suggestion suggestions explanation
    question point tip tips advice help u ya idée réponse conseil explication proposition idee
    antwort rat vorschlag erklärung idea risposta consiglio spiegazione proposta respuesta
    consejo explicación propuesta"""
)
# Words that point at this exchange's own thing ("the idea", "your answer", "questa risposta"):
# "I dislike long answers" is a standing preference, "I love the idea" is not.
_THIS = word_set(
    """the this that your these those it il lo la le questa questo tua tuo ce cet cette ta ton
    tes der die das diese dieser deine dein el esta este tu tus"""
)


def _of_this_chat(words: list[str]) -> bool:
    """Does a value name something of this conversation ("the idea", "that", "idea")?"""
    if words and words[0] in _CONVERSATION:
        return len(words) == 1 or words[1] not in ("in", "with", "about", "of")
    return len(words) > 1 and words[0] in _THIS and words[1] in _CONVERSATION


# "my coffee black" is the user's; "to think", "to say" are how a sentence goes on.
_OWN = word_set("my mi mes mis meine mia mio")
_SAYING = word_set(
    "think say know ask see believe hear pensare dire penser denken sagen pensar decir"
)


def thing(value: str, grammar: Grammar) -> str:
    """What a user likes or dislikes: a noun phrase or an activity, not a word that stands for
    something said before ("it", "that") or for the conversation ("your answer", "you")."""
    taken = cut(value, grammar)
    tokens = taken.split()
    if not tokens or len(tokens) > MAX_THING_WORDS:
        return ""
    first = tokens[0].casefold().strip("\"'")
    if first in grammar.vague or first in _pronouns(grammar) - _OWN:
        return ""
    if first in grammar.preps - {"to", "a", "à", "de", "di", "zu"}:
        return ""
    if _of_this_chat([token.casefold().strip(",.!") for token in tokens[:3]]):
        return ""
    if first in ("to", "a", "de", "di", "zu") and len(tokens) > 1:
        second = tokens[1].casefold()
        if second in grammar.vague or second in _SAYING:
            return ""
    return taken


def food(value: str, grammar: Grammar) -> str:
    """The food or drink of a diet ("meat", "red meat", "dairy"), as typed."""
    tokens = _without_article(cut(value, grammar).split(), grammar)
    for size in (3, 2, 1):
        words = [token.casefold().strip(",.") for token in tokens[:size]]
        if words and words[-1] in _FOODS and all(w in _FOODS or w.isalpha() for w in words):
            return " ".join(tokens[:size]).strip(",.")
    return ""


def demonym(value: str, grammar: Grammar) -> str:
    """A nationality as the user wrote it ("marocchino", "belge", "peruano")."""
    tokens = cut(value, grammar).split()
    if tokens and occupations.is_demonym(tokens[0]):
        return tokens[0]
    return ""


def condition(value: str, grammar: Grammar) -> str:
    taken = cut(value, grammar)
    tokens = taken.split()
    if not tokens or len(tokens) > 6 or tokens[0].casefold() in grammar.vague:
        return ""
    return taken
