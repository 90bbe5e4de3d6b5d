"""What a user's message states about the user, read by rules from the user's own words.

Reflection asks the model one small thing: which words of the user's messages state something
about the user. Everything else the old all-in-one call asked for is decided here, without the
model: the sentence a quote points at, its clauses, each clause's kind, topic, fact key,
category and importance, its wording as a memory ("I live in Turin" -> "The user lives in
Turin"), its triple, and whether it holds only until tomorrow.

A quote only points: the memory is always made from the sentence of the user's message that
holds it, so a model that quotes two words of a name ("Laura Bianchi") still yields the user's
statement, and one that invents more than it quotes yields nothing it invented.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, timedelta

from apps.cognition import grounding
from apps.memory.models import Category, MemoryNode

# Shorter than this, a quote points at nothing in particular ("I", "yes").
MIN_POINTER_WORDS = 2
# A clause shorter than this ("I see", "I agree") says nothing worth a memory.
MIN_CLAUSE_WORDS = 3
DEFAULT_IMPORTANCE = 0.5

_SENTENCE = re.compile(r"(?<=[.!?…])\s+|\n+")
# A new clause starts where the user becomes the subject again: "… and I live in Turin".
_CLAUSE = re.compile(
    r"\s*;\s*|,?\s+(?:and|but|so|while)\s+(?=(?:i|i'm|i've|i'd|my|we|we've|our)\b)|,\s+(?=i\b)"
)
_FIRST_PERSON = re.compile(r"^(?:i|i'm|i've|i'd|i'll|my|we|we're|our)\b")
# Words that open a clause without saying anything ("By the way, I've been…").
_DISCOURSE = re.compile(
    r"^(?:(?:by the way|btw|well|honestly|actually|anyway|also|oh|hey|hi|hello|so|ok|okay|yes"
    r"|no|thanks|thank you|sure|please)\b[,!\s]*)+"
)
# A "please" that ends a clause asks; it is not part of what the user states.
_TRAILING_PLEASE = re.compile(r"(?:,\s*|\s+)please$")
# A clause whose subject is a word standing for something said before ("That is all for now",
# "She is seven") names nothing a memory could hold on its own; one that still names the user
# ("It is my birthday tomorrow") does.
_STANDS_FOR_BEFORE = re.compile(
    r"^(?:that|this|it|there|here|these|those|he|she|they|which|who|what)(?:'s|'re|'ll)?\b"
)
_NAMES_THE_USER = re.compile(r"\b(?:i|i'm|i've|i'd|i'll|me|my|mine|myself|we|we're|us|our)\b")
_TRAILING_TIME = re.compile(
    r"\s+(?:last|this|next|since|for|ago|yesterday|today|tonight|tomorrow|with|because|now)\b.*$"
)
_HEALTH = re.compile(
    r"\b(?:allerg\w*|intoleran\w*|diabet\w*|asthma\w*|coeliac|celiac|vegetarian|vegan"
    r"|pregnan\w*|medication|illness|disease|migraines?|surgery|disabilit\w*)\b"
)
_RELATIVES = (
    "daughter|son|wife|husband|partner|mother|mum|mom|father|dad|sister|brother|girlfriend"
    "|boyfriend|child|children|kids?|grandmother|grandfather|grandma|grandpa|aunt|uncle|cousin"
    "|niece|nephew|fiancée?|friend|boss|colleague"
)
_PETS = "dog|cat|puppy|kitten|parrot|rabbit|hamster|horse|pet"
# A clause no rule places is classified by its words, in this order; one that none of them
# names has no category (see `category_of_words`).
_CATEGORY_WORDS = [
    (Category.HEALTH, _HEALTH),
    (Category.RELATIONSHIPS, re.compile(rf"\b(?:{_RELATIVES}|{_PETS}|married|divorced)s?\b")),
    (
        Category.WORK,
        re.compile(
            r"\b(?:work\w*|job|office|career|company|employer|client\w*|colleague\w*|school"
            r"|universit\w*|college|degree|stud(?:y|ies|ying|ent)|exams?|thesis|lessons?)\b"
        ),
    ),
    (
        Category.PLACES,
        re.compile(r"\b(?:live[sd]?|living|moved?|city|town|village|country|home|house|flat)\b"),
    ),
    (
        Category.GOALS,
        re.compile(r"\b(?:want(?:s|ed)? to|plan\w*|goals?|hop(?:e|es|ing) to|aim\w*|dream\w*)\b"),
    ),
    (
        Category.PREFERENCES,
        re.compile(
            r"\b(?:prefer\w*|lik(?:e|es|ed)|lov(?:e|es|ed)|enjoy\w*|hat(?:e|es|ed)|dislik\w*"
            r"|favou?rite|rather|fan of|tiring|boring|annoying)\b"
        ),
    ),
    (
        Category.SKILLS,
        re.compile(r"\b(?:speak\w*|fluent|skill\w*|learn\w*|can (?:play|code|cook|drive))\b"),
    ),
    (
        Category.EXPERIENCES,
        re.compile(
            r"\b(?:went|visited|travell?ed|trip|holiday|vacation|forgot|lost|met|saw|bought"
            r"|yesterday|last (?:week|month|year|night))\b"
        ),
    ),
    (Category.KNOWLEDGE, re.compile(r"\b(?:know[sn]?|knew|learnt|read about|believes?|facts?)\b")),
]


@dataclass(frozen=True)
class Rule:
    pattern: str
    category: str
    kind: str = MemoryNode.Kind.FACT
    topic: str = ""
    fact_key: str = ""
    predicate: str = ""
    importance: float = DEFAULT_IMPORTANCE


# Matched in order against a clause, casefolded; "what" is the value, "rel" a relative.
RULES = [
    Rule(
        r"^(?:my name is|my name's|i am called|i'm called|call me|i am named)\s+(?P<what>.+)",
        Category.IDENTITY,
        topic="name",
        fact_key="name",
        predicate="has_name",
        importance=0.9,
    ),
    Rule(
        r"^(?:i am|i'm)\s+(?P<what>\d{1,3})(?:\s+years?\s+old)?$",
        Category.IDENTITY,
        topic="age",
        fact_key="age",
        predicate="has_age",
        importance=0.7,
    ),
    Rule(
        r"^(?:i live|i'm living|i am living|i (?:have |just |recently )?moved|i've moved"
        r"|i'm moving|i am moving|i'm based|i am based)\s+(?:in|to)\s+(?P<what>.+)",
        Category.PLACES,
        topic="home",
        fact_key="home_city",
        predicate="lives_in",
        importance=0.8,
    ),
    Rule(
        r"^(?:i come|i'm|i am)\s+(?:originally\s+)?from\s+(?P<what>.+)",
        Category.PLACES,
        topic="origin",
        fact_key="origin",
        predicate="comes_from",
        importance=0.7,
    ),
    Rule(
        r"^(?:i work|i'm working|i am working)\s+as\s+(?:a|an)?\s*(?P<what>.+)",
        Category.WORK,
        topic="work",
        fact_key="occupation",
        predicate="works_as",
        importance=0.8,
    ),
    Rule(
        r"^(?:i work|i'm working|i am working)\s+(?:at|for)\s+(?P<what>.+)",
        Category.WORK,
        topic="work",
        fact_key="employer",
        predicate="works_at",
        importance=0.7,
    ),
    Rule(
        r"^(?:i study|i'm studying|i am studying)\s+(?P<what>.+)",
        Category.WORK,
        topic="studies",
        fact_key="studies",
        predicate="studies",
        importance=0.7,
    ),
    Rule(
        r"^(?:i speak|i can speak)\s+(?P<what>.+)",
        Category.SKILLS,
        topic="languages",
        predicate="speaks",
    ),
    Rule(
        r"^(?:i prefer|i like|i love|i enjoy|i adore|i'd rather|i would rather)\s+(?P<what>.+)",
        Category.PREFERENCES,
        kind=MemoryNode.Kind.PREFERENCE,
        predicate="likes",
        importance=0.6,
    ),
    Rule(
        r"^(?:i hate|i dislike|i don't like|i do not like|i can't stand|i cannot stand)"
        r"\s+(?P<what>.+)",
        Category.PREFERENCES,
        kind=MemoryNode.Kind.PREFERENCE,
        predicate="dislikes",
        importance=0.6,
    ),
    Rule(
        r"^(?:i want to|i'd like to|i would like to|i plan to|i'm planning to|i hope to"
        r"|my goal is to|i'm trying to|i am trying to)\s+(?P<what>.+)",
        Category.GOALS,
        topic="goals",
        predicate="has_goal",
    ),
    Rule(
        rf"^(?:my|our)\s+(?P<rel>{_RELATIVES})\b(?:'s name is|\s+is called|\s+is named)?"
        r"\s*(?P<what>.*)",
        Category.RELATIONSHIPS,
        predicate="has_relative",
        importance=0.7,
    ),
    Rule(
        rf"^(?:(?:my|our)\s+(?P<rel>{_PETS})\b|(?:i|we) have an?\s+(?P<pet>{_PETS})\b)"
        r"(?:\s+(?:called|named))?"
        r"\s*(?P<what>.*)",
        Category.RELATIONSHIPS,
        topic="pets",
        predicate="has_pet",
        importance=0.6,
    ),
]
_COMPILED = [(re.compile(rule.pattern), rule) for rule in RULES]
# Said of the user by a first-person clause no rule places; a signal, not a fact of its own.
_STATEMENT_START = re.compile(
    r"^(?:i am|i'm|i've|i have|i had|i was|i \w+(?:ed|s)\b|my \w+|i (?:work|live|like|love"
    r"|prefer|hate|speak|study|cook|play|run|drive|own|use|eat|drink|need|want))\b"
)


@dataclass(frozen=True)
class Statement:
    """One fact about the user, with the words of theirs it comes from."""

    description: str
    quote: str
    kind: str
    topic: str
    fact_key: str
    # None: neither a rule nor the words say what the fact is about (`category_of_words`).
    category: str | None
    importance: float
    # (predicate, object, category) of the triple (user, predicate, object), if a rule knows it.
    triple: tuple[str, str, str] | None = None
    valid_until: date | None = None


def sentences(text: str) -> list[str]:
    return [part.strip() for part in _SENTENCE.split(text) if part.strip()]


def clauses(sentence: str) -> list[str]:
    plain = sentence.replace("’", "'").rstrip(".!…").strip()
    parts = (
        _TRAILING_PLEASE.sub("", _DISCOURSE.sub("", part.strip(" ,")))
        for part in _CLAUSE.split(plain.casefold())
    )
    return [part for part in parts if part]


def quoted_sentences(*, quote: str, text: str) -> list[str]:
    """The sentences of `text` that a model's quote points at: each sentence of the quote that
    is a span of `text` (two words at least) names the sentence of `text` holding it.

    A small model runs a quote on past the user's sentence ("We have a cat called Pepe, and he
    plays the violin…"): then the longest start of it, cut at a comma or a conjunction, that is
    a span of `text` (three words at least) names the sentence; what it ran on with is not
    taken.
    """
    found = []
    for part in sentences(quote) or [quote]:
        if len(grounding.words(part)) < MIN_POINTER_WORDS:
            continue
        sentence = _holding(part, text) or next(
            (
                held
                for start in _starts(part)
                if len(grounding.words(start)) >= MIN_CLAUSE_WORDS
                and (held := _holding(start, text))
            ),
            None,
        )
        if sentence is not None and sentence not in found:
            found.append(sentence)
    return found


_RUN_ON = re.compile(r"\s*[,;:]\s*|\s+(?:and|but|so|because|while)\s+", re.IGNORECASE)


def _starts(part: str) -> list[str]:
    """The starts of a quote that end at a comma or a conjunction, longest first."""
    cuts = [match.start() for match in _RUN_ON.finditer(part)]
    return [part[:cut] for cut in reversed(cuts) if cut > 0]


def _holding(part: str, text: str) -> str | None:
    """The sentence of `text` of which `part` is a span."""
    return next(
        (sentence for sentence in sentences(text) if grounding.containment(part, sentence) == 1.0),
        None,
    )


def is_question(sentence: str) -> bool:
    return sentence.rstrip().endswith("?")


def states_something(text: str) -> bool:
    """Does the message state something about its writer: a sentence, not a question, whose
    clause starts with the user as subject in a way the rules know ("I live…", "my son…")?"""
    for sentence in sentences(text):
        if is_question(sentence):
            continue
        for clause in clauses(sentence):
            if _rule_for(clause) is not None or _STATEMENT_START.match(clause):
                return True
    return False


def statements_of(sentence: str, *, today: date, quote: str = "") -> list[Statement]:
    """The facts a sentence of the user's states: one per clause, typed by the rules.

    Given the `quote` that pointed at the sentence, a clause without the user as its subject
    ("Plan a weekend in Porto, I'm vegetarian") counts only if the quote shares its words; one
    whose subject stands for something said before ("that is all for now") never does, unless
    it names the user.
    """
    quoted = set(grounding.words(quote))
    found = []
    for clause, original in _long_clauses(sentence):
        if not _FIRST_PERSON.match(clause) and (
            (quote and len(quoted & set(grounding.words(clause))) < 2)
            or (_STANDS_FOR_BEFORE.match(clause) and not _NAMES_THE_USER.search(clause))
        ):
            continue
        found.append(_statement(clause, original, today=today))
    return found


# A rule's value that stands for something said before ("I like it") says nothing on its own.
_VAGUE_VALUE = re.compile(r"^(?:it|that|this|these|those|them|him|her|you|one|so|too)\b")


def ruled_statements(sentence: str, *, today: date) -> list[Statement]:
    """The facts of a sentence of the user's that a rule places ("I work as a carpenter",
    "my daughter Sofia is allergic to peanuts"): the user's own statement about themselves,
    whether or not a model pointed at it."""
    found = []
    for clause, original in _long_clauses(sentence):
        ruled = _rule_for(clause)
        if ruled is None:
            continue
        value = (ruled[1].groupdict().get("what") or "").strip(" .,!\"'")
        if value and _VAGUE_VALUE.match(value):
            continue
        found.append(_statement(clause, original, today=today))
    return found


def _long_clauses(sentence: str) -> list[tuple[str, str]]:
    """(casefolded clause, its original spelling) of a sentence that is no question, for each
    clause long enough to say something (MIN_CLAUSE_WORDS)."""
    if is_question(sentence):
        return []
    parts = clauses(sentence)
    return [
        (clause, original)
        for clause, original in zip(parts, _original_spans(sentence, parts), strict=True)
        if len(grounding.words(clause)) >= MIN_CLAUSE_WORDS
    ]


def _original_spans(sentence: str, parts: list[str]) -> list[str]:
    """Each casefolded clause in the sentence's own spelling (names keep their capitals)."""
    plain = sentence.replace("’", "'")
    folded = plain.casefold()
    spans, start = [], 0
    for part in parts:
        at = folded.find(part, start)
        if at == -1 or len(folded) != len(plain):
            spans.append(part)
            continue
        spans.append(plain[at : at + len(part)])
        start = at + len(part)
    return spans


def _rule_for(clause: str) -> tuple[Rule, re.Match] | None:
    for regex, rule in _COMPILED:
        match = regex.match(clause)
        if match is not None:
            return rule, match
    return None


def _statement(clause: str, original: str, *, today: date) -> Statement:
    description = third_person(original)
    valid_until = _valid_until(clause, today=today)
    category = Category.HEALTH if _HEALTH.search(clause) else None
    found = _rule_for(clause)
    if found is None:
        category = category_of_words(clause)
        return Statement(
            description=description,
            quote=original,
            kind=MemoryNode.Kind.FACT,
            topic="health" if category == Category.HEALTH else "",
            fact_key="",
            category=category,
            importance=DEFAULT_IMPORTANCE,
            valid_until=valid_until,
        )
    rule, match = found
    value = _value(original, match)
    relative = match.groupdict().get("rel") or match.groupdict().get("pet") or ""
    topic = rule.topic or relative or " ".join(value.casefold().split()[:3])
    fact_key = rule.fact_key
    obj = _single_value(value) if fact_key else value
    if rule.predicate == "has_relative":
        name = _leading_name(value)
        # "My daughter is called Sofia" names her; "my daughter Sofia is 7" is another fact.
        fact_key = f"{relative}_name" if name and name == value else ""
        obj = f"{name} ({relative})" if name else relative
    elif rule.predicate == "has_pet":
        obj = relative or match.group("pet")
    return Statement(
        description=description,
        quote=original,
        kind=rule.kind,
        topic=topic[:200],
        fact_key=fact_key,
        category=category or rule.category,
        importance=rule.importance,
        triple=(rule.predicate, obj[:1000], rule.category) if obj and rule.predicate else None,
        valid_until=valid_until,
    )


def category_of_words(clause: str) -> str | None:
    """The category a clause's words name, or None when none does ("I collect old stamps").

    No category is a default: a user who lets reflection learn only some categories has a
    fact of no category withheld (`category_allowed`), not filed under one they allowed.
    """
    folded = clause.casefold()
    for category, words in _CATEGORY_WORDS:
        if words.search(folded):
            return category
    return None


def category_allowed(category: str | None, *, allowed: set[str]) -> bool:
    """May a fact of this category be learnt? One of no category only when every one may."""
    if category is None:
        return allowed >= set(Category.values)
    return category in allowed


def _value(original: str, match: re.Match) -> str:
    """The rule's value in the user's spelling, without a trailing time ("Rome last week")."""
    start, end = match.span("what")
    value = original[start:end] if len(original) == len(match.string) else match.group("what")
    value = value.strip(" .,!\"'")
    return _TRAILING_TIME.sub("", value) or value


def _single_value(value: str) -> str:
    """A one-valued fact's value up to a comma or "and" ("Lisbon and it's hot" -> "Lisbon")."""
    return re.split(r",|\s+(?:and|but)\s+", value, maxsplit=1)[0].strip() or value


def _leading_name(value: str) -> str:
    """The capitalised name right after a relative ("Sofia is allergic…" -> "Sofia")."""
    names = []
    for word in value.split():
        if not word[:1].isupper():
            break
        names.append(word.strip(",."))
    return " ".join(names)


_STARTS = [
    (r"^my\b", "The user's"),
    # "We have a cat", "our son": the user's household, which is the user's own.
    (r"^we have\b", "The user has"),
    (r"^our\b", "The user's"),
]
# "I" as a subject: at the start, or after a word that is not a name ("Sofia says I cook
# well", "and I", "that I"), so that "World War I ended" keeps its numeral. Lower case too:
# people type "i".
_SUBJECT_I = re.compile(r"(?:^|(?<=\s))(?:I|i)(?='|\s|$)")
# What "I" becomes with the words after it: the contraction, or the first verb made third
# person past the adverbs before it ("I really like jazz" -> "the user really likes jazz").
_CONTRACTED = {"'m": "is", "'ve": "has", "'d": "would", "'ll": "will"}
_IRREGULAR_PRESENT = {
    "am": "is",
    "have": "has",
    "do": "does",
    "don't": "does not",
    "haven't": "hasn't",
    "aren't": "isn't",
}
# Kept as written: modals, past forms that need no agreement, and negated past or modals.
_UNCHANGED = {"can", "could", "will", "would", "should", "must", "might", "may", "shall",
              "was", "did", "had", "can't", "cannot", "couldn't", "won't", "wouldn't",
              "shouldn't", "wasn't", "didn't", "hadn't", "mustn't"}  # fmt: skip
_ADVERBS = {"also", "just", "never", "always", "still", "often", "sometimes", "already",
            "even", "only", "now", "again", "ever", "almost", "rarely", "seldom", "hardly",
            "mostly", "usually", "really", "actually", "recently", "currently", "finally",
            "generally", "normally", "sometime", "then", "too", "not"}  # fmt: skip
# Verbs that end in "ly" like an adverb.
_LY_VERBS = {"apply", "reply", "rely", "supply", "multiply", "comply", "imply", "fly", "ally",
             "bully", "rally", "tally"}  # fmt: skip


def third_person(clause: str) -> str:
    """A clause of the user's in the third person: "I live in Turin" -> "The user lives in
    Turin", "Sofia says I cook well" -> "Sofia says the user cooks well". After a first-person
    start the user's things are "their"; in a clause about someone else, "the user's"."""
    text = clause.strip().rstrip(".!…")
    for pattern, replacement in _STARTS:
        found = re.match(pattern, text, flags=re.IGNORECASE)
        if found:
            return _sentence_case(_subjects(replacement + _pronouns_after(text[found.end() :])))
    if _SUBJECT_I.match(text):
        return _sentence_case(_subjects("The user" + _pronouns_after(text[1:])))
    # "It is my birthday tomorrow" -> "It is the user's birthday tomorrow".
    text = re.sub(r"\bmy\b", "the user's", text, flags=re.IGNORECASE)
    text = re.sub(r"\b(?:me|myself)\b", "the user", text, flags=re.IGNORECASE)
    return _sentence_case(_subjects(text))


def _subjects(text: str) -> str:
    """Every "I" of `text` made "the user", with its verb: "The user thinks I am right" ->
    "The user thinks the user is right". The first word of `text` may be "The user" already."""
    if text.startswith("The user") and not text.startswith("The user's"):
        head, rest = "The user", text[len("The user") :]
    else:
        head, rest = "", text
        found = _SUBJECT_I.search(rest)
        while found and _names_before(rest, found.start()):
            found = _SUBJECT_I.search(rest, found.end())
        if found is None:
            return text
        before, rest = rest[: found.start()], rest[found.end() :]
        head = before + "the user"
        if before.split()[-1:] in (["and"], ["or"], ["nor"]):
            # "My son and I play chess": the verb is already the pair's.
            return head + (_subjects(rest) if _SUBJECT_I.search(rest) else rest)
    rest = _agreeing(rest)
    return head + _subjects(rest) if _SUBJECT_I.search(rest) else head + rest


def _names_before(text: str, at: int) -> bool:
    """Whether the word before `at` is a name or title ("World War I"), not the clause's
    first word ("Then I moved")."""
    before = text[:at].split()
    return len(before) > 1 and before[-1][:1].isupper() and text[at] == "I"


def _agreeing(rest: str) -> str:
    """The words after a subject that was "I", agreeing with "the user": the contraction
    spelt out, or the first verb after any adverbs made third person."""
    for contraction, verb in _CONTRACTED.items():
        if rest.casefold().startswith(contraction):
            return f" {verb}{rest[len(contraction) :]}"
    at = 0
    for found in re.finditer(r"\s+([A-Za-z']+)", rest):
        if found.start() != at:
            break
        word = found.group(1).casefold()
        at = found.end()
        if word in _ADVERBS or (word.endswith("ly") and len(word) > 4 and word not in _LY_VERBS):
            continue
        return rest[: found.start(1)] + _present_third(found.group(1)) + rest[found.end(1) :]
    return rest


def _present_third(verb: str) -> str:
    """A verb after "I" as after "the user": "like" -> "likes", "am" -> "is"; a past form
    ("went", "moved") or a modal as it is."""
    import simplemma

    word = verb.casefold()
    if word in _IRREGULAR_PRESENT:
        return _IRREGULAR_PRESENT[word]
    if word in _UNCHANGED or word.endswith("ed") or "'" in word:
        return verb
    if simplemma.lemmatize(word, lang="en").casefold() != word:
        return verb  # an inflected form: "went", "ran", "made"
    return _third_person_verb(word)


def _pronouns_after(rest: str) -> str:
    rest = re.sub(r"\b(?:my|our)\b", "their", rest, flags=re.IGNORECASE)
    return re.sub(r"\b(?:me|myself)\b", "them", rest, flags=re.IGNORECASE)


def _third_person_verb(verb: str) -> str:
    verb = verb.casefold()
    if verb.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    if verb.endswith("y") and verb[-2:-1] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


def _sentence_case(text: str) -> str:
    return text[:1].upper() + text[1:]


def _valid_until(clause: str, *, today: date) -> date | None:
    """The last day of something true only for a while, when the words say which."""
    if re.search(r"\btomorrow\b", clause):
        return today + timedelta(days=1)
    if re.search(r"\b(?:today|tonight|this (?:morning|afternoon|evening))\b", clause):
        return today
    return None
