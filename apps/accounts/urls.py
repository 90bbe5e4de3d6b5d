from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.urls import path

from apps.accounts import views
from apps.accounts.forms import LoginForm

urlpatterns = [
    path(
        "login/",
        auth_views.LoginView.as_view(
            template_name="accounts/login.html",
            authentication_form=LoginForm,
            redirect_authenticated_user=True,
        ),
        name="login",
    ),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("signup/", views.signup, name="signup"),
    path("settings/", views.settings_page, name="settings"),
    path("settings/keys/", views.api_key_create, name="api_key_create"),
    path(
        "settings/preferences/<slug:section>/",
        views.user_settings_save,
        name="user_settings_save",
    ),
    path(
        "settings/password/",
        views.SettingsPasswordChangeView.as_view(),
        name="settings_password",
    ),
    path("settings/theme/", views.theme_save, name="theme_save"),
    path("settings/time-zone/detected/", views.time_zone_detect, name="time_zone_detect"),
    path("settings/keys/<int:pk>/revoke/", views.api_key_revoke, name="api_key_revoke"),
]
