from __future__ import annotations

from asgiref.sync import iscoroutinefunction, markcoroutinefunction

# Scripts only from our own origin; KaTeX output and highlight themes need inline style
# attributes, which cannot run code. Nothing may be fetched from, or sent to, another host.
CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self' 'unsafe-inline'",
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
