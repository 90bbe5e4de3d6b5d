"""What memory knows for a turn (`memory_for_turn`): the recall, the rules the debate holds
the draft to, the world state, the user's settings and the notes to replay, read before the
request is built."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from apps.accounts.models import UserSettings
from apps.accounts.selectors import (
    custom_instructions,
    knowledge_language_of,
    time_zone_of,
    user_settings_for,
)
from apps.cognition.context import MemoryContext, OwnSearch
from apps.cognition.debate import rule_lines
from apps.cognition.notes import Note, conversation_replay
from apps.core.llm.limits import CHAT, ModelLimits, TokenCounter, prompt_and_limits
from apps.core.models import RuntimeConfig
from apps.core.selectors import runtime_config


@dataclass
class MemoryForTurn:
    """What a turn needs besides its history: what memory holds, the model's limits, the
    system prompt's template."""

    context: MemoryContext
    ms: float
    template: str
    user_name: str
    limits: ModelLimits
    counter: TokenCounter
    config: RuntimeConfig
    # The lines of the rules and preferences the internal debate holds the draft to; None when
    # the debate is off.
    rules: list[str] | None = None
    # The user's world state (topics, project, goals, how to answer) as a person wrote it by
    # hand, rendered; "" when empty. What the model proposed is data: `world_data`, datamarked.
    world: str = ""
    world_data: str = ""
    # The conversation's datamark (apps.memory.provenance); "" when memory is off: no data.
    marker: str = ""
    # The user's settings: their custom instructions (never dropped), their time zone, and
    # whether memory was read at all (off, or a temporary chat: nothing read, nothing learnt).
    instructions: str = ""
    time_zone: str = ""
    remember: bool = True
    # The notes earlier messages of the conversation were sent with, by message id, as they
    # are replayed (only those whose every memory is still current).
    notes: dict[int, Note] = field(default_factory=dict)
    # The first message of the history the conversation's last answer was sent with: the next
    # starts there or later, so the prompt's start holds (0: from the first).
    history_from: int = 0
    # The user's world state as read (None when memory is off), rendered again when the
    # datamark changes (`memory_marked`).
    world_state: object | None = None


def memory_marked(memory: MemoryForTurn, *, conversation_id: int) -> None:
    """Give the turn its conversation's datamark. A turn recalled before its conversation was
    saved (the first call of a new conversation through /v1) was given a random one: with the
    conversation's own, the next turn replays this turn's note and keeps its system prompt, so a
    server's prompt cache holds from the first turn on."""
    from apps.memory.provenance import conversation_marker
    from apps.memory.renderer import render_world

    marker = conversation_marker(conversation_id)
    if not memory.marker or marker == memory.marker:
        return
    memory.marker = marker
    if memory.world_state is not None:
        memory.world_data = render_world(
            memory.world_state, language=memory.context.language, proposed=True, marker=marker
        )


def memory_on(*, user, conversation, prefs: UserSettings | None = None) -> bool:
    """Does a turn in `conversation` read and write memory: the user's memory is on and the
    chat is not temporary."""
    if getattr(conversation, "temporary", False):
        return False
    return (prefs or user_settings_for(user=user)).memory_enabled


def memory_for_turn(
    *,
    user,
    conversation,
    text: str,
    config: RuntimeConfig | None = None,
    own: OwnSearch | None = None,
    recall: bool = True,
    prefs: UserSettings | None = None,
) -> MemoryForTurn:
    """What the memory knows for this turn; callers may run it while the message is saved.

    `own`: the embedding and search of `text` already under way (`turn_search_start`); `prefs`:
    the user's settings, when the caller read them with its request. Without
    `recall` (memory off for an API call) the memory, the rules and the world state stay empty.
    """
    from apps.cognition.context import memory_context_for_turn
    from apps.memory.provenance import conversation_marker
    from apps.memory.renderer import render_world
    from apps.memory.selectors import rules_and_preferences_for, world_state_for

    started = time.perf_counter()
    config = config or runtime_config()
    # The message's search, started as it arrived (the caller expects memory to be on), runs
    # while the reads below wait on the database: for a user with many memories it is the
    # longest of them. Its result is not read when memory turns out to be off for the turn;
    # without it, nothing is embedded before the settings say so.
    searching = own if recall and not getattr(conversation, "temporary", False) else None
    # Read before the recall, which spends most of its time waiting on the embedding, rather
    # than after it, when the answer waits on this.
    template, limits, counter = prompt_and_limits("answer", CHAT, config)
    prefs = prefs or user_settings_for(user=user)
    language = knowledge_language_of(prefs, config)
    chosen = {
        "instructions": custom_instructions(prefs),
        "time_zone": time_zone_of(prefs),
        "remember": memory_on(user=user, conversation=conversation, prefs=prefs),
    }
    remember = recall and chosen["remember"]
    replay = conversation_replay(
        conversation_id=getattr(conversation, "pk", None),
        limit=config.short_term_window,
        notes=remember,
    )
    if not remember:
        if searching is not None and searching.search is not None:
            searching.search.cancel()
        return MemoryForTurn(
            history_from=replay.history_from,
            context=MemoryContext(
                trace={"memories": [], "episodes": [], "triples": [], "off": True},
                language=language,
                user=user,
            ),
            **{**chosen, "remember": False},
            ms=(time.perf_counter() - started) * 1000,
            template=template,
            user_name=user.get_full_name() or user.get_username(),
            limits=limits,
            counter=counter,
            config=config,
        )
    context = memory_context_for_turn(
        user=user,
        conversation=conversation,
        text=text,
        config=config,
        language=language,
        own=searching,
        # Read while the message is embedded, rather than once the search is done.
        meanwhile=lambda: world_state_for(user_id=user.pk),
    )
    state = context.meanwhile
    rules = None
    if config.debate_enabled:
        descriptions = rules_and_preferences_for(user_id=user.pk).values_list(
            "description", flat=True
        )
        rules = rule_lines(list(descriptions))
    marker = conversation_marker(getattr(conversation, "pk", None))
    return MemoryForTurn(
        notes=replay.notes,
        history_from=replay.history_from,
        context=context,
        ms=(time.perf_counter() - started) * 1000,
        template=template,
        user_name=user.get_full_name() or user.get_username(),
        limits=limits,
        counter=counter,
        config=config,
        rules=rules,
        world=render_world(state, language=language, proposed=False),
        world_data=render_world(state, language=language, proposed=True, marker=marker),
        marker=marker,
        world_state=state,
        **chosen,
    )
