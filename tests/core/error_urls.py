"""The product's routes, and two views that fail, for the error page tests."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.urls import path

from thalamus_site.urls import urlpatterns as product_urlpatterns


def forbidden(request):
    raise PermissionDenied


def broken(request):
    raise RuntimeError("a view that fails")


urlpatterns = [
    path("test-forbidden", forbidden),
    path("test-broken", broken),
    *product_urlpatterns,
]
