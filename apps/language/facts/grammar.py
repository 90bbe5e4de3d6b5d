"""What a language's facts are made of: the fact types, and the tables a language fills in.

One engine (apps.language.facts.engine) reads every language; a language is data: the
constructions that state each type of fact (`Frame`), the words that open a clause without
saying anything, and the cues that make a clause no fact of the user's (negation, wishes and
conditionals, the past, other people's words).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field


@dataclass(frozen=True)
class FactType:
    """A type of fact and how it is stored. `slot` is the kind of value it takes; a type with a
    `fact_key` has one value at a time, so a wrong value would replace the true one."""

    slot: str
    predicate: str
    category: str
    importance: float
    fact_key: str = ""
    kind: str = "fact"


FACT_TYPES = {
    "name": FactType("name", "has_name", "identity", 0.9, fact_key="name"),
    "age": FactType("age", "has_age", "identity", 0.7, fact_key="age"),
    "home": FactType("place", "lives_in", "places", 0.8, fact_key="home_city"),
    "origin": FactType("place", "comes_from", "places", 0.7, fact_key="origin"),
    "occupation": FactType("job", "works_as", "work", 0.8, fact_key="occupation"),
    "employer": FactType("org", "works_at", "work", 0.7, fact_key="employer"),
    "studies": FactType("subject", "studies", "work", 0.7, fact_key="studies"),
    "languages": FactType("language", "speaks", "skills", 0.5),
    "likes": FactType("thing", "likes", "preferences", 0.6, kind="preference"),
    "dislikes": FactType("thing", "dislikes", "preferences", 0.6, kind="preference"),
    "answers": FactType("style", "likes", "preferences", 0.7, kind="preference"),
    "diet": FactType("diet", "follows_diet", "health", 0.7),
    "health": FactType("condition", "has_condition", "health", 0.7),
    "relative_name": FactType("name", "has_relative", "relationships", 0.7),
}
SINGLE_VALUED = frozenset(name for name, kind in FACT_TYPES.items() if kind.fact_key) | {
    "relative_name"
}


@dataclass(frozen=True)
class Frame:
    """A construction stating a fact of type `fact`: a regular expression matched at the start
    of a clause (lower case, straight apostrophes, openers removed) whose group "v" is the
    value. `explicit`: the construction itself says the value is of its kind ("I work as"),
    so a job needs no lexicon word. `template`: the description's key when not the type's."""

    fact: str
    pattern: str
    explicit: bool = False
    template: str = ""
    # A clause this construction matches with a value of the wrong kind is no fact of any
    # kind ("call me later", "I live in fear"); False where the construction is only a guess
    # ("I'm X": a name if X is one, else anything).
    decoy: bool = True
    # A fragment ("33", "accountant"): a fact only in a sentence that introduces the user.
    fragment: bool = False


# The employer a job's own construction names beside it ("soy dentista en Málaga", "I work as a
# nurse at St Mary's"): a town there is where the job is done.
EMPLOYER_BESIDE_A_JOB = Frame("employer", "")


@dataclass(frozen=True)
class Relation:
    """A relative or a pet word: the key the fact is stored under and its article."""

    key: str
    article: str = ""
    pet: bool = False


@dataclass
class Grammar:
    code: str
    # Words that open a clause without saying anything ("oh and", "btw", "heads up").
    openers: str
    # Where a sentence's clauses part.
    clause_breaks: str
    # Cues that a clause says something false, unreal, past or someone else's of the user.
    negation: str
    unreal: str
    # A sentence that opens with one of these ("if", "suppose") says nothing that holds.
    conditional: str
    past: str
    # Constructions, by whom they are said of: the user (first person), a relative (third).
    user_frames: list[Frame]
    other_frames: list[Frame]
    # "my", "our": the words before a relative's word; "called"/"named" after it.
    possessive: str
    relations: dict[str, Relation]
    # "I have a dog called Rex": the verb, the counts ("a", "two"; `counted` from two on,
    # which need no verb: "zwei Kinder: Ben und Mia"), the words before a name ("called"),
    # and those before a relative met in passing ("with my husband Hugo").
    having: str
    numbers: str
    counted: str
    naming: str
    with_words: str
    # Words that end a value ("and", "but", "with"...) and words never a value's head.
    value_ends: str
    vague: frozenset[str]
    place_leads: frozenset[str]
    articles: frozenset[str]
    # Articles of a thing not named ("a startup", "una startup"): no employer's name.
    indefinite: frozenset[str]
    # Prepositions after a job word that start another detail ("nurse at the city hospital").
    preps: frozenset[str]
    # How a request for every later answer is marked ("from now on", "always").
    standing: str
    # Words of the last day of a fact true only for a while.
    tomorrow: str
    today: str
    # Corrections: "actually it's Ghent, not Gent".
    correction: str
    # Where a clause's subject is the user ("i", "my"); a first-person clause no construction
    # places may still be theirs when a model quoted it.
    first_person: str = ""
    # Other people's words ("says", "told me") and the words that name the user ("me", "i").
    reported: str = r"$^"
    user_words: frozenset[str] = frozenset()
    # The diets a word names alone ("vegetarian").
    diets: str = r"$^"
    # A stay, not a home: "this week", "on holiday".
    passing: str = r"$^"
    # Where a message takes back what it just said ("wait no,", "I mean", "anzi"): what
    # follows replaces it.
    takes_back: str = r"$^"
    # Where a message puts what it just said in the past ("I'm a lawyer, well, was", "used to
    # be", "not anymore", "retired last year"): the value before it is not the user's now.
    no_longer: str = r"$^"
    # A question asked back at the end of a sentence that said something ("I'm Marta, and
    # you?", "my name is Ana, what's yours?"): a comma, a conjunction or question word, then
    # a word for the assistant. What comes before it is said, not asked.
    asked_back: str = r"$^"
    # Words for the answers in general ("replies"): a request about them holds for every one.
    every_answer: str = r"$^"
    # Where a relative's clause goes on about the user ("… y siempre me dice que me mude
    # allí"): a conjunction, then a few words up to one of the user's own pronouns.
    about_the_user: str = r"$^"
    # Words that only close a clause ("btw", "lol", "jaja"): taken off its end.
    closers: str = r"$^"
    # (pattern, replacement) that spell a clause one way ("i am" -> "i'm").
    normal: tuple[tuple[str, str], ...] = ()
    macros: dict[str, str] = field(default_factory=dict)
    compiled: dict = field(default_factory=dict, repr=False)

    def regex(self, name: str) -> re.Pattern:
        if name not in self.compiled:
            self.compiled[name] = re.compile(self.expand(getattr(self, name)), re.IGNORECASE)
        return self.compiled[name]

    def expand(self, pattern: str) -> str:
        pattern = pattern.replace("{STANDING}", self.standing)
        for macro, value in self.macros.items():
            pattern = pattern.replace("{" + macro + "}", value)
        return pattern

    def frames(self, whose: str) -> list[tuple[re.Pattern, Frame]]:
        key = f"frames:{whose}"
        if key not in self.compiled:
            frames = self.user_frames if whose == "user" else self.other_frames
            self.compiled[key] = [
                (re.compile("^(?:" + self.expand(frame.pattern) + ")"), frame) for frame in frames
            ]
        return self.compiled[key]

    @property
    def relation_words(self) -> str:
        return "|".join(sorted(map(re.escape, self.relations), key=len, reverse=True))
