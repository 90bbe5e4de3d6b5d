"""The rules that type what a user states about themselves, from their own words (the classes of
construction and of decoy in five languages are tested in tests/language)."""

from __future__ import annotations

from datetime import date

import pytest

from apps.cognition.statements import (
    category_allowed,
    message_statements,
    quoted_sentences,
    statements_of,
    states_something,
    third_person,
)
from apps.memory.models import Category
from apps.memory.support import quote_supports

TODAY = date(2026, 11, 26)


def _one(sentence: str):
    (statement,) = statements_of(sentence, today=TODAY)
    return statement


@pytest.mark.parametrize(
    ("said", "description", "kind", "category", "fact_key", "triple"),
    [
        (
            "My name is Laura Bianchi.",
            "The user's name is Laura Bianchi",
            "fact",
            "identity",
            "name",
            ("has_name", "Laura Bianchi", "identity"),
        ),
        (
            "I live in Turin",
            "The user lives in Turin",
            "fact",
            "places",
            "home_city",
            ("lives_in", "Turin", "places"),
        ),
        (
            "I work as a carpenter",
            "The user works as a carpenter",
            "fact",
            "work",
            "occupation",
            ("works_as", "carpenter", "work"),
        ),
        (
            "My daughter is called Sofia",
            "The user's daughter is called Sofia",
            "fact",
            "relationships",
            "daughter_name",
            ("has_relative", "Sofia (daughter)", "relationships"),
        ),
        (
            "I prefer short answers",
            "The user prefers short answers",
            "preference",
            "preferences",
            "",
            ("likes", "short answers", "preferences"),
        ),
        (
            "My daughter Sofia is allergic to peanuts",
            "The user's daughter Sofia is allergic to peanuts",
            "fact",
            "health",
            "",
            ("has_relative", "Sofia (daughter)", "relationships"),
        ),
        ("I collect old stamps", "The user collects old stamps", "fact", None, "", None),
        (
            "We have a cat called Pepe",
            "The user has a cat called Pepe",
            "fact",
            "relationships",
            "",
            ("has_pet", "cat", "relationships"),
        ),
        (
            "Our son Marco plays the violin",
            "The user's son Marco plays the violin",
            "fact",
            "relationships",
            "",
            ("has_relative", "Marco (son)", "relationships"),
        ),
        # SmolLM2-135M's quote of "I prefer short answers, please." (bench/real_model.py).
        (
            "Please, I prefer short answers, please.",
            "The user prefers short answers",
            "preference",
            "preferences",
            "",
            ("likes", "short answers", "preferences"),
        ),
    ],
)
def test_a_statement_is_typed_by_its_words(said, description, kind, category, fact_key, triple):
    statement = _one(said)

    assert (statement.description, statement.kind, statement.category) == (
        description,
        kind,
        category,
    )
    assert (statement.fact_key, statement.triple) == (fact_key, triple)


def test_a_sentence_of_two_clauses_states_two_facts_each_quoting_its_own_words():
    name, home = statements_of("My name is Laura Bianchi and I live in Turin", today=TODAY)

    assert (name.quote, home.quote) == ("My name is Laura Bianchi", "I live in Turin")


def test_what_the_users_household_has_is_the_users():
    cat, dog = statements_of("We have a cat called Pepe and our dog is called Rex", today=TODAY)

    assert (cat.description, cat.triple) == (
        "The user has a cat called Pepe",
        ("has_pet", "cat", "relationships"),
    )
    assert (dog.description, dog.triple) == (
        "The user's dog is called Rex",
        ("has_pet", "dog", "relationships"),
    )


def test_a_request_beside_a_statement_is_not_a_fact_even_when_the_model_quotes_it():
    said = "Plan a weekend in Porto, I'm vegetarian."

    for quote in ("I'm vegetarian", "a weekend in Porto"):
        (only,) = statements_of(said, today=TODAY, quote=quote)

        assert (only.description, only.category) == ("The user is vegetarian", "health")


@pytest.mark.parametrize(
    "said",
    [
        "The new intern is 19 and already runs the team meetings.",
        "Scrivimi un annuncio per vendere la bici di mio figlio.",
        "Ando por Valencia unos días con los primos, qué calor hace.",
        "Meine Kollegin sagt, ich koche zu scharf für alle anderen.",
    ],
)
def test_a_quoted_clause_is_kept_only_when_its_subject_is_the_user(said):
    assert statements_of(said, today=TODAY, quote=said) == []


@pytest.mark.parametrize(
    ("said", "quote"),
    [
        # What SmolLM2-135M quoted of a user's goodbye, which became a memory.
        ("Thanks, that is all for now.", "that is all for now"),
        ("My daughter Sofia is seven. She is allergic to peanuts.", "She is allergic to peanuts"),
        ("It was great.", "It was great"),
    ],
)
def test_a_clause_whose_subject_stands_for_something_said_before_is_no_fact(said, quote):
    for sentence in quoted_sentences(quote=quote, text=said):
        assert statements_of(sentence, today=TODAY, quote=quote) == []


def test_a_clause_whose_subject_stands_for_something_said_before_counts_when_it_names_the_user():
    (birthday,) = statements_of(
        "It is my birthday tomorrow.", today=TODAY, quote="It is my birthday tomorrow"
    )

    assert birthday.description == "It is the user's birthday tomorrow"
    assert birthday.valid_until == date(2026, 11, 27)


def test_a_question_states_nothing():
    assert statements_of("Where do I live?", today=TODAY) == []
    assert not states_something("What should I cook for dinner tonight?")
    assert not states_something("Thanks, I see.")
    assert states_something("Well. My son Luca plays chess.")


def test_a_quote_points_at_the_sentence_that_holds_it_and_a_run_on_quote_at_each_of_its_own():
    said = "Hi there. My name is Laura Bianchi and I live in Turin."

    assert quoted_sentences(quote="Laura Bianchi", text=said) == [
        "My name is Laura Bianchi and I live in Turin."
    ]
    run_on = "My name is Laura Bianchi and I live in Turin. I prefer short answers. My"
    assert quoted_sentences(quote=run_on, text=said) == [
        "My name is Laura Bianchi and I live in Turin."
    ]
    assert quoted_sentences(quote="Laura Bianchi is a chef", text=said) == []


@pytest.mark.parametrize(
    ("quote", "said", "ran_on_with"),
    [
        # SmolLM2-135M's quotes in bench.real_model, which grounding rejected whole.
        (
            "We have a cat called Pepe, and he plays the violin in the school orchestra,",
            "We have a cat called Pepe.",
            "violin",
        ),
        (
            "My son Marco plays the violin in the school orchestra, and I'm not sure I can do "
            "it, but I'm sure I can do it,",
            "My son Marco plays the violin in the school orchestra.",
            "sure",
        ),
    ],
)
def test_a_quote_run_on_past_the_users_sentence_points_at_it_by_its_start(quote, said, ran_on_with):
    """The longest start of the quote, cut at a comma or a conjunction, that is the user's words
    points at their sentence; what the model ran on with is not taken, and a start of fewer than
    three words, or one the user did not write, points at nothing."""
    assert quoted_sentences(quote=quote, text=said) == [said]
    (statement,) = statements_of(said, today=TODAY, quote=quote)
    assert ran_on_with not in statement.description.casefold()
    assert quoted_sentences(quote="I'm not sure, but I'm sure I can do it,", text=said) == []
    assert quoted_sentences(quote="Pepe, and he is a dog", text="We have a cat called Pepe.") == []


def test_what_holds_only_until_tomorrow_ends_then():
    assert _one("I have an exam tomorrow").valid_until == date(2026, 11, 27)
    assert _one("I have an exam").valid_until is None


@pytest.mark.parametrize(
    ("said", "category"),
    [
        ("I forgot my umbrella at the office", "work"),
        ("I run every Sunday morning", None),
        ("I find long explanations tiring", "preferences"),
        ("I visited Lisbon last year", "experiences"),
        ("I collect old stamps", None),
    ],
)
def test_a_fact_no_rule_places_is_classified_by_its_words_or_left_without_a_category(
    said, category
):
    assert _one(said).category == category


def test_a_fact_of_no_category_is_learnt_only_by_a_user_who_learns_every_category():
    every = set(Category.values)

    assert category_allowed(None, allowed=every)
    assert not category_allowed(None, allowed=every - {"knowledge"})
    assert category_allowed("work", allowed={"work"})


@pytest.mark.parametrize(
    "said",
    [
        "My name is Laura Bianchi and I live in Turin",
        "I've been vegetarian since 2019",
        "I don't like olives",
        "I can't stand jazz",
        "I'd rather walk to work",
        "My daughter is called Sofia",
        "I went to Rome last week",
        "I study physics",
        "I'm 34 years old",
        "I have a dog named Rex",
        "My sister Anna lives in Berlin and I visit her often",
        "It is my birthday tomorrow",
        "Sofia says my pasta is the best",
        "We have a cat called Pepe and our dog is called Rex",
    ],
)
def test_every_statement_says_nothing_its_quote_does_not(said):
    # Reflection stores these as the user's own words (apps.memory.services demotes any other).
    for statement in statements_of(said, today=TODAY):
        assert quote_supports(description=statement.description, quote=statement.quote), statement


@pytest.mark.parametrize(
    ("said", "written"),
    [
        ("I really like jazz", "The user really likes jazz"),
        ("I also play chess", "The user also plays chess"),
        ("I usually go running", "The user usually goes running"),
        ("I went to Rome", "The user went to Rome"),
        ("I just moved to Lyon", "The user just moved to Lyon"),
        ("I study physics", "The user studies physics"),
        ("I fly to Paris often", "The user flies to Paris often"),
        ("I haven't seen Rome", "The user hasn't seen Rome"),
        ("I can swim", "The user can swim"),
        ("i live in turin", "The user lives in turin"),
        ("Sofia says I cook well", "Sofia says the user cooks well"),
        ("My wife thinks I am funny", "The user's wife thinks the user is funny"),
        ("Then I moved to Lyon", "Then the user moved to Lyon"),
        ("My son and I play chess", "The user's son and the user play chess"),
        ("World War I ended in 1918", "World War I ended in 1918"),
    ],
)
def test_the_user_in_the_third_person_agrees_with_its_verb(said, written):
    # Each read by the model as its own memory: "I" would be the assistant, "reallies" a typo.
    assert third_person(said) == written


def _rules(text: str, **kwargs):
    return message_statements(text, today=TODAY, **kwargs)


@pytest.mark.parametrize(
    "said",
    [
        # Issue 37's false facts against the real model: a name, a name, a home.
        "Call me later if you think of anything else.",
        "My name is not important.",
        "I live in fear of deadlines at work",
        "I want to learn Spanish",
        "I'm not a doctor",
        "Non sono un medico.",
    ],
)
def test_a_sentence_that_looks_like_a_fact_and_is_not_makes_no_memory(said):
    assert _rules(said) == []
    for sentence in quoted_sentences(quote=said, text=said):
        assert statements_of(sentence, today=TODAY, quote=said) == []


def test_the_way_people_type_is_read_as_facts():
    said = (
        "name's Ingrid, grew up in Bergen but these days I'm based in Rotterdam. "
        "work-wise: nurse, mostly night shifts. could you answer in bullet points from now on? "
        "heads up, my daughter Liv can't have peanuts. oh and I gave up meat about two years ago"
    )
    found = {(s.fact_key, s.triple[1] if s.triple else "") for s in _rules(said)}

    assert {
        ("name", "Ingrid"),
        ("origin", "Bergen"),
        ("home_city", "Rotterdam"),
        ("occupation", "nurse"),
        ("", "in bullet points"),
        ("", "Liv (daughter)"),
        ("", "meat"),
    } == found


@pytest.mark.parametrize(
    ("said", "description", "language"),
    [
        ("vivo a Torino", "L'utente vive a Torino", "it"),
        ("j'habite à Lyon", "L'utilisateur habite à Lyon", "fr"),
        ("ich wohne in Berlin", "Der Nutzer wohnt in Berlin", "de"),
        ("vivo en Sevilla", "El usuario vive en Sevilla", "es"),
    ],
)
def test_a_fact_in_another_language_is_typed_and_described_in_that_language(
    said, description, language
):
    (statement,) = _rules(said)

    assert (statement.description, statement.language) == (description, language)
    assert (statement.fact_key, statement.category) == ("home_city", "places")
    assert quote_supports(description=statement.description, quote=statement.quote)


def test_a_relatives_fact_is_stored_as_theirs_never_as_the_users():
    (liv,) = _rules("heads up, my daughter Liv can't have peanuts")
    (oskar,) = _rules("My friend Oskar lives in Oslo")

    assert (liv.fact_key, liv.category) == ("", "health")
    assert liv.description == "The user's daughter Liv can't have peanuts"
    assert (oskar.fact_key, oskar.triple) == (
        "",
        ("has_relative", "Oskar (friend)", "relationships"),
    )


def test_a_correction_replaces_the_known_value_it_names():
    (corrected,) = _rules("actually it's Ghent, not Gent", known={"home_city": "Gent"})

    assert (corrected.fact_key, corrected.triple[1]) == ("home_city", "Ghent")
    assert _rules("actually it's Ghent, not Gent", known={"home_city": "Bruges"}) == []


def test_a_message_in_a_language_the_caller_knows_is_read_in_it():
    assert [s.language for s in _rules("vivo a Torino", language="it")] == ["it"]
    assert _rules("vivo a Torino", language="en") == []


@pytest.mark.parametrize(
    ("message", "kept"),
    [
        # Restated after the turn: the later value stands, the earlier one goes.
        (
            "ok so I'm Kofi, software tester at a bank. wait no, I got moved up to QA lead "
            "last month actually",
            {"name": "The user is Kofi", "occupation": "The user got moved up to QA lead"},
        ),
        # A bare value after the turn is of the kind it takes back.
        ("I live in Leeds. sorry, I mean Bradford", {"home_city": "The user lives in Bradford"}),
        ("I'm a nurse, well actually a midwife", {"occupation": "The user works as a midwife"}),
        ("vivo a Vicenza, anzi no, a Verona", {"home_city": "L'utente vive a Verona"}),
        ("mi chiamo Sara, anzi Sarah con la h", {"name": "Il nome dell'utente è Sarah"}),
        # Taken back and not restated in a way the rules read: nothing rather than the old value.
        ("I live in Leeds. wait no, that was last year", {}),
        # A filler before more of the same takes nothing back.
        ("I'm a teacher. I mean, I love it but it's tiring", {"occupation": "The user is a"}),
        # A turn at the very start takes nothing back.
        ("I mean, I live in Leeds", {"home_city": "The user lives in Leeds"}),
    ],
)
def test_a_value_the_message_takes_back_is_not_kept(message, kept):
    _assert_single_values(message, kept)


@pytest.mark.parametrize(
    ("message", "kept"),
    [
        # Said, then put in the past: no current value (and "was" does not say since when).
        ("i'm a lawyer, well was, retired last year", {}),
        ("I'm a nurse at St Mary's. Well, was.", {}),
        ("i work at google, not anymore", {}),
        ("je suis infirmière, plus maintenant", {}),
        ("ich bin Lehrer, also war ich, bin seit letztem Jahr in Rente", {}),
        ("sono avvocato, cioè ero, sono in pensione", {}),
        ("soy dentista, bueno, lo era, ya estoy jubilada", {}),
        # The past of something else, or of someone else, leaves the user's value alone.
        ("I'm a teacher and I was a nurse", {"occupation": "The user is a teacher"}),
        ("I'm a plumber, my dad retired last year", {"occupation": "The user is a plumber"}),
        ("sono insegnante, mio padre è in pensione", {"occupation": "L'utente lavora come"}),
        ("soy dentista y mi padre está jubilado", {"occupation": "El usuario trabaja como"}),
    ],
)
def test_a_value_the_message_puts_in_the_past_is_not_kept_as_current(message, kept):
    _assert_single_values(message, kept)


def _single_values(message: str) -> dict[str, str]:
    """The message's single values by fact key, as its descriptions say them."""
    return {s.fact_key: s.description for s in message_statements(message, today=TODAY)}


def _assert_single_values(message: str, kept: dict[str, str]) -> None:
    """The message gives exactly `kept`'s fact keys, each description starting as given."""
    found = _single_values(message)
    assert found.keys() == kept.keys()
    for key, description in kept.items():
        assert found[key].startswith(description)


@pytest.mark.parametrize(
    ("message", "employer"),
    [
        # A place where an employer could be is where the user works, not for whom.
        ("me llamo Rocío y soy dentista en Málaga", None),
        ("soy enfermera en Sevilla", None),
        # Beside a job, a town of any size (Granada has 234,000 people).
        ("soy profesora de inglés en Granada", None),
        ("trabajo en Madrid", None),
        # Firms keep their names, even those a town shares.
        ("trabajo en Telefónica", "El usuario trabaja en Telefónica"),
        ("trabajo en Zara", "El usuario trabaja en Zara"),
        ("I work at Orange", "The user works at Orange"),
        ("I work at SAP", "The user works at SAP"),
        ("I work at Amsterdam UMC", "The user works at Amsterdam UMC"),
    ],
)
def test_a_town_is_not_read_as_the_users_employer(message, employer):
    assert _single_values(message).get("employer") == employer


def test_a_job_stated_beside_a_town_read_as_no_employer_is_still_kept():
    found = _single_values("trabajo en Madrid como profesor")
    assert found == {"occupation": "El usuario trabaja como profesor"}


def test_a_value_taken_back_is_dropped_even_when_the_model_quoted_it():
    from apps.cognition.reflection import grounded_statements

    said = [
        "ok so I'm Kofi, software tester at a bank. wait no, I got moved up to QA lead last "
        "month actually"
    ]
    findings, _ = grounded_statements(
        quotes={0: ["software tester at a bank", "I'm Kofi"]}, said=said, today=TODAY
    )
    descriptions = [finding.statement.description for finding in findings[0]]
    assert not any("tester" in description for description in descriptions), descriptions
    assert any("QA lead" in description for description in descriptions), descriptions


@pytest.mark.parametrize(
    ("message", "occupation"),
    [
        # Where the user works, then the job: the job is stated, the place is not an employer.
        ("i work in Glasgow as a midwife", "The user works in Glasgow as a midwife"),
        ("I work from home as a copywriter", "The user works from home as a copywriter"),
        ("lavoro a Verona come farmacista", "L'utente lavora come farmacista"),
        ("je travaille à Rennes comme infirmière", "L'utilisateur travaille comme infirmière"),
        ("ich arbeite in Dresden als Tischler", "Der Nutzer arbeitet als Tischler"),
        # Someone else's job, a past one, a wish: none of the user's.
        ("my brother works in Glasgow as a midwife", None),
        ("I worked in Verona as a waiter once", None),
        ("ma sœur travaille à Rennes comme infirmière", None),
        ("ich möchte in Dresden als Tischler arbeiten", None),
        ("vorrei lavorare a Verona come farmacista", None),
    ],
)
def test_a_job_said_after_where_the_user_works_is_their_job(message, occupation):
    _assert_single_values(message, {"occupation": occupation} if occupation else {})
