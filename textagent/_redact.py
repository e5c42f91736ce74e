"""Credentials out of what is shown: a URL's ``user:password@`` and given secrets become ``***``.

Used wherever an endpoint URL reaches a person or a file (error messages, stderr, traces, bench
records and reports, the proxy's answers); the URL itself, with its credentials, is only ever
used to connect."""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["redact"]

# scheme://userinfo@ : the userinfo runs to the authority's last "@" (a password may hold one)
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/?#\s]*@")


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with the userinfo of every URL in it (``http://user:password@host``) shown as
    ``***``, and each of ``secrets`` too, wherever it appears."""
    text = _USERINFO.sub(r"\1***@", text)
    for secret in sorted({s for s in secrets if s and len(s) >= 3}, key=len, reverse=True):
        text = text.replace(secret, "***")
    return text
