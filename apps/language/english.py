"""English in the third person: a user's clause as a memory says it of "the user".

"I live in Turin" -> "The user lives in Turin", "Sofia says I cook well" -> "Sofia says the
user cooks well": the subject "I" made "the user", its verb made to agree, and "my"/"me" made
"their"/"them" (or "the user's" in a clause about someone else).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from apps.language.lemmas import lemma

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
    return _with_first_verb(rest, _present_third)


def _with_first_verb(rest: str, change: Callable[[str], str]) -> str:
    """`rest` with its first word past any adverbs (the subject's verb) changed by `change`."""
    at = 0
    for found in re.finditer(r"\s+([A-Za-z']+)", rest):
        if found.start() != at:
            break
        word = found.group(1).casefold()
        at = found.end()
        if word in _ADVERBS or (word.endswith("ly") and len(word) > 4 and word not in _LY_VERBS):
            continue
        return rest[: found.start(1)] + change(found.group(1)) + rest[found.end(1) :]
    return rest


def _present_third(verb: str) -> str:
    """A verb after "I" as after "the user": "like" -> "likes", "am" -> "is"; a past form
    ("went", "moved") or a modal as it is."""
    word = verb.casefold()
    if word in _IRREGULAR_PRESENT:
        return _IRREGULAR_PRESENT[word]
    if word in _UNCHANGED or word.endswith("ed") or "'" in word:
        return verb
    if lemma(word, language="en").casefold() != word:
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


# What a verb after "the user" becomes after "you": the irregular ones; the rest lose their
# third-person "s" ("lives" -> "live"), and past forms and modals stay as they are.
_SECOND_PERSON_VERBS = {
    "is": "are",
    "was": "were",
    "has": "have",
    "does": "do",
    "isn't": "aren't",
    "wasn't": "weren't",
    "hasn't": "haven't",
    "doesn't": "don't",
}
_THE_USER = re.compile(r"\bthe user(?:'s)?\b", re.IGNORECASE)
# Where "the user" in the middle of a sentence is a subject, whose verb then agrees with "you"
# ("Sofia says the user cooks well"); elsewhere it is an object ("Sofia visits the user").
_SUBJECT_AFTER = re.compile(
    r"(?:\b(?:says?|said|thinks?|thought|knows?|knew|believes?|that|and|but|because|when|if|"
    r"so|while)|:)\s+$",
    re.IGNORECASE,
)


def second_person(text: str) -> str:
    """A memory of "the user" as said to them: "The user lives in Ghent" -> "You live in
    Ghent", "The user's name is Ana" -> "Your name is Ana", "The user is vegan" -> "You are
    vegan". The inverse of `third_person`: after a start with the user as its subject, "their"
    is the user's too ("The user lives with their wife"). Text with no "the user", or whose
    subject's verb cannot be told ("The user, who…"), is returned as it is."""
    if not _THE_USER.search(text):
        return text
    if re.match(r"the user\b(?!')", text, flags=re.IGNORECASE):
        if not re.match(r"the user\s+[A-Za-z]", text, flags=re.IGNORECASE):
            return text
        text = re.sub(r"\btheir\b", "your", text)
    done = ""
    while found := _THE_USER.search(text):
        before, rest = text[: found.start()], text[found.end() :]
        first = not done and not before
        if found.group(0).casefold().endswith("'s"):
            said = "Your" if first else "your"
        else:
            said = "You" if first else "you"
            if first or _SUBJECT_AFTER.search(before):
                rest = _with_first_verb(rest, _second_person_verb)
        done += before + said
        text = rest
    return done + text


def _second_person_verb(verb: str) -> str:
    word = verb.casefold()
    if word in _SECOND_PERSON_VERBS:
        return _SECOND_PERSON_VERBS[word]
    if word.endswith("s") and not word.endswith("ss") and "'" not in word:
        base = lemma(word, language="en").casefold()
        if base != word and word.startswith(base[:-1] if base.endswith("y") else base):
            return base
    return verb
