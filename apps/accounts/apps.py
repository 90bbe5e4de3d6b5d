from __future__ import annotations

from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "apps.accounts"
    label = "accounts"
    verbose_name = "Accounts"

    def ready(self):
        from django.contrib.auth.signals import user_logged_in, user_logged_out, user_login_failed

        from apps.accounts.lockout import on_logged_in, on_login_failed
        from apps.accounts.sockets import close_sockets_on_logout

        # Django's logout views (the site's and the admin's) tell no one else.
        user_logged_out.connect(close_sockets_on_logout, dispatch_uid="close_sockets_on_logout")
        # The account's and the address's failure counts, and the account's known devices.
        user_login_failed.connect(on_login_failed, dispatch_uid="login_lockout_failed")
        user_logged_in.connect(on_logged_in, dispatch_uid="login_lockout_known_device")
