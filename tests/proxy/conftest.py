"""Fixtures of the proxy tests: a scripted upstream and a proxy in front of it (proxykit)."""

from __future__ import annotations

from proxykit import proxy, upstream  # noqa: F401 - fixtures
