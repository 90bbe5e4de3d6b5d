"""Issue 37's real-server check: what Thalamus remembers about a user who chats the way people
type, against llama-server with SmolLM2-135M-Instruct.

Six conversations written for this check (bench/real_memory_conversations.yaml: three in
English, three in Italian), each by a user of its own, go through /v1 (the openai SDK,
streaming, the whole history each call), a message every `--pace` seconds. After each
conversation the runner waits until every reply is reflected on (the reply's trace has its
"reflection" key, written after the quiet period), then lists the user's current memories
(valid_to unset, not quarantined) and scores them:

- a stated fact is remembered when one memory's description holds every word of one of its
  `any` lists;
- a memory that holds a decoy's word and none of its `unless` words is flagged as a possible
  false fact about the user; every flag and every memory that no stated fact supports is
  printed for a reader to judge.

Run: .venv/bin/python -m bench.real_memory [--pace 8] [--slots 1] [--only en-radek]
     [--conversations bench/real_memory_fr_de_es.yaml]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections import defaultdict
from pathlib import Path

import openai
import yaml
from asgiref.sync import sync_to_async

from bench import _llama
from bench.api_ttft import _api_key
from bench.real_llm_turn import _ttft, quiet_logs, real_stack

CONVERSATIONS = Path(__file__).with_name("real_memory_conversations.yaml")
REFLECTION_WAIT_SECONDS = 600


def _user(name: str) -> str:
    from django.contrib.auth import get_user_model

    get_user_model().objects.get_or_create(username=name)
    return _api_key(name)


def _unreflected(username: str) -> int:
    from apps.chat.models import Message
    from apps.chat.turn_status import learns_nothing

    replies = Message.objects.filter(
        role="assistant", conversation__owner__username=username
    ).select_related("conversation")
    return sum(
        1
        for reply in replies
        if "reflection" not in (reply.trace or {}) and not learns_nothing(reply)
    )


def _memories(username: str) -> list[dict]:
    """The user's current memories, with what found each (the reflections' traces)."""
    from apps.chat.models import Message
    from apps.memory.models import MemoryNode

    found_by: dict[str, str] = {}
    for trace in Message.objects.filter(
        role="assistant", conversation__owner__username=username
    ).values_list("trace", flat=True):
        found_by.update(((trace or {}).get("reflection") or {}).get("found_by") or {})
    rows = (
        MemoryNode.objects.filter(owner__username=username, valid_to=None)
        .exclude(state=MemoryNode.State.QUARANTINED)
        .order_by("pk")
        .values("pk", "description", "kind", "fact_key", "source", "quote")
    )
    return [{**row, "found_by": found_by.get(str(row["pk"]), "?")} for row in rows]


def _holds(text: str, words: list) -> bool:
    # YAML reads a bare number (a grandmother's age: 94) as an int.
    return all(str(word).casefold() in text for word in words)


def _score(conversation: dict, memories: list[dict]) -> dict:
    texts = [memory["description"].casefold() for memory in memories]
    remembered = {}
    supported: set[int] = set()
    for fact in conversation["facts"]:
        hits = [
            index
            for index, text in enumerate(texts)
            if any(_holds(text, words) for words in fact["any"])
        ]
        remembered[fact["fact"]] = bool(hits)
        supported.update(hits)
    flags = []
    for decoy in conversation["decoys"]:
        for index, text in enumerate(texts):
            if any(word.casefold() in text for word in decoy["words"]) and not any(
                word.casefold() in text for word in decoy["unless"]
            ):
                flags.append((decoy["decoy"], memories[index]))
    unsupported = [memory for index, memory in enumerate(memories) if index not in supported]
    return {"remembered": remembered, "flags": flags, "unsupported": unsupported}


async def _idle(server: _llama.RealServer, limit: float = 180) -> None:
    """Until llama-server has nothing in hand (the previous conversation's critic, episode and
    title), so one conversation's background work does not stall the next one's answers."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if not await sync_to_async(server.metric)("requests_processing"):
            return
        await asyncio.sleep(2)


async def _converse(
    port: int, server: _llama.RealServer, conversation: dict, pace: float
) -> tuple[dict, list[dict], float]:
    username = f"mem-{conversation['id']}"
    await _idle(server)
    secret = await sync_to_async(_user)(username)
    client = openai.AsyncOpenAI(
        base_url=f"http://127.0.0.1:{port}/v1", api_key=secret, max_retries=0, timeout=600
    )
    history: list[dict] = []
    last_sent = 0.0
    for index, said in enumerate(conversation["turns"]):
        wait = last_sent + pace - time.monotonic()
        if wait > 0 and index:
            await asyncio.sleep(wait)
        last_sent = time.monotonic()
        history.append({"role": "user", "content": said})
        try:
            _, text, _ = await _ttft(client, "thalamus", history)
        except openai.APIError as error:
            # On one slot an answer can wait out Thalamus's timeout behind a background call;
            # the user sends the message again.
            print(f"  {conversation['id']} turn {index + 1}: {error}; sent again", flush=True)
            await _idle(server)
            _, text, _ = await _ttft(client, "thalamus", history)
        history.append({"role": "assistant", "content": text})
    await client.close()
    quiet_from = time.monotonic()
    while time.monotonic() - quiet_from < REFLECTION_WAIT_SECONDS:
        if not await sync_to_async(_unreflected)(username):
            break
        await asyncio.sleep(2)
    waited = time.monotonic() - quiet_from
    left = await sync_to_async(_unreflected)(username)
    memories = await sync_to_async(_memories)(username)
    score = _score(conversation, memories)
    score["unreflected"] = left
    return score, memories, waited


def _report(conversation: dict, score: dict, memories: list[dict], waited: float) -> None:
    remembered = score["remembered"]
    print(
        f"\n== {conversation['id']} ({conversation['language']}): remembered "
        f"{sum(remembered.values())}/{len(remembered)}, flagged {len(score['flags'])}, "
        f"reflected after {waited:.0f} s, replies not reflected: {score['unreflected']}"
    )
    for fact, hit in remembered.items():
        print(f"  {'yes' if hit else 'MISS'}  {fact}")
    for decoy, memory in score["flags"]:
        print(f"  FLAG {decoy}: {memory['description']!r} ({memory['fact_key'] or '-'})")
    print("  memories (kind | fact_key | found by | description | quote):")
    for memory in memories:
        mark = "  " if memory not in score["unsupported"] else "? "
        print(
            f"  {mark}{memory['kind']} | {memory['fact_key'] or '-'} | {memory['found_by']} | "
            f"{memory['description']!r} | {memory['quote'][:80]!r}"
        )


async def _run(
    port: int, server: _llama.RealServer, conversations: list[dict], pace: float
) -> None:
    per_language: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for conversation in conversations:
        score, memories, waited = await _converse(port, server, conversation, pace)
        _report(conversation, score, memories, waited)
        sys.stdout.flush()
        totals = per_language[conversation["language"]]
        totals[0] += sum(score["remembered"].values())
        totals[1] += len(score["remembered"])
        totals[2] += len(score["flags"])
    print("\nlanguage | remembered | flagged as false (read the flags above)")
    for language, (hit, stated, flagged) in per_language.items():
        print(f"{language} | {hit}/{stated} | {flagged}")


def main() -> None:
    quiet_logs()
    parser = argparse.ArgumentParser()
    parser.add_argument("--pace", type=float, default=8.0, help="seconds between messages")
    parser.add_argument("--slots", type=int, default=1, help="llama-server -np; 0: its default")
    parser.add_argument("--only", action="append", help="a conversation id (repeatable)")
    parser.add_argument("--conversations", type=Path, default=CONVERSATIONS, help="a YAML file")
    args = parser.parse_args()
    conversations = yaml.safe_load(args.conversations.read_text())
    if args.only:
        by_id = {conversation["id"]: conversation for conversation in conversations}
        conversations = [by_id[name] for name in args.only]
    with real_stack("thalamus-real-memory-", slots=args.slots or None) as (port, server):
        asyncio.run(_run(port, server, conversations, args.pace))
    sys.exit(0)


if __name__ == "__main__":
    main()
