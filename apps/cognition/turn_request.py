"""The answer's request: what memory knows for a turn (`turn_memory`) fitted with the history
into the model's window (`build_turn`), and fitted again for any other model the gateway asks
(`turn_prompt`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from apps.chat.models import Message
from apps.chat.selectors import history_before
from apps.cognition.notes import Note, note_text
from apps.cognition.system_prompt import system_prompt
from apps.cognition.turn_memory import MemoryForTurn
from apps.core.llm.fitting import (
    NEVER,
    Piece,
    PromptBuilder,
    Room,
    fit,
    message_piece,
)
from apps.core.llm.outcomes import TooLong
from apps.core.llm.servers import Endpoint
from apps.core.models import RuntimeConfig
from apps.core.selectors import runtime_config
from apps.language.detect import ALL_STOPWORDS
from apps.language.text import visible, words
from apps.memory.provenance import conversation_marker, datamark
from apps.memory.renderer import (
    episode_line,
    knowledge_line,
    memory_block_headings,
    memory_line,
    render_memory_block,
)


@dataclass
class PreparedTurn:
    reply: Message
    model: str
    temperature: float
    base_url: str
    messages: list[dict]
    # What the messages were fitted to; `rebuild` fits them to another model's room (a
    # fallback's, or the model an API client chose).
    room: Room
    rebuild: Callable[[Room], PreparedTurn] | None = None
    # The client's cap on the reply (None: the model's own cap).
    max_tokens: int | None = None
    # An API client's choice of model on the chat's server (None: the chat's chain).
    endpoint: Endpoint | None = None
    # The runtime configuration the turn was prepared with (the chat's chain is read from it).
    config: RuntimeConfig | None = None
    trace: dict = field(default_factory=dict)
    # The internal debate's rules and preferences (their lines); None: no debate this turn.
    debate_rules: list[str] | None = None
    # The datamark the messages' data carries (apps.memory.provenance); "": they carry none.
    marker: str = ""
    # The turn's steps as the pipeline ran them (turn_state.Spans); the answer adds its own.
    spans: object | None = None
    # Set by an API client for its call; None: the server's default.
    top_p: float | None = None
    stop: list[str] | None = None
    seed: int | None = None
    # False: the reply is not reflected on (memory off for an API call).
    remember: bool = True

    def sampling(self) -> dict:
        """The request's sampling fields besides the temperature, as the client set them."""
        fields = {"top_p": self.top_p, "stop": self.stop, "seed": self.seed}
        return {name: value for name, value in fields.items() if value is not None}


# Asked, not saved, after an answer cut short (Continue).
CONTINUE = (
    "Your answer above was cut off. Continue it exactly where it stopped, without repeating "
    "anything you already wrote and without any preamble."
)


class MessageTooLong(TooLong):
    """The user's message does not fit the model's window even on its own."""


# How long each part of the answer's prompt is kept when the window is too small (higher stays
# longer): older history, then knowledge by relevance, then memories and episodes by score, then
# who the user is (identity), then the last exchange; the system prompt (with the world state)
# and the message never go.
KEEP_KNOWLEDGE = 100
KEEP_MEMORY = 1000
KEEP_IDENTITY = 5000
KEEP_LAST_EXCHANGE = 10_000
# What the tools looked up for this very message outlasts what recall found.
KEEP_EVIDENCE = 3000


def _knowledge_keep(triples: list, text: str) -> list[float]:
    """How long each triple stays: identity longest, the others by words shared with the turn."""
    words = {word.casefold() for word in text.split() if len(word) > 2}
    keep = []
    for triple in triples:
        if triple.category == "identity":
            keep.append(KEEP_IDENTITY)
            continue
        said = f"{triple.subject} {triple.predicate.name} {triple.object}".replace("_", " ")
        keep.append(KEEP_KNOWLEDGE + sum(1 for word in said.split() if word.casefold() in words))
    return keep


def _knowledge_for(triples: list, text: str) -> list:
    """The triples the note may show: all the user's own; of the knowledge every user shares
    (no owner), only those whose subject or object the message names, as a reader of the
    message would look them up. Shared knowledge is the same for everyone and rarely about
    the message: sent on every first turn, it was most of a new user's note."""
    said = {word for word in words(text) if len(word) > 2 and word not in ALL_STOPWORDS}
    return [
        triple
        for triple in triples
        if triple.owner_id is not None or said & set(words(f"{triple.subject} {triple.object}"))
    ]


def _memories_for(hits: list) -> list:
    """The memories the note may show: the user's own as recall ranked them; a shared one
    (every user's) only when the message's words match it (the search's full-text part, which
    stems them), not for being the nearest vector to a message about something else."""
    return [hit for hit in hits if not hit.is_global or hit.components.get("text", 0.0) > 0]


def evidence_line(item, marker: str = "") -> str:
    """One piece of evidence the tools found, for the memory note: tool output is data,
    datamarked with `marker` (apps.memory.provenance)."""
    when = f" ({item.at:%Y-%m-%d})" if getattr(item, "at", None) else ""
    return f"- [{item.tool}] {datamark(visible(item.text), marker)}{when}"


EVIDENCE_HEADING = "Looked up for this message:"


def build_turn(
    *,
    reply: Message,
    history: list[Message],
    memory: MemoryForTurn,
    continue_from: str = "",
    evidence: list | tuple = (),
    client_system: str = "",
    room: Room | None = None,
) -> PreparedTurn:
    """The request for the LLM from parts already read; no database access.

    The system prompt holds what stays the same from turn to turn (the instructions, the
    user's custom instructions, the world state); what memory found for this message and what
    the tools looked up go in a note before the message itself, and earlier messages are
    replayed with the notes they were sent with (`Note`), so that a server's prompt cache
    re-reads only the new message and its note. What an earlier note still in the prompt
    already says is not said again.

    With `continue_from` (an answer cut short, its text so far), the request ends with that
    answer and the instruction to write on from where it stops.

    Everything is fitted to the model's window minus the answer's cap, by the one budgeting
    function: first the oldest history goes (the last exchange is kept longest), then the least
    relevant knowledge, then the lowest-scored memories and episodes. The user's message itself
    is never cut; one that cannot fit on its own raises MessageTooLong. `client_system` (an API
    client's own system prompt) leads the system prompt and is never dropped either; nor is
    the world state. What the tools found (`evidence`, best first) outlasts memories.
    `room`: another model's room than the chat's (`memory.limits`).
    """
    started = time.perf_counter()
    config = memory.config
    context = memory.context
    room = room or Room(memory.limits, memory.counter)
    limits = room.limits
    question, earlier = (history[-1], history[:-1]) if history else (None, [])
    # The history starts no earlier than the last turn's did (`MemoryForTurn.history_from`).
    earlier = [m for m in earlier if m.pk is None or m.pk >= memory.history_from]
    marker = _turn_marker(memory, history)
    system = _system_prompt(memory, client_system, marker)
    knowledge = _knowledge_for(context.knowledge, question.content if question else "")
    knowledge_keep = _knowledge_keep(knowledge, question.content if question else "")
    memories = _memories_for(context.memories)
    pieces = [message_piece(system)]
    # The note's tags and headings, and the world state the model proposed, counted whatever
    # else is in it.
    pieces.append(Piece(note_fixed(language=context.language, world_data=memory.world_data), NEVER))
    pieces += [
        Piece(
            knowledge_line(
                triple=triple, language=context.language, user=context.user, marker=marker
            ),
            keep,
        )
        for triple, keep in zip(knowledge, knowledge_keep, strict=True)
    ]
    pieces += [
        Piece(
            memory_line(hit.description, source=hit.source, marker=marker), KEEP_MEMORY + hit.score
        )
        for hit in memories
    ]
    pieces += [
        Piece(
            episode_line(
                summary=hit.summary,
                ended_at=hit.ended_at,
                lesson=hit.lesson,
                language=context.language,
                marker=marker,
            ),
            KEEP_MEMORY + hit.score,
        )
        for hit in context.episodes
    ]
    pieces += [
        Piece(evidence_line(item, marker), KEEP_EVIDENCE - index)
        for index, item in enumerate(evidence)
    ]
    last_exchange = len(earlier) - 2
    pieces += [
        message_piece(
            _as_sent(message, memory.notes, marker),
            index + (KEEP_LAST_EXCHANGE if index >= last_exchange else 0),
        )
        for index, message in enumerate(earlier)
    ]
    if question is not None:
        pieces.append(message_piece(question.content))
    if continue_from:
        # Its end is where to write on from; its middle may go.
        pieces += [message_piece(continue_from, shorten=True), message_piece(CONTINUE)]
    try:
        texts = fit(pieces, budget=room.budget, counter=room.counter)
    except TooLong as exc:
        raise MessageTooLong(
            f"Your message is too long for the model: it needs about {exc.needed:,} tokens "
            f"and {limits.model} has room for {exc.budget:,} (a {limits.context:,}-token window "
            f"with {limits.reply_cap:,} kept for the answer). Shorten it, or give the model a "
            "larger context window.",
            needed=exc.needed,
            budget=exc.budget,
        ) from exc
    offset = 2
    kept_triples = [
        t for t, text in zip(knowledge, texts[offset:], strict=False) if text is not None
    ]
    offset += len(knowledge)
    kept_memories = [hit for hit, text in zip(memories, texts[offset:], strict=False) if text]
    offset += len(memories)
    kept_episodes = [
        hit for hit, text in zip(context.episodes, texts[offset:], strict=False) if text
    ]
    offset += len(context.episodes)
    kept_evidence = [text for text in texts[offset : offset + len(evidence)] if text]
    offset += len(evidence)
    _make_room(texts, first=offset, count=len(earlier), budget=room.budget, counter=room.counter)
    # Each with its text as fitted: a user's message with the note it was sent with.
    kept = [(message, text) for message, text in zip(earlier, texts[offset:], strict=False) if text]
    kept_history = [message for message, _ in kept]
    replayed = [memory.notes[m.pk] for m in kept_history if m.pk in memory.notes]
    note = _note(
        memory,
        knowledge=_unsaid(kept_triples, replayed, "triples"),
        memories=_unsaid(kept_memories, replayed, "memories"),
        episodes=_unsaid(kept_episodes, replayed, "episodes"),
        evidence=kept_evidence,
        replayed=replayed,
    )
    messages = [{"role": "system", "content": system}] + [
        {"role": message.role, "content": text} for message, text in kept
    ]
    if question is not None:
        content = note.attached(question.content) if note else question.content
        messages.append({"role": question.role, "content": content})
        kept_history.append(question)
    if continue_from:
        messages += [
            {"role": "assistant", "content": texts[-2]},
            {"role": "user", "content": CONTINUE},
        ]
    memory_trace = dict(context.trace)
    kept_ids = {hit.id for hit in kept_memories}
    kept_episode_ids = {hit.id for hit in kept_episodes}
    kept_triple_ids = {triple.id for triple in kept_triples}
    memory_trace["memories"] = [m for m in memory_trace["memories"] if m["id"] in kept_ids]
    memory_trace["episodes"] = [e for e in memory_trace["episodes"] if e["id"] in kept_episode_ids]
    memory_trace["triples"] = [t for t in memory_trace["triples"] if t["id"] in kept_triple_ids]
    memory_trace["dropped_for_budget"] = {
        "memories": len(memories) - len(kept_memories),
        "episodes": len(context.episodes) - len(kept_episodes),
        "triples": len(knowledge) - len(kept_triples),
    }
    trace = {
        "memory": memory_trace,
        "history_messages": len(kept_history),
        "history_dropped": len(history) - len(kept_history),
        "notes_replayed": len(replayed),
        "prompt_tokens_estimate": room.counter.messages(messages),
        "limits": {
            "context": limits.context,
            "max_tokens": limits.reply_cap,
            "prompt_budget": limits.prompt_budget,
            "source": limits.source,
        },
        "timings_ms": {
            "memory": round(memory.ms, 2),
            "context": round((time.perf_counter() - started) * 1000, 2),
        },
    }
    if kept_history and kept_history[0].pk is not None:
        trace["history_from"] = kept_history[0].pk
    if note is not None:
        trace["note"] = note.as_trace()
        trace["note_tokens"] = room.counter.text(note.text)
    # A continuation is not debated: its draft would be half an answer, already half shown.
    debate_rules = memory.rules if not continue_from else None
    if debate_rules == []:
        trace["debate"] = {"skipped": "no rules or preferences to hold the draft to"}
        debate_rules = None
    return PreparedTurn(
        reply=reply,
        model=limits.model,
        temperature=config.temperature,
        base_url=limits.base_url,
        messages=messages,
        room=room,
        rebuild=lambda other: build_turn(
            reply=reply,
            history=history,
            memory=memory,
            continue_from=continue_from,
            evidence=evidence,
            client_system=client_system,
            room=other,
        ),
        trace=trace,
        debate_rules=debate_rules,
        marker=marker,
        config=config,
    )


# When the window forces older history out, older history goes until this share of the budget
# is free, so that the next turns fit without moving the history's start again. A prompt whose
# start moved is read again whole: on a CPU a 7B model reads some 20 tokens a second, so a
# window of 3,000 tokens read again costs minutes, while the history lost is the oldest.
HEADROOM = 0.5


def _make_room(texts: list, *, first: int, count: int, budget: int, counter) -> None:
    """Once the fit dropped some of the history (`texts[first : first + count]`), drop more of
    its oldest messages, up to the last exchange, until a share of the budget is free: the
    prompt's start then holds for several turns instead of moving a message a turn, and a
    server's prompt cache keeps the conversation. The history still starts with a user's
    message."""
    history = range(first, first + count)
    if count < 3 or all(texts[i] is not None for i in history):
        return
    used = sum(counter.text(text) for text in texts if text is not None)
    for i in history[: count - 2]:
        if texts[i] is None:
            continue
        if used <= budget * (1 - HEADROOM) and (i - first) % 2 == 0:
            break
        used -= counter.text(texts[i])
        texts[i] = None


def _turn_marker(memory: MemoryForTurn, history: list[Message]) -> str:
    """The datamark of the turn's data: memory's (the conversation's); with memory off, the
    conversation's still for the history of a conversation imported from another assistant;
    else none."""
    if memory.marker:
        return memory.marker
    if any("imported" in message.trace for message in history):
        return conversation_marker(history[-1].conversation_id if history else None)
    return ""


def _system_prompt(memory: MemoryForTurn, client_system: str, marker: str) -> str:
    return system_prompt(
        template=memory.template,
        time_zone=memory.time_zone,
        user_name=memory.user_name,
        world=memory.world,
        instructions=memory.instructions,
        client_system=client_system,
        marker=marker,
    )


def _as_sent(message: Message, notes: dict[int, Note], marker: str) -> str:
    """An earlier message as the model saw it: a user's with the note it was sent with; one of
    a conversation imported from elsewhere, datamarked (apps.memory.provenance)."""
    content = message.content
    if "imported" in message.trace:
        content = datamark(content, marker)
    note = notes.get(message.pk) if message.role == Message.Role.USER else None
    return note.attached(content) if note else content


def _unsaid(items: list, replayed: list[Note], kind: str) -> list:
    """The items no replayed note in the prompt already shows."""
    said = {i for note in replayed for i in getattr(note, kind)}
    return [item for item in items if item.id not in said]


def _note(
    memory: MemoryForTurn, *, knowledge, memories, episodes, evidence, replayed: list[Note]
) -> Note | None:
    """The note for the new message: what memory found and the tools looked up; None if
    nothing."""
    context = memory.context
    block = render_memory_block(
        knowledge=knowledge,
        memories=memories,
        episodes=episodes,
        language=context.language,
        user=context.user,
        marker=memory.marker,
    )
    if memory.world_data and not any(memory.world_data in note.text for note in replayed):
        block = "\n\n".join(part for part in [block, memory.world_data] if part)
    if evidence:
        block = "\n".join([block, "", EVIDENCE_HEADING, *evidence]).strip()
    if not block:
        return None
    return Note(
        note_text(block),
        memories=tuple(hit.id for hit in memories),
        triples=tuple(triple.id for triple in knowledge),
        episodes=tuple(hit.id for hit in episodes),
        marker=memory.marker,
    )


def note_fixed(*, language: str, world_data: str) -> str:
    """What the memory note holds whatever memory finds, as a budget counts it: its tags and
    headings, and the world state the model proposed (data, so the note's)."""
    headings = memory_block_headings(language=language)
    return note_text("\n".join(part for part in [EVIDENCE_HEADING, headings, world_data] if part))


# What a fit to another model's room changes in the turn's trace.
FITTED_TRACE_KEYS = (
    "memory",
    "history_messages",
    "history_dropped",
    "prompt_tokens_estimate",
    "limits",
)


def turn_prompt(turn: PreparedTurn) -> PromptBuilder:
    """The turn's messages for the gateway: as prepared for the chat's model, fitted again for
    any other (its trace then says what that model's window kept)."""

    def build(room: Room) -> list[dict]:
        if room == turn.room or turn.rebuild is None:
            return turn.messages
        again = turn.rebuild(room)
        turn.messages, turn.room = again.messages, room
        turn.trace.update({key: again.trace[key] for key in FITTED_TRACE_KEYS})
        return again.messages

    return build


def turn_history(*, reply: Message, config: RuntimeConfig | None = None) -> list[Message]:
    return history_before(message=reply, limit=(config or runtime_config()).short_term_window)
