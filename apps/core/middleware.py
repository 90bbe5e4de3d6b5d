from __future__ import annotations

from asgiref.sync import iscoroutinefunction, markcoroutinefunction

# The <style> elements vis-network's standalone build injects (the dashboard's graph; the same
# rules come from its style sheet too): an empty one, then each block of its CSS.
# tests/core/test_security_headers.py recomputes them from static/vendor.
VIS_NETWORK_STYLE_HASHES = [
    "sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=",
    "sha256-OutIf5hnp68ctx4ThtV5J02g5HTJ5bbu/hkNfqVXWWo=",
    "sha256-4cgFR0//m8/eHo2G/esYsuZetUHlzCUWYM59sfgE9zY=",
    "sha256-uepMTym1NwItBa/XV6ef6fQobLL0A0CNVDM5km5L+nQ=",
    "sha256-gGUn/VMBXCeWm86qX/pOf+4ZDSbe0JcaXXb4rJjw1mA=",
    "sha256-QuPewnJYr+SnQiTnCNHFBw99ExTsz9f8w5320PimEPw=",
    "sha256-IY7YKNHjbzQ1NfAKrBZvBZohgXMtxrqB9PaqhAaT3vg=",
    "sha256-QE7TOEDW7YIlMzvUUnm8boDWeNBN7PBbaaYJjnp34WI=",
]

# Scripts and style sheets only from our own origin, no inline <script>, and no inline <style>
# but vis-network's. KaTeX's rendered math (inserted as HTML) and a few admin widgets need
# inline style attributes, which can neither run code nor load anything; browsers that predate
# style-src-attr block them too. Nothing may be fetched from, or sent to, another host.
CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self' " + " ".join(f"'{digest}'" for digest in VIS_NETWORK_STYLE_HASHES),
        "style-src-attr 'unsafe-inline'",
        "img-src 'self' data:",
        "font-src 'self' data:",
        "connect-src 'self'",
        "object-src 'none'",
        "frame-src 'none'",
        "frame-ancestors 'none'",
        "base-uri 'self'",
        "form-action 'self'",
    ]
)


def content_security_policy(get_response):
    if iscoroutinefunction(get_response):

        async def middleware(request):
            response = await get_response(request)
            response.headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
            return response

        markcoroutinefunction(middleware)
        return middleware

    def sync_middleware(request):
        response = get_response(request)
        response.headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
        return response

    return sync_middleware


content_security_policy.sync_capable = True
content_security_policy.async_capable = True


def inline(middleware_class):
    """An async middleware that runs a Django middleware's hooks on the event loop.

    Django runs the hooks of a `MiddlewareMixin` middleware under ASGI on a thread, two thread
    hops per middleware and request; for one that does no I/O (security headers, frame options)
    the hops cost far more than the hooks. Only for such middleware.
    """

    def factory(get_response):
        instance = middleware_class(get_response)
        process_request = getattr(instance, "process_request", None)
        process_response = getattr(instance, "process_response", None)

        async def middleware(request):
            response = process_request(request) if process_request else None
            if response is None:
                response = await get_response(request)
            return process_response(request, response) if process_response else response

        markcoroutinefunction(middleware)
        return middleware

    return factory
