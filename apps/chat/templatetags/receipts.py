from __future__ import annotations

from django import template

from apps.chat.recall import panel_items, recalled_texts
from apps.chat.receipts import Receipt, receipt_for, receipt_nodes
from apps.chat.turn_status import Part, final_parts

register = template.Library()


@register.simple_tag(takes_context=True)
def memory_receipt(context, message) -> Receipt:
    """The receipt of one answer. On the conversation page the memories of every answer are
    read in one query, the first time a receipt asks; a pushed message reads its own."""
    conversation_id = message.conversation_id
    messages = context.get("chat_messages")
    if messages is None:
        return receipt_for(
            message,
            receipt_nodes(conversation_id=conversation_id, messages=[message]),
            recalled_texts(conversation_id=conversation_id, messages=[message]),
        )
    # The bottom of the render context lasts the whole page; each include pushes its own.
    cache = context.render_context.dicts[0]
    if "receipt_nodes" not in cache:
        cache["receipt_nodes"] = receipt_nodes(conversation_id=conversation_id, messages=messages)
    if "recalled_texts" not in cache:
        cache["recalled_texts"] = recalled_texts(conversation_id=conversation_id, messages=messages)
    return receipt_for(message, cache["receipt_nodes"], cache["recalled_texts"])


@register.simple_tag(takes_context=True)
def recalled(context, message) -> dict:
    """What one answer recalled and why, for its "What I used" panel; the texts read once per
    page (for every answer on it), or for the one answer a push renders."""
    conversation_id = message.conversation_id
    messages = context.get("chat_messages")
    if messages is None:
        texts = recalled_texts(conversation_id=conversation_id, messages=[message])
        said = message.reply_to.content if message.reply_to_id else ""
        return panel_items(message.trace, texts, said)
    cache = context.render_context.dicts[0]
    if "recalled_texts" not in cache:
        cache["recalled_texts"] = recalled_texts(conversation_id=conversation_id, messages=messages)
    if "said" not in cache:
        # The page's messages are read already: the user's words each answer replied to.
        cache["said"] = {m.pk: m.content for m in messages if m.role == m.Role.USER}
    said = cache["said"].get(message.reply_to_id, "")
    return panel_items(message.trace, cache["recalled_texts"], said)


@register.simple_tag
def turn_parts(message) -> list[Part]:
    """The status line of a saved reply (what each part of its turn did)."""
    return final_parts(message)
