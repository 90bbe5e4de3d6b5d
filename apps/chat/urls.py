from __future__ import annotations

from django.urls import path

from apps.chat import views

app_name = "chat"
urlpatterns = [
    path("", views.conversation_list, name="list"),
    path("new", views.conversation_new, name="new"),
    path("begin", views.conversation_begin, name="begin"),
    path("<int:pk>/", views.conversation_detail, name="conversation"),
    path("<int:pk>/rename", views.conversation_rename, name="rename"),
    path("<int:pk>/delete", views.conversation_delete, name="delete"),
    path("<int:pk>/model", views.conversation_model, name="model"),
    path("<int:pk>/send", views.message_send, name="send"),
    path("<int:pk>/retry", views.message_retry, name="retry"),
    path("<int:pk>/continue", views.message_continue, name="continue"),
    path("<int:pk>/edit", views.message_edit, name="edit"),
    path("<int:pk>/stop", views.message_stop, name="stop"),
    path("<int:pk>/revise", views.message_revise, name="revise"),
    path("<int:pk>/regenerate", views.message_regenerate, name="regenerate"),
    path("<int:pk>/branch", views.branch_show, name="branch"),
    path("<int:pk>/delete-message", views.message_delete, name="delete_message"),
    path("<int:pk>/messages/<int:message_id>/used", views.message_used, name="message_used"),
    path("<int:pk>/memories/<int:node_id>/confirm", views.memory_confirm, name="memory_confirm"),
    path(
        "<int:pk>/proposals/<int:index>/confirm",
        views.proposal_confirm,
        name="proposal_confirm",
    ),
    path("<int:pk>/memories/<int:node_id>/wrong", views.memory_wrong, name="memory_wrong"),
    path("<int:pk>/memories/<int:node_id>/forget", views.memory_forget, name="memory_forget"),
    path(
        "<int:pk>/memories/<int:node_id>/wrong/undo",
        views.memory_wrong_undo,
        name="memory_wrong_undo",
    ),
    path(
        "<int:pk>/memories/<int:node_id>/forget/undo",
        views.memory_forget_undo,
        name="memory_forget_undo",
    ),
]
