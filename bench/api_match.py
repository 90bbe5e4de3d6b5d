"""How long /v1 takes to find the conversation a client's history continues, for a heavy user.

Open WebUI and other OpenAI clients send the whole history on every call and no conversation
id; /v1 finds the conversation that holds it (apps/api/selectors.py). Own database in the
embedded PostgreSQL: two users with N conversations of M messages each; then the lookup for a
history that matches one of the heavy user's conversations, and for an edited one that matches
none (a new conversation).

Run: .venv/bin/python -m bench.api_match [--conversations 1000] [--messages 50]
"""

from __future__ import annotations

import argparse
import time

from bench._harness import django_on_fresh_database, summary

RUNS = 30


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--conversations", type=int, default=1000)
    parser.add_argument("--messages", type=int, default=50)
    args = parser.parse_args()
    django_on_fresh_database(
        database="thalamus_bench_api_match",
        instance="bench-api-match",
        llm_url="http://127.0.0.1:9/v1",
    )
    from django.contrib.auth import get_user_model
    from django.db import connection

    from apps.api.selectors import conversation_sharing_history
    from apps.chat.models import Conversation, Message

    users = [get_user_model().objects.create_user(name) for name in ("heavy", "other")]
    started = time.perf_counter()
    for owner in users:
        conversations = Conversation.objects.bulk_create(
            [Conversation(owner=owner, title=f"c{i}") for i in range(args.conversations)]
        )
        Message.objects.bulk_create(
            Message(
                conversation=conversation,
                role="user" if n % 2 == 0 else "assistant",
                content=f"conversation {conversation.pk} message {n} "
                + "lorem ipsum " * 19
                + "end",
                status=Message.Status.COMPLETE,
            )
            for conversation in conversations
            for n in range(args.messages)
        )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    rows = 2 * args.conversations * args.messages
    print(f"loaded {rows:,} messages in {time.perf_counter() - started:.1f} s")
    heavy = users[0]
    target = Conversation.objects.filter(owner=heavy).order_by("pk")[args.conversations // 2]
    history = [(m.role, m.content) for m in target.messages.all()]
    edited = [*history[:-2], ("user", "a question this user never asked")]
    for label, turns, expected in (("matching", history, target), ("edited", edited, None)):
        times = []
        for _ in range(RUNS):
            sent = time.perf_counter()
            found = conversation_sharing_history(user=heavy, turns=turns)
            times.append((time.perf_counter() - sent) * 1000)
            assert found == expected, (label, found)
        print(f"{label} history ({len(turns)} messages): {summary(times[3:])}")


if __name__ == "__main__":
    main()
