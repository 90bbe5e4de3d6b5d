from __future__ import annotations

from django.urls import path

from apps.dashboard import views

app_name = "dashboard"
urlpatterns = [
    path("", views.dashboard_mine, name="mine"),
    path("global/", views.dashboard_global, name="global"),
    path("u/<int:user_id>/", views.dashboard_user, name="user"),
    path("switch", views.dashboard_switch, name="switch"),
    path("node/<int:pk>/", views.node_detail, name="node"),
]
