from __future__ import annotations

from django.urls import path

from apps.memory import views

app_name = "memory"
urlpatterns = [
    path("", views.memory_list, name="list"),
    path("<int:pk>/edit", views.memory_edit, name="edit"),
    path("<int:pk>/forget", views.memory_forget, name="forget"),
    path("<int:pk>/confirm", views.memory_confirm, name="confirm"),
    path("<int:pk>/wrong", views.memory_wrong, name="wrong"),
    path("<int:pk>/wrong/undo", views.memory_wrong_undo, name="wrong_undo"),
    path("<int:pk>/forget/undo", views.memory_forget_undo, name="forget_undo"),
    path("<int:pk>/forget/now", views.memory_forget_now, name="forget_now"),
    path("forget", views.memory_forget_many, name="forget_many"),
    path("knowledge", views.knowledge, name="knowledge"),
    path("knowledge/forget", views.knowledge_forget, name="knowledge_forget"),
    path("world", views.world_state, name="world"),
    path("export", views.memory_export, name="export"),
    path("import", views.memory_import, name="import"),
    path("forget-everything", views.memory_forget_all, name="forget_all"),
]
