from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer

from apps.core.models import Event
from apps.core.services import event_record, mind_group

pytestmark = pytest.mark.django_db(transaction=True)


async def test_an_event_is_saved_and_announced_to_its_owners_mind_only(user, other_user):
    layer = get_channel_layer()
    mine = await layer.new_channel()
    theirs = await layer.new_channel()
    await layer.group_add(mind_group(user.pk), mine)
    await layer.group_add(mind_group(other_user.pk), theirs)

    event = await sync_to_async(event_record)(
        kind=Event.Kind.PERCEPTION, summary="noticed a fact", owner=user
    )

    async with asyncio.timeout(5):
        message = await layer.receive(mine)
    assert message == {"type": "mind.event", "event_id": event.pk, "kind": "perception"}
    assert (await Event.objects.aget(pk=event.pk)).owner_id == user.pk
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.3):
            await layer.receive(theirs)
