from __future__ import annotations

from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "apps.accounts"
    label = "accounts"
    verbose_name = "Accounts"

    def ready(self):
        from django.contrib.auth.signals import user_logged_out

        from apps.accounts.sockets import close_sockets_on_logout

        # Django's logout views (the site's and the admin's) tell no one else.
        user_logged_out.connect(close_sockets_on_logout, dispatch_uid="close_sockets_on_logout")
