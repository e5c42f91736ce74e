"""HttpSettings: the HTTP settings every HTTP backend shares, given as one object or as keywords."""

from __future__ import annotations

import dataclasses

import pytest
import requests

from textagent.backends import (
    ChatAsTextBackend,
    HttpSettings,
    LlamaCppBackend,
    OllamaBackend,
    OpenAICompletionsBackend,
)
from textagent.backends.http_settings import DEFAULT_TIMEOUT

BACKENDS = [
    lambda **kw: LlamaCppBackend("http://h:1", **kw),
    lambda **kw: OpenAICompletionsBackend("http://h:1", **kw),
    lambda **kw: ChatAsTextBackend("http://h:1", **kw),
    lambda **kw: OllamaBackend("http://h:1", model="m", **kw),
]


def test_defaults_give_every_request_a_timeout():
    s = HttpSettings()
    assert s.timeout == DEFAULT_TIMEOUT == (5.0, 300.0)
    assert HttpSettings(timeout=None).timeout == DEFAULT_TIMEOUT
    assert s.retries == 2 and s.backoff == 0.25 and s.session is None and s.headers == {}


def test_settings_are_checked_and_normalised():
    assert HttpSettings(timeout=7).timeout == (7.0, 7.0)
    assert HttpSettings(timeout=[1, 2]).timeout == (1.0, 2.0)
    for bad in ({"timeout": 0}, {"retries": -1}, {"retries": True}, {"backoff": -1}, {"max_response_bytes": 0}):
        with pytest.raises(ValueError):
            HttpSettings(**bad)
    with pytest.raises(TypeError):
        HttpSettings(timeout="soon")


def test_settings_are_frozen_and_keep_the_key_out_of_repr():
    s = HttpSettings(api_key="sk-secret")
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.retries = 0  # type: ignore[misc]
    assert "sk-secret" not in repr(s)
    assert s.replace(retries=0).retries == 0 and s.retries == 2


def test_request_headers():
    s = HttpSettings(api_key="k", headers={"X-A": "1"})
    assert s.request_headers() == {
        "Accept": "application/json, text/event-stream, application/x-ndjson",
        "Authorization": "Bearer k",
        "X-A": "1",
    }
    assert "Authorization" not in HttpSettings().request_headers()


@pytest.mark.parametrize("make", BACKENDS)
def test_every_backend_takes_the_settings_as_one_object(make):
    session = requests.Session()
    http = HttpSettings(
        timeout=(2, 9),
        retries=0,
        backoff=0,
        api_key="k",
        headers={"X-A": "1"},
        session=session,
        max_response_bytes=1024,
    )
    b = make(http=http)
    assert b.http is http
    assert (b.timeout, b.retries, b.backoff, b.max_response_bytes) == ((2.0, 9.0), 0, 0.0, 1024)
    assert b.headers["Authorization"] == "Bearer k" and b.headers["X-A"] == "1"
    assert b.session is session and not b._owns_session  # the caller's session: close() leaves it open


@pytest.mark.parametrize("make", BACKENDS)
def test_keywords_replace_fields_of_the_settings(make):
    b = make(http=HttpSettings(retries=0, timeout=4), timeout=(1, 2), api_key=None)
    assert b.http == HttpSettings(retries=0, timeout=(1, 2))
    assert make().http == HttpSettings()
    with pytest.raises(TypeError, match="unexpected keyword argument 'verify_ssl'"):
        make(verify_ssl=False)


def test_setting_an_attribute_replaces_the_settings():
    b = LlamaCppBackend("http://h:1", retries=3)
    b.retries = 0
    b.timeout = 10
    assert b.http == HttpSettings(retries=0, timeout=10)
    with pytest.raises(ValueError):
        b.backoff = -1


def test_the_openai_api_key_stays_the_third_positional_argument():
    b = OpenAICompletionsBackend("http://h:1", "m", "sk-1")
    assert b.http.api_key == "sk-1" and b.headers["Authorization"] == "Bearer sk-1"
