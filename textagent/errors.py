"""textagent's exceptions.

Model mistakes never raise: they become observations. These are for bugs, misuse and
backend failures, which callers must be able to catch by type.
"""

from __future__ import annotations

from ._redact import redact

__all__ = [
    "BackendConnectionError",
    "BackendError",
    "BackendHTTPError",
    "BackendResponseError",
    "BackendTimeout",
    "LocalServerError",
    "ModeNotSupported",
    "RunTimeLimit",
    "ScriptExhausted",
    "TextagentError",
    "ToolArgumentError",
]


class TextagentError(Exception):
    """Base class of every exception textagent raises on purpose (``protocol.ParseError``, which is
    also a ValueError, and ``tools.mcp``'s errors included)."""


class BackendError(TextagentError):
    """The model server could not give a completion."""

    def __init__(self, message: str, *, url: str | None = None, retries: int = 0):
        # an endpoint's credentials (http://user:password@host) never reach a message, a log or a trace
        super().__init__(redact(message))
        self.url = None if url is None else redact(url)
        self.retries = retries


class BackendConnectionError(BackendError):
    """No server answered (refused, reset, DNS)."""


class BackendTimeout(BackendError):
    """The server accepted the request but did not answer in time."""


class RunTimeLimit(BackendTimeout):
    """A request was cut off by the run's time limit (Agent's ``max_seconds``, through
    ``backends.request_deadline``), not by the server's silence: the run ends with ``time_limit``."""


class BackendHTTPError(BackendError):
    """The server answered with an HTTP error status."""

    def __init__(self, message: str, *, status: int, body: str = "", url: str | None = None, retries: int = 0):
        super().__init__(message, url=url, retries=retries)
        self.status = status
        self.body = body


class BackendResponseError(BackendError):
    """The server answered 2xx but the body is not what its API promises."""


class ScriptExhausted(BackendError):
    """A ScriptedBackend was asked for more replies than it was given."""


class ModeNotSupported(TextagentError):
    """The backend cannot run the requested agent mode (e.g. no grammar support)."""


class ToolArgumentError(TextagentError):
    """Arguments do not fit a tool's schema. The message is written for the model."""


class LocalServerError(TextagentError):
    """The embedded llama-server or its model could not be found, fetched or started."""
