"""One request to the proxy as the access log and the trace see it, and the JSON every answer is."""

from __future__ import annotations

import logging
import time
import uuid
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse

from ..trace import json_line
from .errors import ProxyError
from .streaming import dump

log = logging.getLogger(__name__)
access_log = logging.getLogger("textagent.proxy.access")


class JSON(JSONResponse):
    """Strict JSON that UTF-8 can hold (a lone surrogate as its escape), whatever the model wrote."""

    def render(self, content: Any) -> bytes:
        return dump(content)


class Exchange:
    """One request: its id, timing and what the access log and the trace say about it."""

    def __init__(self, request: Request, prefix: str = "req-"):
        self.id = prefix + uuid.uuid4().hex[:24]
        self.started = time.monotonic()
        self.record: dict[str, Any] = {
            "id": self.id,
            "method": request.method,
            "path": request.url.path,
            "client": request.client.host if request.client else None,
        }

    def done(self, status: int, trace_dir: Path | None, trace: dict[str, Any] | None = None) -> None:
        self.record.update(status=status, ms=round((time.monotonic() - self.started) * 1000, 1))
        access_log.info(json_line(self.record))
        if trace_dir is not None and trace is not None:
            try:
                (trace_dir / f"{self.id}.json").write_text(json_line({**self.record, **trace}) + "\n", encoding="utf-8")
            except (OSError, ValueError, RecursionError) as exc:
                log.warning("could not write the trace of %s: %s", self.id, exc)


def error_response(exc: ProxyError, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSON(exc.body(), status_code=exc.status, headers=headers)
