from __future__ import annotations

from django.urls import re_path

from apps.dashboard.consumers import MindConsumer

websocket_urlpatterns = [
    re_path(r"^ws/mind/(?P<who>me|global|\d+)/$", MindConsumer.as_asgi()),
]
