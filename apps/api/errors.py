"""The API's errors, in OpenAI's error JSON shape."""

from __future__ import annotations

from django.http import JsonResponse

from apps.chat.errors import ChatRateLimited
from apps.cognition.answer import AnswerFailed


class ApiError(Exception):
    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str,
        code: str,
        param=None,
        headers: dict[str, str] | None = None,
    ):
        super().__init__(message)
        self.status, self.message, self.type, self.code, self.param = (
            status,
            message,
            type,
            code,
            param,
        )
        self.headers = headers

    def body(self) -> dict:
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }

    def response(self) -> JsonResponse:
        return JsonResponse(self.body(), status=self.status, headers=self.headers)


def bad_request(message: str, *, param: str | None = None) -> ApiError:
    return ApiError(400, message, type="invalid_request_error", code="invalid_request", param=param)


def rate_limited(exc: ChatRateLimited) -> ApiError:
    return ApiError(
        429,
        str(exc),
        type="rate_limit_error",
        code="rate_limit_exceeded",
        headers={"Retry-After": str(exc.retry_after)},
    )


def upstream_failed(exc: AnswerFailed) -> ApiError:
    return ApiError(502, str(exc), type="api_error", code="upstream_error")
