"""The facts a sentence states, by class of construction, in the five languages: each class is
tried with generated variety (several values, several ways of typing it), and each class of
decoy (negation, the past, wishes, conditions, questions, idioms, other people) must state no
fact of the user's at all."""

from __future__ import annotations

import itertools

import pytest

from apps.language import facts
from apps.language.facts.describe import description

# (language, construction with {v}, fact type, values): every value must be read.
STATED = [
    ("en", "my name is {v}", "name", ["Laura", "Ingrid", "Tomasz Nowak"]),
    ("en", "name's {v}", "name", ["Ingrid", "Priya"]),
    ("en", "I live in {v}", "home", ["Turin", "Rotterdam", "a small village near Bergen"]),
    ("en", "these days I'm based in {v}", "home", ["Rotterdam", "Lyon"]),
    ("en", "I live with my parents in {v}", "home", ["Derby", "Leeds"]),
    ("en", "ive been in {v} since uni", "home", ["Glasgow", "Leeds"]),
    ("en", "I work in {v}", "occupation", ["marketing", "real estate", "IT"]),
    ("en", "dont eat {v}", "diet", ["pork", "dairy"]),
    ("en", "im {v} btw", "name", ["Priya", "Jess"]),
    ("en", "yo, im a {v}", "occupation", ["dev", "nurse"]),
    ("en", "been {v} since i was 12", "diet", ["vegetarian", "vegan"]),
    ("en", "grew up in {v}", "origin", ["Bergen", "Kraków"]),
    ("en", "I work as a {v}", "occupation", ["nurse", "welder", "carpenter"]),
    ("en", "work-wise: {v}, mostly nights", "occupation", ["nurse", "paramedic"]),
    ("en", "I'm {v} years old", "age", ["34", "71"]),
    ("en", "I'm allergic to {v}", "health", ["peanuts", "shellfish"]),
    ("en", "oh and I gave up {v} about two years ago", "diet", ["meat", "dairy"]),
    ("it", "mi chiamo {v}", "name", ["Giulia", "Marco Rossi"]),
    ("it", "vivo a {v}", "home", ["Torino", "Bologna"]),
    ("it", "vivo con mia moglie a {v}", "home", ["Cremona", "Lecce"]),
    ("it", "faccio l'{v}", "occupation", ["infermiera", "avvocata"]),
    ("it", "faccio la {v}", "occupation", ["bibliotecaria", "programmatrice"]),
    ("fr", "je suis {v}", "occupation", ["boulangère", "mécanicienne"]),
    ("es", "soy {v}", "occupation", ["carpintera", "abogada"]),
    ("de", "ich bin {v}", "occupation", ["Tischlerin", "Ärztin"]),
    ("it", "ho {v} anni", "age", ["34", "19"]),
    ("it", "sono allergica {v}", "health", ["alle arachidi", "ai crostacei"]),
    ("fr", "je m'appelle {v}", "name", ["Julie", "Mamadou"]),
    ("fr", "j'habite à {v}", "home", ["Lyon", "Nantes"]),
    ("fr", "je vis avec ma copine à {v}", "home", ["Rennes", "Brest"]),
    ("fr", "je suis {v}", "occupation", ["infirmière", "boulanger"]),
    ("fr", "je bosse comme {v}", "occupation", ["serveur", "infirmière"]),
    ("fr", "j'ai {v} ans", "age", ["34", "52"]),
    ("de", "ich heiße {v}", "name", ["Jonas", "Anke"]),
    ("de", "ich wohne in {v}", "home", ["Leipzig", "Graz"]),
    ("de", "wir wohnen seit Jahren in {v}", "home", ["Dresden", "Kiel"]),
    ("de", "ich arbeite als {v}", "occupation", ["Lehrerin", "Elektriker"]),
    ("de", "ich bin {v} Jahre alt", "age", ["42", "67"]),
    ("es", "me llamo {v}", "name", ["Lucía", "Andrés"]),
    ("es", "vivo en {v}", "home", ["Sevilla", "Zaragoza"]),
    ("es", "vivo con mi pareja en {v}", "home", ["Quito", "Cádiz"]),
    ("es", "trabajo como {v}", "occupation", ["enfermera", "electricista"]),
    ("es", "trabajo de {v}", "occupation", ["profe de inglés", "camarero"]),
    ("es", "tengo {v} años", "age", ["36", "63"]),
]
# How people type the same sentence.
STYLES = [
    lambda s: s,
    lambda s: s + ".",
    lambda s: "btw " + s if s[:1].islower() else s,
    lambda s: s + " lol",
]


def _facts(sentence: str, language: str) -> list[facts.Fact]:
    return [fact for clause in facts.read(sentence, language=language) for fact in clause.facts]


@pytest.mark.parametrize(
    ("language", "construction", "kind", "value", "style"),
    [
        (language, construction, kind, value, style)
        for language, construction, kind, values in STATED
        for value, style in itertools.product(values, range(len(STYLES)))
    ],
)
def test_a_construction_of_each_class_reads_its_value_however_it_is_typed(
    language, construction, kind, value, style
):
    sentence = STYLES[style](construction.format(v=value))
    found = [fact for fact in _facts(sentence, language) if fact.fact == kind]
    assert found, sentence
    assert value.split()[-1].casefold() in found[0].phrase.casefold(), (sentence, found)


# (language, decoy with {v}, values): nothing of the user's, in any class of decoy.
DECOYS = [
    # Values that are no name, place or job, after the constructions that take one.
    ("en", "call me {v}", ["later if you think of anything else", "crazy", "when you're free"]),
    ("en", "my name is {v}", ["not important", "irrelevant here"]),
    ("en", "I live in {v}", ["fear of deadlines at work", "the moment", "hope", "denial"]),
    ("en", "I'm a {v}", ["night owl", "big mess", "people person"]),
    ("en", "I work for {v}", ["peanuts", "myself"]),
    # Negations, the past, wishes, conditions.
    ("en", "{v}", ["I'm not a doctor", "I don't live in Paris anymore",
                   "I used to live in Paris", "I'd love to live in Japan",
                   "I want to move to Spain", "if I lived in Oslo I'd ski",
                   "I'm dying to see it", "I'm on fire today", "I never worked as a nurse"]),
    # Questions, other people.
    ("en", "{v}", ["do I live in Turin?", "what's my name?", "my friend Oskar is a doctor in Oslo",
                   "my boss said 'I'm moving to Dubai'", "do I live in Turin, do you know?",
                   "what's my name, do you remember?", "I've been in London since Tuesday",
                   "I work in it", "I work in shifts", "im done lol", "i'm good btw"]),
    ("it", "{v}", ["non sono un medico", "non vivo più a Roma", "vivevo a Parigi",
                   "vorrei vivere a Roma", "se vivessi a Oslo sarei felice", "vivo nella paura",
                   "chiamami quando vuoi", "mi chiamo come mio nonno?"]),
    ("fr", "{v}", ["je ne suis pas médecin", "je n'habite plus à Paris", "j'habitais à Lyon",
                   "j'aimerais vivre à Rome", "si j'habitais à Oslo je skierais",
                   "appelle-moi plus tard", "je suis crevé"]),
    ("de", "{v}", ["ich bin kein Arzt", "ich wohne nicht mehr in Berlin",
                   "früher wohnte ich in Köln", "ich möchte in Rom wohnen",
                   "wenn ich in Oslo wohnen würde", "ich bin aus dem Schneider",
                   "ich bin fix und fertig", "ich bin Kaffee-Junkie", "ich bin Pescetarier",
                   "ich bin der Meinung, dass du recht hast", "ich wäre gern Pilot",
                   "ich würde gern in Rom wohnen"]),
    ("es", "{v}", ["no soy médico", "ya no vivo en Madrid", "antes vivía en Lima",
                   "me gustaría vivir en Roma", "si viviera en Oslo esquiaría", "llámame luego",
                   "no me llamo Pablo", "estoy en las nubes", "Soy Vegana"]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("language", "sentence"),
    [
        (language, template.format(v=value))
        for language, template, values in DECOYS
        for value in values
    ],
)
def test_no_class_of_decoy_states_a_single_valued_fact_of_the_user(language, sentence):
    single = [f for f in _facts(sentence, language) if f.of_user and f.fact in facts.SINGLE_VALUED]
    assert single == [], sentence


@pytest.mark.parametrize(
    ("language", "sentence", "said"),
    [
        (
            "de",
            "bin Veganer seit drei Jahren, also bitte keine Rezepte mit Fleisch",
            "Der Nutzer ist Veganer",
        ),
        ("de", "ich bin Pescetarierin", "Der Nutzer ist Pescetarierin"),
        ("de", "ich esse keine Eier", "Der Nutzer isst kein Eier"),
        ("fr", "je suis végétarienne", "L'utilisateur est végétarienne"),
        ("fr", "je ne mange pas de porc", "L'utilisateur ne mange pas porc"),
        ("es", "Soy Vegana", "El usuario es Vegana"),
        ("es", "no como carne", "El usuario no come carne"),
        ("it", "sono vegetariano da anni", "L'utente è vegetariano"),
        ("en", "I'm vegan", "The user is vegan"),
        ("en", "I don't eat pork", "The user does not eat pork"),
    ],
)
def test_a_diet_kept_is_told_from_a_food_gone_without_and_is_never_a_name(language, sentence, said):
    (fact,) = _facts(sentence, language)
    assert (fact.fact, description(fact)) == ("diet", said)


@pytest.mark.parametrize(
    ("language", "sentence", "fact"),
    [
        ("en", "I'm Marta, and you?", ("name", "Marta")),
        ("en", "my name is Ana, what's yours?", ("name", "Ana")),
        ("en", "I live in Leeds, where do you live?", ("home", "Leeds")),
        ("fr", "moi c'est Léa, et toi ?", ("name", "Léa")),
        ("de", "ich wohne in Wien, und wo wohnst du?", ("home", "Wien")),
        ("es", "me llamo Marta, ¿y tú?", ("name", "Marta")),
        ("it", "mi chiamo Chiara, e tu?", ("name", "Chiara")),
    ],
)
def test_what_is_said_before_a_question_asked_back_is_read(language, sentence, fact):
    assert [(f.fact, f.value) for f in _facts(sentence, language)] == [fact]


@pytest.mark.parametrize(
    ("language", "sentence", "said"),
    [
        ("es", "mi hermana vive en Sevilla y siempre me dice que me mude allí jaja",
         "La hermana del usuario vive en Sevilla"),
        ("fr", "ma fille Chloé a 8 ans et m'appelle tous les soirs",
         "La fille de l'utilisateur, Chloé, a 8 ans"),
        ("de", "meine Schwester wohnt in Köln und sagt mir immer, ich soll hinziehen",
         "Die Schwester des Nutzers wohnt in Köln"),
        ("it", "mia sorella vive a Torino e mi dice sempre di trasferirmi",
         "La sorella dell'utente vive a Torino"),
        ("es", "mi hijo Mateo tiene cinco años y le encantan los trenes",
         "El hijo del usuario, Mateo, tiene cinco años y le encantan los trenes"),
    ],
)  # fmt: skip
def test_a_relatives_fact_ends_where_the_sentence_turns_to_the_user(language, sentence, said):
    (fact,) = _facts(sentence, language)
    assert description(fact) == said


@pytest.mark.parametrize(
    ("language", "sentence", "said"),
    [
        ("fr", "je suis allergique aux arachides", "L'utilisateur est allergique à arachides"),
        ("fr", "je suis allergique au pollen", "L'utilisateur est allergique à pollen"),
        ("it", "sono allergica alle noci", "L'utente è allergico a noci"),
        ("it", "sono intollerante al lattosio", "L'utente è intollerante a lattosio"),
        ("es", "soy intolerante a la lactosa", "El usuario es intolerante a lactosa"),
        ("en", "I'm intolerant to lactose", "The user is intolerant to lactose"),
        ("de", "ich hab ne Laktoseintoleranz", "Der Nutzer hat Laktoseintoleranz"),
    ],
)
def test_an_allergy_or_intolerance_is_written_as_said(language, sentence, said):
    (fact,) = _facts(sentence, language)
    assert (fact.fact, description(fact)) == ("health", said)


def test_a_relatives_news_shared_with_the_user_is_theirs_in_the_third_person():
    (fact,) = _facts("my wife Esinam is expecting our first baby in march!!", "en")
    assert (fact.relation_name, description(fact)) == (
        "Esinam",
        "The user's wife Esinam is expecting their first baby in march",
    )
    assert _facts("my mum says our house is too small", "en") == []


def test_another_persons_fact_stays_theirs():
    (fact,) = _facts("My friend Oskar lives in Oslo", "en")
    assert (fact.fact, fact.value, fact.relation_name, fact.of_user) == (
        "home",
        "Oslo",
        "Oskar",
        False,
    )
    (fact,) = _facts("heads up, my daughter Liv can't have peanuts", "en")
    assert (fact.value, fact.relation_name, fact.relation.key) == ("peanuts", "Liv", "daughter")


def test_several_facts_in_one_message_are_each_read():
    sentence = "name's Ingrid, grew up in Bergen but these days I'm based in Rotterdam"
    assert [(f.fact, f.value) for f in _facts(sentence, "en")] == [
        ("name", "Ingrid"),
        ("origin", "Bergen"),
        ("home", "Rotterdam"),
    ]


def test_fragments_count_only_in_an_introduction():
    read = [(f.fact, f.value) for f in _facts("Anh, 26, UX designer", "en")]
    assert read == [("name", "Anh"), ("age", "26"), ("occupation", "UX designer")]
    assert _facts("26", "en") == []
    assert _facts("designer", "en") == []


def test_a_standing_request_about_answers_is_a_preference_and_a_one_off_is_not():
    (fact,) = _facts("could you answer in bullet points from now on?", "en")
    assert (fact.fact, fact.value) == ("answers", "in bullet points")
    assert _facts("could you answer in bullet points?", "en") == []
    # Asked of the answers in general ("replies", "risposte"), a request holds for every one.
    (fact,) = _facts("can you keep replies short?", "en")
    assert (fact.fact, fact.value) == ("answers", "short")
    (fact,) = _facts("le risposte brevi per favore", "it")
    assert fact.fact == "answers"
    (fact,) = _facts("je préfère des réponses courtes", "fr")
    assert fact.fact == "answers"


def test_relatives_had_and_listed_keep_their_names():
    for sentence, language, names in [
        ("we've got two hamsters, Pip and Squeak", "en", "Pip, Squeak"),
        ("drei Katzen: Luna, Felix und Motte", "de", "Luna, Felix, Motte"),
        ("tenemos una gata que se llama Nube", "es", "Nube"),
        ("j'habite à Nantes avec ma femme Claire", "fr", "Claire"),
    ]:
        named = [f for f in _facts(sentence, language) if f.fact == "relative_name"]
        assert [f.value for f in named] == [names], sentence
