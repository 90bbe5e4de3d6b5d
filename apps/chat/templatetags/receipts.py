from __future__ import annotations

from django import template

from apps.chat.receipts import Receipt, receipt_for, receipt_nodes

register = template.Library()


@register.simple_tag(takes_context=True)
def memory_receipt(context, message) -> Receipt:
    """The receipt of one answer. On the conversation page the memories of every answer are
    read in one query, the first time a receipt asks; a pushed message reads its own."""
    messages = context.get("chat_messages")
    if messages is None:
        return receipt_for(
            message, receipt_nodes(conversation_id=message.conversation_id, messages=[message])
        )
    # The bottom of the render context lasts the whole page; each include pushes its own.
    cache = context.render_context.dicts[0]
    if "receipt_nodes" not in cache:
        cache["receipt_nodes"] = receipt_nodes(
            conversation_id=message.conversation_id, messages=messages
        )
    return receipt_for(message, cache["receipt_nodes"])
