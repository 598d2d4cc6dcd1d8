"""The exceptions of the chatmem client.

Every error the server answers is one JSON shape,
``{"error": {"code", "message", "type", "param", "request_id"}}``; :class:`APIError` carries
those fields and the HTTP status. Its subclasses name the common statuses, so callers can catch
``NotFoundError`` rather than compare numbers.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "APIError",
    "AuthenticationError",
    "BadRequestError",
    "ChatmemError",
    "ConflictError",
    "ConversionError",
    "NotFoundError",
    "PermissionDeniedError",
    "RequestTooLargeError",
    "ServerError",
    "TransportError",
]


class ChatmemError(Exception):
    """The base class of every error this package raises."""


class TransportError(ChatmemError):
    """The server could not be reached, or did not answer in time (the cause is httpx's)."""


class ConversionError(ChatmemError, ValueError):
    """A framework message holds something a chatmem message cannot; ``field`` names it."""

    def __init__(self, field: str, problem: str) -> None:
        self.field = field
        self.problem = problem
        super().__init__(f"{field}: {problem}")


class APIError(ChatmemError):
    """An error answer of the server: its status and the fields of its JSON error object."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        type: str | None = None,
        param: str | None = None,
        request_id: str | None = None,
    ) -> None:
        self.status = status
        self.code = code
        self.message = message
        self.type = type
        self.param = param
        self.request_id = request_id
        super().__init__(f"{status} {code}: {message} (request id {request_id or 'unknown'})")


class BadRequestError(APIError):
    """400: an invalid id, body, policy or parameter (``param`` names it: ``user``, ``fact``,
    ``text``, ``key``, ...), or a facts route on a server whose store keeps no facts."""


class AuthenticationError(APIError):
    """401: no bearer token, or one the server does not know."""


class PermissionDeniedError(APIError):
    """403: a refused ``Host`` or ``Origin``."""


class NotFoundError(APIError):
    """404: no such conversation, or no such fact of the user (for this tenant)."""


class ConflictError(APIError):
    """409: the conversation or the user's facts changed under a write too often (``code``
    ``contention``: retry), or a change to a user's facts that their other facts leave no room
    for (``fact_refused``: a key another fact has, a pin past the bounds; nothing written)."""


class RequestTooLargeError(APIError):
    """413: over a limit (body, messages per request, text per message, id length)."""


class ServerError(APIError):
    """5xx: the store or the upstream model failed, or is unavailable."""


_BY_STATUS: dict[int, type[APIError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    413: RequestTooLargeError,
}


def error_from_response(status: int, body: Any, request_id: str | None) -> APIError:
    """The exception for an error answer: ``body`` is its parsed JSON (or ``None``), and
    ``request_id`` the ``x-request-id`` header, used when the body has none."""
    detail = body.get("error") if isinstance(body, dict) else None
    if not isinstance(detail, dict):
        detail = {}

    def text(key: str) -> str | None:
        value = detail.get(key)
        return value if isinstance(value, str) else None

    cls = _BY_STATUS.get(status, ServerError if status >= 500 else APIError)
    return cls(
        status,
        text("code") or f"http_{status}",
        text("message") or f"HTTP {status} without chatmem's error body",
        type=text("type"),
        param=text("param"),
        request_id=text("request_id") or request_id,
    )
