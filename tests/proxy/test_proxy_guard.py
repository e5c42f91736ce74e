"""The names the proxy's guard takes for loopback, and how it reads a Host header (proxy/guard.py).

The refusals themselves (another origin, a DNS-rebound Host, the CORS preflight) are tested
through the whole app in test_proxy_hardening.py."""

from __future__ import annotations

import pytest

from textagent.proxy.guard import host_of, is_loopback


@pytest.mark.parametrize(
    "host",
    ["localhost", "LOCALHOST.", "app.localhost", "127.0.0.1", "127.9.9.9", "::1", "[::1]", "::ffff:127.0.0.1"],
)
def test_loopback_names(host):
    assert is_loopback(host)


@pytest.mark.parametrize(
    "host",
    ["example.com", "localhost.example.com", "0.0.0.0", "10.0.0.1", "::", "::ffff:10.0.0.1", "", "127.0.0.1.nip.io"],
)
def test_names_that_are_not_loopback(host):
    assert not is_loopback(host)


@pytest.mark.parametrize(
    ("header", "name"),
    [
        ("localhost:8080", "localhost"),
        ("LocalHost", "localhost"),
        ("[::1]:8080", "::1"),
        ("[::1]", "::1"),
        ("::1", "::1"),  # a bare IPv6 address: its colons are not a port
        (" evil.example:80 ", "evil.example"),
    ],
)
def test_host_header_name(header, name):
    assert host_of(header) == name
