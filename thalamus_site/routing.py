from __future__ import annotations

from apps.chat.routing import websocket_urlpatterns as chat_websockets
from apps.dashboard.routing import websocket_urlpatterns as dashboard_websockets
from apps.imports.routing import websocket_urlpatterns as import_websockets

websocket_urlpatterns = [*chat_websockets, *dashboard_websockets, *import_websockets]
