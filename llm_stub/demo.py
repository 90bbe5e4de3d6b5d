"""The demo model (``--demo``, or a request for the model ``demo``): a friendly canned answer,
titles, and the background calls (reflection, criticism, episodes, the world state) answered
from what the user says about themselves, so a newcomer sees memory work without a real LLM."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from llm_stub.schemas import fit_to_schema


def _gist(text: str, limit: int = 120) -> str:
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", 0, limit)
    return text[: cut if cut > limit // 2 else limit].rstrip() + "…"


def demo_reply(user_text: str) -> str:
    """The friendly canned answer of the demo model, with a Markdown rendering sample."""
    gist = _gist(user_text)
    said = (
        f"You asked: “{gist}”. I can't really think about it, but a real model would."
        if gist
        else "You haven't asked anything yet, so go ahead and type a question!"
    )
    return (
        "Hi! I'm the **demo model** built into Thalamus: a stand-in that works without "
        "a real LLM, so my answers are canned.\n\n"
        f"{said}\n\n"
        "Here is a little Markdown so you can see rendering work:\n\n"
        "- **bold** and *italic* text\n"
        "- bullet lists like this one\n"
        "- inline math such as $e^{i\\pi}+1=0$\n\n"
        "```python\n"
        "def greet(name: str) -> str:\n"
        '    return f"Hello, {name}!"\n'
        "```\n\n"
        "Connect a real model to get genuine answers."
    )


def demo_title(prompt: str) -> str:
    """The demo model gives no title (an empty reply): the product then names the conversation
    by the user's first words, as it does whenever a model gives none worth keeping."""
    return ""


# ------------------------------------------------------------------------ demo memory
# The demo model remembers what the user says about themselves in plain first-person
# statements, so a newcomer sees memories form, get criticised and consolidate without a
# real LLM. Only the user's line of the exchange is read: never the assistant's reply, nor the
# memories a prompt lists as already known.


@dataclass(frozen=True)
class DemoStatement:
    """A first-person statement of the user's, as the demo model remembers it."""

    quote: str
    description: str
    kind: str
    topic: str
    fact_key: str
    importance: float
    predicate: str
    object: str
    category: str | None


@dataclass(frozen=True)
class _DemoPattern:
    regex: re.Pattern[str]
    description: str  # with {what}, {verb} and {thing}
    kind: str
    topic: str  # a fixed topic, or "" to take it from the object
    fact_key: str  # with {topic} and {verb}
    importance: float
    predicate: str  # with {verb} and {thing}
    category: str | None


# Words a statement may start with before its first-person subject ("Well, I live in Rome").
_LEAD = r"^(?:(?:hi|hello|hey|well|so|also|and|oh|ok|okay|by the way|btw|actually)\b[\s,!]*)*"
_ADVERBS = r"(?:(?:really|also|absolutely|just|actually|usually|often|mostly|still|do)\s+)*"
_WHAT = r"(?P<what>.+)"
_GENERIC_VERBS = (
    "build|make|write|play|own|speak|study|teach|cook|collect|grow|design|develop|paint|"
    "repair|restore|brew|bake|knit|sew|code|program|ride|climb|sing|fix|practise|practice"
)
_LIKING_VERBS = {
    "like": "likes",
    "love": "loves",
    "enjoy": "enjoys",
    "adore": "adores",
    "prefer": "prefers",
    "hate": "hates",
    "dislike": "dislikes",
    "don't like": "doesn't like",
    "do not like": "does not like",
    "can't stand": "can't stand",
}
_PREDICATES = {"doesn't like": "dislikes", "does not like": "dislikes", "can't stand": "dislikes"}


def _demo_pattern(
    pattern: str,
    description: str,
    kind: str,
    topic: str,
    fact_key: str,
    importance: float,
    predicate: str,
    category: str | None,
) -> _DemoPattern:
    return _DemoPattern(
        re.compile(_LEAD + pattern, re.IGNORECASE),
        description,
        kind,
        topic,
        fact_key,
        importance,
        predicate,
        category,
    )


def _name_pattern(pattern: str) -> _DemoPattern:
    return _demo_pattern(
        pattern, "The user's name is {what}.", "persona", "name", "name", 0.9, "name", "identity"
    )


def _home_pattern(pattern: str) -> _DemoPattern:
    return _demo_pattern(
        pattern,
        "The user lives in {what}.",
        "persona",
        "home",
        "home_city",
        0.8,
        "lives_in",
        "places",
    )


def _job_pattern(pattern: str) -> _DemoPattern:
    return _demo_pattern(
        pattern,
        "The user works as {what}.",
        "persona",
        "work",
        "occupation",
        0.8,
        "works_as",
        "work",
    )


def _liking_pattern(pattern: str, verb: str | None = None) -> _DemoPattern:
    verb_text = verb or "{verb}"
    return _demo_pattern(
        pattern,
        f"The user {verb_text} {{what}}.",
        "preference",
        "",
        "preference_{topic}",
        0.7,
        verb_text,
        "preferences",
    )


_DEMO_PATTERNS: tuple[_DemoPattern, ...] = (
    _name_pattern(rf"(?:my name is|my name's|i am called|i'm called|call me) {_WHAT}"),
    _home_pattern(rf"i {_ADVERBS}(?:live|reside) in {_WHAT}"),
    _demo_pattern(
        rf"(?:i am|i'm|i come) from {_WHAT}",
        "The user comes from {what}.",
        "persona",
        "origin",
        "hometown",
        0.7,
        "comes_from",
        "places",
    ),
    _job_pattern(rf"i {_ADVERBS}work as {_WHAT}"),
    _demo_pattern(
        rf"i {_ADVERBS}work (?:at|for) {_WHAT}",
        "The user works at {what}.",
        "persona",
        "work",
        "employer",
        0.7,
        "works_at",
        "work",
    ),
    _demo_pattern(
        rf"my (?:favourite|favorite) (?P<thing>[\w ]+?) is {_WHAT}",
        "The user's favourite {thing} is {what}.",
        "preference",
        "",
        "favourite_{topic}",
        0.7,
        "favourite_{thing}",
        "preferences",
    ),
    _liking_pattern(rf"i {_ADVERBS}(?P<verb>{'|'.join(_LIKING_VERBS)}) {_WHAT}"),
    _demo_pattern(
        rf"i {_ADVERBS}(?P<verb>{_GENERIC_VERBS}) {_WHAT}",
        "The user {verb} {what}.",
        "fact",
        "",
        "{verb}_{topic}",
        0.6,
        "{verb}",
        None,
    ),
    # German, Italian, French and Spanish: names, homes, jobs and likings.
    _name_pattern(rf"(?:ich heiße|ich heisse|mein name ist|mi chiamo|il mio nome è) {_WHAT}"),
    _name_pattern(rf"(?:je m'appelle|mon nom est|me llamo|mi nombre es) {_WHAT}"),
    _home_pattern(rf"(?:ich wohne in|ich lebe in|vivo a|vivo in|abito a|abito in) {_WHAT}"),
    _home_pattern(rf"(?:j'habite à|j'habite a|j'habite en|je vis à|je vis en|vivo en) {_WHAT}"),
    _job_pattern(rf"(?:ich arbeite als|lavoro come|je travaille comme|trabajo como) {_WHAT}"),
    _liking_pattern(
        rf"(?:ich mag|mi piace|mi piacciono|j'aime|me gusta|me gustan) {_WHAT}", "likes"
    ),
    _liking_pattern(rf"(?:ich liebe|amo|j'adore|me encanta|me encantan) {_WHAT}", "loves"),
    _liking_pattern(rf"(?:ich hasse|odio|je déteste) {_WHAT}", "hates"),
)

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
# A new clause starts where a comma or a conjunction is followed by a first-person subject
# (or, in Italian and Spanish, a first-person verb: "e vivo a Roma").
_FIRST_PERSON = (
    r"(?=(?:i|i'm|my|ich|mein|io|mi|je|j'|mon|yo|me|vivo|abito|lavoro|trabajo|amo|odio)\b)"
)
_CLAUSE_BREAK = re.compile(
    rf"\s*[,;]\s*{_FIRST_PERSON}"
    rf"|\s*[,;]?\s+(?:and|but|so|because|und|aber|e|ma|et|mais|y|pero)\s+{_FIRST_PERSON}",
    re.IGNORECASE,
)
_ARTICLES = re.compile(
    r"^(?:the|a|an|my|some|il|lo|la|i|gli|le|l'|der|die|das|den|ein|eine|les|un|une|el|los|"
    r"las|una|uno)\s*\b",
    re.IGNORECASE,
)
_TOPIC_CUT = re.compile(
    r"\s+(?:over|to|than|more|rather|in|on|at|with|for|from|because|when|if|as)\b.*$",
    re.IGNORECASE,
)
# "I like it" says nothing that could be remembered on its own.
_EMPTY_OBJECTS = frozenset(
    {"it", "that", "this", "you", "them", "him", "her", "me", "so", "too", "one", "ones"}
)


def _third_person(verb: str) -> str:
    if verb in _LIKING_VERBS:
        return _LIKING_VERBS[verb]
    if re.search(r"(s|sh|ch|x|z|o)$", verb):
        return verb + "es"
    if re.search(r"[^aeiou]y$", verb):
        return verb[:-1] + "ies"
    return verb + "s"


def _slug(text: str) -> str:
    return re.sub(r"[\W_]+", "_", text.casefold()).strip("_")[:60]


def _demo_topic(what: str) -> str:
    topic = _TOPIC_CUT.sub("", _ARTICLES.sub("", what.strip()))
    topic = re.sub(r"^to\s+", "", topic, flags=re.IGNORECASE)
    return " ".join(topic.split()[:3]).casefold()


def _demo_object(text: str) -> str:
    return text.strip().rstrip(".!?…").strip().strip("\"'“”«»").strip()


def demo_statements(user_text: str) -> list[DemoStatement]:
    """The first-person statements in what the user wrote, as memories of the demo model.

    Questions say nothing about the user ("Do I like tea?"); a statement must start its clause
    with the user as its subject, so "you think I like tea" is no statement either.
    """
    statements: list[DemoStatement] = []
    for sentence in _SENTENCE_END.split(user_text):
        sentence = sentence.strip()
        if not sentence or sentence.endswith("?"):
            continue
        plain = sentence.replace("\u2019", "'")
        for clause in _CLAUSE_BREAK.split(plain):
            statement = _demo_statement(clause.strip(), quote=sentence)
            if statement is not None:
                statements.append(statement)
    return statements


def _demo_statement(clause: str, *, quote: str) -> DemoStatement | None:
    for pattern in _DEMO_PATTERNS:
        match = pattern.regex.match(clause)
        if match is None:
            continue
        what = _demo_object(match.group("what"))
        if not what or what.casefold() in _EMPTY_OBJECTS:
            return None
        if pattern.fact_key == "name" and what.islower():
            what = what.title()
        groups = match.groupdict()
        verb = _third_person(groups["verb"].casefold()) if groups.get("verb") else ""
        thing = (groups.get("thing") or "").strip().casefold()
        topic = pattern.topic or thing or _demo_topic(what) or _slug(what)
        fields = {"what": what, "verb": verb, "thing": thing, "topic": _slug(topic)}
        predicate = pattern.predicate.format(**fields)
        return DemoStatement(
            quote=quote,
            description=pattern.description.format(**fields),
            kind=pattern.kind,
            topic=topic,
            fact_key=pattern.fact_key.format(**fields),
            importance=pattern.importance,
            predicate=_slug(_PREDICATES.get(predicate, predicate)),
            object=_ARTICLES.sub("", what).strip() or what,
            category=pattern.category,
        )
    return None


def _exchange_user_text(prompt: str) -> str:
    """The user's message in a prompt's quoted exchange: from its first ``user:`` line up to
    the next ``assistant:`` line, so that nothing the assistant wrote is ever taken for it."""
    start = re.search(r"^user: ", prompt, flags=re.MULTILINE)
    if start is None:
        return ""
    end = prompt.find("\nassistant: ", start.end())
    return prompt[start.end() : end if end != -1 else len(prompt)]


_NODE_LINE = re.compile(r"^\[(\d+)\] \w+, topic .*?, key .*?: (.+)$", re.MULTILINE)
# The extraction prompt's user messages, one "message_N: …" line each (apps.cognition.reflection).
_EXTRACT_MESSAGE = re.compile(
    r"^(message_\d+): (.*?)(?=\nmessage_\d+: |\n\n|\Z)", re.MULTILINE | re.DOTALL
)


def _demo_quotes(prompt: str) -> dict[str, Any]:
    """The sentences of each user message that state something about the user, quoted."""
    return {
        key: list(dict.fromkeys(s.quote for s in demo_statements(text)))[:2]
        for key, text in _EXTRACT_MESSAGE.findall(prompt)
    }


def _same(a: str, b: str) -> bool:
    """The same statement, whatever its case and closing full stop."""
    return a.casefold().rstrip(".") == b.casefold().rstrip(".")


def _demo_verdict(prompt: str) -> dict[str, Any]:
    node = _NODE_LINE.search(prompt)
    memory = node.group(2).strip() if node else "this memory"
    said = _exchange_user_text(prompt)
    quote = next(
        (s.quote for s in demo_statements(said) if _same(s.description, memory)),
        None,
    )
    if quote is not None:
        return {
            "debate": (
                f"Against: “{memory}” could be a passing remark, a joke or about someone "
                "else, and one sentence is thin evidence. For: the user said it in their own "
                f"words, “{quote}”, and nothing known contradicts it. It withstands."
            ),
            "verdict": "withstands",
        }
    return {
        "debate": (
            f"Against: nothing the user wrote in this exchange says “{memory}”; it may be "
            "the assistant's guess or an over-generalisation. For: it may have come up in an "
            "earlier conversation. Without the user's own words, it fails."
        ),
        "verdict": "fails",
    }


def _demo_episode(prompt: str) -> dict[str, Any]:
    match = re.search(r"^user: (.+)$", prompt, flags=re.MULTILINE)
    gist = _gist(match.group(1) if match else "", 80)
    said = f"The user said “{gist}”" if gist else "The user said nothing yet"
    return {
        "summary": f"{said}, and the demo model answered with its canned reply.",
        "decisions": "",
        "outcome": "The demo model answered.",
        "lesson": "",
    }


_DEMO_WORKING_ON = re.compile(
    r"\b(?:i'?m|i am) (?:now )?working on (?:a |an |the |my )?([^.!?\n]{2,80})", re.IGNORECASE
)
_DEMO_FROM_NOW_ON = re.compile(r"\bfrom now on,? ([^.!?\n]{2,160})", re.IGNORECASE)


def _demo_world(prompt: str) -> dict[str, Any]:
    """The world modifier's operations for what the demo understands: a project the user works
    on, an instruction "from now on …"; otherwise no change."""
    message = prompt.split("The user's new message:", 1)[-1].split("Reply with", 1)[0]
    ops = []
    project = _DEMO_WORKING_ON.search(message)
    if project:
        ops.append({"op": "set", "path": "project", "value": project.group(1).strip()})
    instruction = _DEMO_FROM_NOW_ON.search(message)
    if instruction:
        ops.append({"op": "append", "path": "behaviour", "value": instruction.group(1).strip()})
    return {"ops": ops, "reason": "what the user said" if ops else "nothing changes"}


_DEMO_ANSWERS: dict[str, Callable[[str], dict[str, Any]]] = {
    "StatedQuotes": _demo_quotes,
    "CriticVerdict": _demo_verdict,
    "EpisodeSummary": _demo_episode,
    "WorldOps": _demo_world,
}


def demo_structured_reply(response_format: dict[str, Any], prompt: str) -> str | None:
    """The demo model's JSON for the background calls it knows, shaped by the request's own
    schema (fields it lacks are dropped, required ones it adds are filled); None for others."""
    if response_format.get("type") != "json_schema":
        return None
    spec = response_format.get("json_schema") or {}
    answer = _DEMO_ANSWERS.get(spec.get("name", ""))
    if answer is None:
        return None
    schema = spec.get("schema") or {}
    return json.dumps(fit_to_schema(answer(prompt), schema, schema), ensure_ascii=False)
