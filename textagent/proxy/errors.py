"""OpenAI-style errors: ``{"error": {"message", "type", "param", "code"}}`` with the right status.

Backend failures are translated here, at the boundary: an upstream that does not answer is 503,
one that times out 504, one that answers with an error or nonsense 502.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from .._redact import redact
from ..errors import BackendConnectionError, BackendError, BackendHTTPError, BackendTimeout

_CONTEXT = re.compile(r"exceed_context_size|exceeds the available context|context (?:size|length)", re.I)

__all__ = ["Cancelled", "ModelFailed", "ProxyError", "error_body", "from_backend_error", "redact"]

_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    408: "invalid_request_error",
    413: "invalid_request_error",
    415: "invalid_request_error",
    422: "model_error",
    500: "server_error",
    502: "upstream_error",
    503: "upstream_unavailable",
    504: "upstream_timeout",
}


class Cancelled(Exception):
    """The client went away; the upstream generation was closed (or never started)."""


class ProxyError(Exception):
    """A request the proxy answers with an error status and an OpenAI-style body."""

    def __init__(self, status: int, message: str, *, param: str | None = None, code: str | None = None):
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code

    def body(self) -> dict[str, Any]:
        return error_body(self.status, self.message, param=self.param, code=self.code)


class ModelFailed(ProxyError):
    """422: no reply of the model met the request; ``answer`` (answer.Answer) holds its attempts,
    so the trace of exactly this request shows what the model wrote."""

    def __init__(self, error: ProxyError, answer: Any):
        super().__init__(error.status, error.message, param=error.param, code=error.code)
        self.answer = answer


def error_body(status: int, message: str, *, param: str | None = None, code: str | None = None) -> dict[str, Any]:
    return {
        "error": {
            "message": message,
            "type": _TYPES.get(status, "invalid_request_error" if status < 500 else "server_error"),
            "param": param,
            "code": code,
        }
    }


def from_backend_error(exc: BackendError, shown: Callable[[str], str] = redact) -> ProxyError:
    """The status a client sees for an upstream failure; its message passes through ``shown``
    (which hides the credentials of the upstream's URL)."""
    text = shown(str(exc))
    if isinstance(exc, BackendTimeout):
        return ProxyError(504, f"the upstream model server timed out: {text}", code="upstream_timeout")
    if isinstance(exc, BackendConnectionError):
        return ProxyError(503, f"the upstream model server is not reachable: {text}", code="upstream_unreachable")
    if isinstance(exc, BackendHTTPError) and exc.status == 503:  # llama.cpp while loading the model
        return ProxyError(503, f"the upstream model server is not ready: {text}", code="upstream_not_ready")
    if isinstance(exc, BackendHTTPError) and exc.status == 400 and _CONTEXT.search(exc.body or str(exc)):
        # llama.cpp refuses a prompt longer than a slot's context (it never cuts it silently)
        return ProxyError(
            400,
            f"the conversation does not fit the model's context: {text}; send a shorter "
            "conversation, or give the model server more context (textagent proxy --ctx-size)",
            param="messages",
            code="context_length_exceeded",
        )
    return ProxyError(502, f"the upstream model server failed: {text}", code="upstream_error")
