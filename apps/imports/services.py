"""Imports: an export becomes the user's conversations, a bounded batch per task, then
Thalamus reflects on its replies, a bounded batch per task.

All the state is in the Import row (what is still to read, the learning cursor, a heartbeat),
so an import whose worker died is picked up where it stopped by `imports_resume_stalled`.
A batch of conversations is read in one transaction under the row's lock, so a duplicated
task reads nothing twice; reflection claims each reply once by itself.
"""

from __future__ import annotations

import hashlib
import logging
from datetime import datetime, timedelta

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import IntegrityError, transaction
from django.db.models import F
from django.db.models.functions import Greatest
from django.template.loader import render_to_string
from django.utils import timezone
from redis.exceptions import RedisError

from apps.chat.models import Conversation, Message
from apps.cognition import reflection
from apps.core.selectors import runtime_config
from apps.core.services import task_send_on_commit
from apps.core.validation import storable_text
from apps.imports.formats import ParsedExport, export_parse
from apps.imports.models import Import, ImportedConversation, PendingConversation
from apps.language.text import visible

logger = logging.getLogger(__name__)

READ_BATCH = 20
LEARN_BATCH = 5
TITLE_CHARS = 60
# Longer than a learning batch can take (LEARN_BATCH reflections, each within the LLM task
# limits), so only an import whose task is gone looks stalled.
STALLED_AFTER = timedelta(minutes=15)
# Message.trace key of an imported message: the id of the import that added it.
TRACE_KEY = "imported"


def import_group(owner_id: int) -> str:
    return f"imports-{owner_id}"


def import_start(*, user, data: bytes, filename: str) -> tuple[Import, ParsedExport | None]:
    """The import of this file, and what was read of it; None for a file imported before (the
    same file twice is one import).

    Raises ImportFileError, naming the problem, for a file that is not an export.
    """
    sha256 = hashlib.sha256(data).hexdigest()
    earlier = Import.objects.filter(owner=user, sha256=sha256).first()
    if earlier is not None:
        return earlier, None
    export = export_parse(data=data, filename=filename)
    try:
        with transaction.atomic():
            started = Import.objects.create(
                owner=user,
                filename=storable_text(filename)[:255],
                sha256=sha256,
                source=export.source,
                conversations_total=len(export.conversations),
            )
            PendingConversation.objects.bulk_create(
                (
                    PendingConversation(upload=started, position=n, data=parsed.as_dict())
                    for n, parsed in enumerate(export.conversations)
                ),
                batch_size=500,
            )
            task_send_on_commit("imports.read", started.pk)
    except IntegrityError:
        # The same file uploaded twice at once: the other upload started it.
        return Import.objects.get(owner=user, sha256=sha256), None
    return started, export


def import_read_batch(*, import_id: int, size: int = READ_BATCH) -> Import | None:
    """Read the next `size` conversations of an import into the user's conversations."""
    with transaction.atomic():
        started = Import.objects.select_for_update().filter(pk=import_id).first()
        if started is None or started.status != Import.Status.RUNNING:
            return started
        batch = list(started.pending.order_by("position")[:size])
        for pending in batch:
            added, replies = _conversation_import(started=started, parsed=pending.data)
            started.messages_added += added
            started.replies_total += replies
        PendingConversation.objects.filter(pk__in=[pending.pk for pending in batch]).delete()
        started.conversations_done += len(batch)
        started.heartbeat_at = timezone.now()
        if not batch or started.conversations_done >= started.conversations_total:
            started.status = Import.Status.LEARNING
            task_send_on_commit("imports.learn", started.pk)
        else:
            task_send_on_commit("imports.read", started.pk)
        started.save()
        _push_on_commit(started)
    return started


def _conversation_import(*, started: Import, parsed: dict) -> tuple[int, int]:
    """Add what is new of one exported conversation: (messages added, replies to learn from)."""
    owner = started.owner
    link = (
        ImportedConversation.objects.select_related("conversation")
        .filter(owner=owner, source=started.source, external_id=parsed["external_id"][:255])
        .first()
    )
    messages = parsed["messages"]
    created = _moment(parsed["created_at"]) or _moment(messages[0]["created_at"]) or timezone.now()
    if link is None:
        # An untitled chat is named by its opening words, as the sidebar shows an untitled one.
        title = parsed["title"] or messages[0]["content"].split("\n", 1)[0][:TITLE_CHARS]
        conversation = Conversation.objects.create(owner=owner, title=visible(title)[:200])
        link = ImportedConversation.objects.create(
            owner=owner,
            source=started.source,
            external_id=parsed["external_id"][:255],
            conversation=conversation,
        )
        started.conversations_added += 1
        previous = None
    else:
        conversation = link.conversation
        previous = conversation.messages.filter(active=True).order_by("-created_at", "-id").first()
        created = previous.created_at if previous else created
    new = messages[link.message_count :]
    if not new:
        return 0, 0
    rows = Message.objects.bulk_create(
        Message(
            conversation=conversation,
            role=item["role"],
            # What no reader sees is stripped at this door as at the chat's (apps.language).
            content=visible(item["content"]),
            status=Message.Status.COMPLETE,
            trace={TRACE_KEY: started.pk},
        )
        for item in new
    )
    # created_at is set on insert; the export's times are written after, in one statement.
    moment, replies = created, 0
    for row, item in zip(rows, new, strict=True):
        moment = max(moment, _moment(item["created_at"]) or moment)
        row.created_at = moment
        if row.role == Message.Role.ASSISTANT and previous and previous.role == Message.Role.USER:
            row.reply_to = previous
            replies += 1
        # An imported conversation is one branch.
        row.parent = previous
        previous = row
    Message.objects.bulk_update(rows, ["created_at", "reply_to", "parent"])
    Conversation.objects.filter(pk=conversation.pk).update(
        created_at=created if link.message_count == 0 else conversation.created_at,
        updated_at=moment,
    )
    ImportedConversation.objects.filter(pk=link.pk).update(message_count=len(messages))
    return len(rows), replies


def _moment(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def import_learn_batch(*, import_id: int, size: int = LEARN_BATCH) -> Import | None:
    """Reflect on the next `size` imported replies, as on a reply of a live conversation; the
    memories it forms are marked as imported."""
    started = Import.objects.filter(pk=import_id).first()
    if started is None or started.status != Import.Status.LEARNING:
        return started
    reply_ids = []
    if runtime_config().reflection_enabled:
        reply_ids = list(
            Message.objects.filter(
                conversation__owner_id=started.owner_id,
                role=Message.Role.ASSISTANT,
                reply_to__isnull=False,
                pk__gt=started.learn_cursor,
                **{f"trace__{TRACE_KEY}": started.pk},
            )
            .order_by("pk")
            .values_list("pk", flat=True)[:size]
        )
    for reply_id in reply_ids:
        # Unusable answers mark the reply failed (last_attempt) rather than hold the import up;
        # an unreachable LLM raises, and the task retries from this reply.
        reflection.reflect_on_message(message_id=reply_id, last_attempt=True)
        Import.objects.filter(pk=started.pk).update(
            learn_cursor=Greatest(F("learn_cursor"), reply_id),
            replies_learnt=F("replies_learnt") + 1,
            heartbeat_at=timezone.now(),
        )
    with transaction.atomic():
        started = Import.objects.select_for_update().get(pk=import_id)
        if started.status != Import.Status.LEARNING:
            return started
        if len(reply_ids) < size:
            started.status = Import.Status.DONE
            started.finished_at = timezone.now()
            if not runtime_config().reflection_enabled:
                started.error = "Reflection is switched off: nothing was learnt from this import."
        else:
            task_send_on_commit("imports.learn", started.pk)
        started.heartbeat_at = timezone.now()
        started.save(update_fields=["status", "finished_at", "error", "heartbeat_at"])
        _push_on_commit(started)
    return started


def imports_resume_stalled(*, owner=None) -> list[int]:
    """Queue again the unfinished imports whose task is gone (a worker restarted)."""
    stalled = Import.objects.filter(
        status__in=[Import.Status.RUNNING, Import.Status.LEARNING],
        heartbeat_at__lt=timezone.now() - STALLED_AFTER,
    )
    if owner is not None:
        stalled = stalled.filter(owner=owner)
    resumed = []
    with transaction.atomic():
        for started in stalled.select_for_update(skip_locked=True):
            # The claim: moving the heartbeat keeps a second sweep from queuing it again.
            Import.objects.filter(pk=started.pk).update(heartbeat_at=timezone.now())
            task = "imports.read" if started.status == Import.Status.RUNNING else "imports.learn"
            task_send_on_commit(task, started.pk)
            resumed.append(started.pk)
    return resumed


def render_progress(started: Import) -> str:
    return render_to_string("imports/_progress.html", {"import": started})


def _push_on_commit(started: Import) -> None:
    def push() -> None:
        try:
            async_to_sync(get_channel_layer().group_send)(
                import_group(started.owner_id),
                {"type": "import.progress", "html": render_progress(started)},
            )
        except (RedisError, OSError) as exc:
            # The page reads the import again on reload; the bar waits for the next batch.
            logger.warning("pushing import progress failed: %s", exc)

    transaction.on_commit(push)
