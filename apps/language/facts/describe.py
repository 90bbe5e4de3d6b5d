"""A fact as a memory reads it: in the language the user wrote it in, of "the user".

English keeps the user's own clause in the third person where it starts with them ("I gave up
meat two years ago" -> "The user gave up meat two years ago", apps.language.english); a fact
with one value, and every fact in the other languages, is written from its type's template.
"""

from __future__ import annotations

import re

from apps.language.english import third_person
from apps.language.facts.clauses import Fact
from apps.language.text import word_set

TEMPLATES = {
    "en": {
        "name": "The user's name is {v}",
        "age": "The user is {v} years old",
        "home": "The user lives in {p}",
        "origin": "The user is from {p}",
        "occupation": "The user works as {a} {v}",
        "teach": "The user teaches {v}",
        "field": "The user works in {v}",
        "employer": "The user works at {v}",
        "studies": "The user studies {v}",
        "languages": "The user speaks {v}",
        "likes": "The user likes {v}",
        "dislikes": "The user dislikes {v}",
        "answers": "The user prefers answers {v}",
        "diet": "The user does not eat {v}",
        "diet_is": "The user is {v}",
        "health": "The user is allergic to {v}",
        "health_intolerant": "The user is intolerant to {v}",
        "health_has": "The user has {v}",
        "health_is": "The user is {v}",
        "relative_name": "The user's {r} is called {v}",
        "relative": "The user's {r}",
        "answers_whole": "The user prefers {v}",
        "answers_without": "The user prefers answers without {v}",
        "demonym": "The user is {v}",
        "relative_names": "The user's {r} are called {v}",
        "said": "The user says: “{c}”",
    },
    "it": {
        "name": "Il nome dell'utente è {v}",
        "age": "L'utente ha {v} anni",
        "home": "L'utente vive a {p}",
        "origin": "L'utente viene da {p}",
        "occupation": "L'utente lavora come {v}",
        "teach": "L'utente insegna {v}",
        "employer": "L'utente lavora presso {v}",
        "studies": "L'utente studia {v}",
        "languages": "L'utente parla {v}",
        "likes": "All'utente piace {v}",
        "dislikes": "All'utente non piace {v}",
        "answers": "L'utente preferisce risposte {v}",
        "diet": "L'utente non mangia {v}",
        "diet_is": "L'utente è {v}",
        "health": "L'utente è allergico a {v}",
        "health_intolerant": "L'utente è intollerante a {v}",
        "health_has": "L'utente ha {v}",
        "health_is": "L'utente è {v}",
        "relative_name": "{R} dell'utente si chiama {v}",
        "relative": "{R} dell'utente",
        "answers_whole": "L'utente preferisce {v}",
        "answers_without": "L'utente preferisce risposte senza {v}",
        "demonym": "L'utente è {v}",
        "relative_names": "{R} dell'utente si chiamano {v}",
        "said": "L'utente dice: «{c}»",
    },
    "fr": {
        "name": "Le nom de l'utilisateur est {v}",
        "age": "L'utilisateur a {v} ans",
        "home": "L'utilisateur habite à {p}",
        "origin": "L'utilisateur vient de {p}",
        "occupation": "L'utilisateur travaille comme {v}",
        "teach": "L'utilisateur enseigne {v}",
        "employer": "L'utilisateur travaille chez {v}",
        "studies": "L'utilisateur étudie {v}",
        "languages": "L'utilisateur parle {v}",
        "likes": "L'utilisateur aime {v}",
        "dislikes": "L'utilisateur n'aime pas {v}",
        "answers": "L'utilisateur préfère des réponses {v}",
        "diet": "L'utilisateur ne mange pas {v}",
        "diet_is": "L'utilisateur est {v}",
        "health": "L'utilisateur est allergique à {v}",
        "health_intolerant": "L'utilisateur est intolérant à {v}",
        "health_has": "L'utilisateur a {v}",
        "health_is": "L'utilisateur est {v}",
        "relative_name": "{R} de l'utilisateur s'appelle {v}",
        "relative": "{R} de l'utilisateur",
        "answers_whole": "L'utilisateur préfère {v}",
        "answers_without": "L'utilisateur préfère des réponses sans {v}",
        "demonym": "L'utilisateur est {v}",
        "relative_names": "{R} de l'utilisateur s'appellent {v}",
        "said": "L'utilisateur dit : « {c} »",
    },
    "de": {
        "name": "Der Name des Nutzers ist {v}",
        "age": "Der Nutzer ist {v} Jahre alt",
        "home": "Der Nutzer wohnt in {p}",
        "origin": "Der Nutzer kommt aus {p}",
        "occupation": "Der Nutzer arbeitet als {v}",
        "teach": "Der Nutzer unterrichtet {v}",
        "employer": "Der Nutzer arbeitet bei {v}",
        "studies": "Der Nutzer studiert {v}",
        "languages": "Der Nutzer spricht {v}",
        "likes": "Der Nutzer mag {v}",
        "dislikes": "Der Nutzer mag {v} nicht",
        "answers": "Der Nutzer bevorzugt Antworten {v}",
        "diet": "Der Nutzer isst kein {v}",
        "diet_is": "Der Nutzer ist {v}",
        "health": "Der Nutzer ist allergisch gegen {v}",
        "health_intolerant": "Der Nutzer verträgt kein {v}",
        "health_has": "Der Nutzer hat {v}",
        "health_is": "Der Nutzer ist {v}",
        "relative_name": "{R} des Nutzers heißt {v}",
        "relative": "{R} des Nutzers",
        "answers_whole": "Der Nutzer bevorzugt {v}",
        "answers_without": "Der Nutzer bevorzugt Antworten ohne {v}",
        "demonym": "Der Nutzer ist {v}",
        "relative_names": "{R} des Nutzers heißen {v}",
        "said": "Der Nutzer sagt: „{c}“",
    },
    "es": {
        "name": "El nombre del usuario es {v}",
        "age": "El usuario tiene {v} años",
        "home": "El usuario vive en {p}",
        "origin": "El usuario es de {p}",
        "occupation": "El usuario trabaja como {v}",
        "teach": "El usuario enseña {v}",
        "employer": "El usuario trabaja en {v}",
        "studies": "El usuario estudia {v}",
        "languages": "El usuario habla {v}",
        "likes": "Al usuario le gusta {v}",
        "dislikes": "Al usuario no le gusta {v}",
        "answers": "El usuario prefiere respuestas {v}",
        "diet": "El usuario no come {v}",
        "diet_is": "El usuario es {v}",
        "health": "El usuario es alérgico a {v}",
        "health_intolerant": "El usuario es intolerante a {v}",
        "health_has": "El usuario tiene {v}",
        "health_is": "El usuario es {v}",
        "relative_name": "{R} del usuario se llama {v}",
        "relative": "{R} del usuario",
        "answers_whole": "El usuario prefiere {v}",
        "answers_without": "El usuario prefiere respuestas sin {v}",
        "demonym": "El usuario es {v}",
        "relative_names": "{R} del usuario se llaman {v}",
        "said": "El usuario dice: «{c}»",
    },
}
# The words the templates add to a user's own words, for the check that a memory of theirs
# says nothing they did not (apps.memory.support).
TEMPLATE_WORDS = frozenset(
    word
    for templates in TEMPLATES.values()
    for template in templates.values()
    for word in re.findall(r"\w+", re.sub(r"\{\w\}", " ", template).casefold())
) | word_set("""il la lo le l i gli der die das el los las les un una une ein eine""")
_FIRST_PERSON_EN = re.compile(r"^(?:i|i'm|i've|i'd|my|we|we've|our)\b", re.IGNORECASE)
_ADJECTIVE_STYLE = re.compile(r"^(?:\w+er|short|brief|concise|long|detailed|simple|clear)$")


def description(fact: Fact) -> str:
    language = fact.language if fact.language in TEMPLATES else "en"
    templates = TEMPLATES[language]
    if not fact.of_user:
        return _of_relative(fact, templates)
    if language == "en" and fact.fact != "answers" and _FIRST_PERSON_EN.match(fact.clause):
        return third_person(fact.clause)
    key = _template_key(fact)
    value = fact.value
    if fact.fact == "answers" and language == "en" and _ADJECTIVE_STYLE.match(value.casefold()):
        return f"The user prefers {value} answers"
    article = "an" if value[:1].casefold() in "aeiou" else "a"
    return templates[key].format(v=value, p=fact.phrase, a=article)


def _template_key(fact: Fact) -> str:
    frame = fact.frame
    if frame is not None and frame.template in ("teach", "demonym", "field"):
        return frame.template
    if frame is not None and fact.fact == "answers" and frame.template in ("whole", "without"):
        return f"answers_{frame.template}"
    if fact.fact == "diet" and _names_a_diet(fact):
        return "diet_is"
    if (
        fact.fact == "health"
        and (frame is None or frame.template not in ("has", "is"))
        and re.search(r"intoler|intolér|intoller", fact.clause, re.I)
    ):
        return "health_intolerant"
    if fact.fact == "health" and frame is not None and frame.template in ("has", "is"):
        return f"health_{frame.template}"
    return fact.fact


def _names_a_diet(fact: Fact) -> bool:
    """Whether a diet's value is a diet the user keeps ("vegan", "Veganerin", "végétarienne"),
    not a food they go without ("Eier", "meat"): a word of the language's list of diets."""
    from apps.language.facts import grammar_for

    words = fact.value.split()
    return len(words) == 1 and bool(
        grammar_for(fact.language).regex("diets").fullmatch(words[0].casefold())
    )


def _of_relative(fact: Fact, templates: dict[str, str]) -> str:
    """A relative's or pet's fact, as theirs and the user's relative's ("The user's daughter
    Liv can't have peanuts", "La figlia dell'utente, Liv, non può mangiare arachidi")."""
    if fact.language == "en" or fact.language not in TEMPLATES:
        if _FIRST_PERSON_EN.match(fact.clause):
            return third_person(fact.clause)
        return templates["relative_name"].format(r=fact.relation_word, v=fact.value)
    relation = fact.relation
    word = fact.relation_word.capitalize() if fact.language == "de" else fact.relation_word
    owner = (relation.article + " " if relation and relation.article else "") + word
    owner = owner[:1].upper() + owner[1:]
    if fact.fact == "relative_name":
        several = "relative_names" if ", " in fact.value else "relative_name"
        return templates[several].format(R=owner, v=fact.value)
    head = templates["relative"].format(R=owner)
    rest = _after_relation(fact)
    if fact.relation_name:
        return f"{head}, {fact.relation_name}, {rest}".rstrip(", ")
    return f"{head} {rest}".rstrip()


def _after_relation(fact: Fact) -> str:
    """The clause after its relative's word and name: what it says of them, up to where it
    goes on about the user (the memory is the relative's fact, written of "the user")."""
    clause = fact.clause
    at = clause.casefold().find(fact.relation_word.casefold())
    rest = clause[at + len(fact.relation_word) :] if at >= 0 else clause
    if fact.relation_name:
        named = rest.casefold().find(fact.relation_name.casefold())
        if named >= 0:
            rest = rest[named + len(fact.relation_name) :]
    from apps.language.facts import grammar_for

    turn = grammar_for(fact.language).regex("about_the_user").search(rest)
    if turn is not None and turn.start() > 0:
        rest = rest[: turn.start()]
    return rest.strip(" ,")
