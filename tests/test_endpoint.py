"""endpoint.py: one object finds or starts the server and knows its backends, chat format and
slots, for run, chat, bench and proxy alike (a scripted llama.cpp server; a stand-in LocalServer)."""

from __future__ import annotations

import pytest
from httpfake import FakeServer

import textagent.local
from textagent.backends import ChatAsTextBackend, LlamaCppBackend, OpenAICompletionsBackend
from textagent.endpoint import DeadEndpoint, Endpoint
from textagent.errors import BackendError, TextagentError
from textagent.templates import CHATML

PROBE = [
    ("system", "TXA5SYSTEMTXA5"),
    ("user", "TXA5USER1TXA5"),
    ("assistant", "TXA5ASSISTANT1TXA5"),
    ("user", "TXA5USER2TXA5"),
]


def _chatml(messages):
    text = "".join(f"<|im_start|>{r}\n{c}<|im_end|>\n" for r, c in messages)
    return text + "<|im_start|>assistant\n"


@pytest.fixture
def srv():
    with FakeServer() as server:
        yield server


def test_a_url_gives_the_backend_each_mode_needs_and_the_models_own_format_learned_once(srv):
    srv.json("/apply-template", {"prompt": _chatml(PROBE)})
    srv.json("/props", {"total_slots": 3}, repeat=True)
    ep = Endpoint(srv.url).open()
    assert isinstance(ep.connect(), LlamaCppBackend) and isinstance(ep.connect(chat=True), ChatAsTextBackend)
    fmt = ep.chat_format()
    assert fmt.render([{"role": "system", "content": "s"}, {"role": "user", "content": "q"}]) == _chatml(
        [("system", "s"), ("user", "q")]
    )
    assert ep.chat_format() is fmt and len(srv.bodies("/apply-template")) == 1  # learned once
    assert ep.chat_format(ep.connect(chat=True)) == CHATML  # a chat endpoint templates itself
    assert ep.slots() == 3
    ep.stop()  # nothing was started: nothing to stop


def test_other_apis_write_chatml_unless_told_and_have_no_slots(srv):
    ep = Endpoint(srv.url, api="completions", model="m").open()
    assert isinstance(ep.connect(), OpenAICompletionsBackend) and ep.chat_format() == CHATML and ep.slots() is None
    assert Endpoint(srv.url, chat_format="llama3").chat_format().name == "llama3"
    with pytest.raises(TextagentError, match="needs a llama.cpp endpoint"):
        Endpoint(srv.url, api="completions", chat_format="server").chat_format(
            OpenAICompletionsBackend(srv.url, model="m")
        )


def test_a_server_that_cannot_say_its_template_is_a_backend_error(srv):
    srv.json("/apply-template", {"error": {"message": "no template"}}, status=500, repeat=True)
    with pytest.raises(BackendError):
        Endpoint(srv.url).chat_format()


class _Started:
    """A stand-in for LocalServer: records how it was asked for, starts on a scripted server."""

    made: list[dict] = []

    def __init__(self, url, fail=False):
        self.url_, self.fail = url, fail

    def __call__(self, gguf, **kw):
        _Started.made.append({"gguf": gguf, **kw})
        self.stopped = False
        self.model_path = None
        self.chat_format = "chatml"
        return self

    @property
    def url(self):
        return self.url_

    def start(self):
        if self.fail:
            raise TextagentError("no llama-server here")
        return self

    def stop(self):
        self.stopped = True

    def prefix_cache(self, backend):
        return None


def test_the_embedded_server_is_the_served_one_or_one_started_here_and_stopped(srv, monkeypatch):
    monkeypatch.setattr(textagent.local, "running_server", lambda: {"url": srv.url, "chat_format": "chatml"})
    ep = Endpoint(prefix_cache=False).open()
    assert ep.served and ep.url == srv.url and ep.server is None and ep.chat_format() == CHATML
    # a named model, or reuse_served=False (the bench), starts a server of its own
    fake = _Started(srv.url)
    monkeypatch.setattr(textagent.local, "LocalServer", fake)
    ep = Endpoint(gguf="smollm2", server={"parallel": 2, "ctx_size": 4096}, prefix_cache=False).open()
    assert ep.server is fake and ep.url == srv.url and _Started.made[-1]["parallel"] == 2
    assert _Started.made[-1]["ctx_size"] == 4096 and _Started.made[-1]["prefix_cache"] is False
    ep.stop()
    assert fake.stopped and ep.server is None
    ep = Endpoint(reuse_served=False, prefix_cache=False).open()
    assert ep.server is fake


def test_a_server_that_does_not_start_is_stopped_and_the_error_kept(srv, monkeypatch):
    monkeypatch.setattr(textagent.local, "running_server", lambda: None)
    fake = _Started(srv.url, fail=True)
    monkeypatch.setattr(textagent.local, "LocalServer", fake)
    with pytest.raises(TextagentError, match="no llama-server here"):
        Endpoint().open()
    assert fake.stopped
    with pytest.raises(TextagentError, match="speaks llamacpp"):
        Endpoint(api="ollama").open()
    with pytest.raises(TextagentError, match="not open"):
        Endpoint().connect()


# -- asked, not typed: capabilities, liveness, the model served --------------------------------------


def test_what_the_endpoint_can_do_is_known_before_a_backend_is_made(srv):
    assert Endpoint(srv.url).capabilities.slots and Endpoint().capabilities.template  # llama.cpp, embedded too
    other = Endpoint(srv.url, api="completions", model="m").capabilities
    assert not (other.slots or other.template or other.health or other.slot_pinning)


def test_the_model_a_server_serves_is_asked_of_it_once_and_quietly(srv):
    srv.json("/props", {"total_slots": 2, "model_path": "/models/tiny-q4.gguf"})
    assert Endpoint(srv.url).served_model() == "tiny-q4.gguf"
    srv.json("/props", {"error": {"message": "kaput"}}, status=500)
    assert Endpoint(srv.url).served_model() == ""
    assert [r.path for r in srv.requests] == ["/props", "/props"]  # no retries
    assert Endpoint(srv.url, api="completions", model="m").served_model() == ""  # not asked: no /props
    assert len(srv.requests) == 2


def test_check_passes_a_healthy_server_and_waits_for_one_loading_its_model(srv):
    srv.json("/health", {"error": {"code": 503, "message": "Loading model"}}, status=503)
    srv.json("/health", {"status": "ok"})
    said: list[str] = []
    Endpoint(srv.url).check(on_wait=said.append)
    assert [r.path for r in srv.requests] == ["/health", "/health"]


@pytest.mark.parametrize(
    "status, said",
    [(500, "is not healthy"), (401, "refused the API key")],
)
def test_check_refuses_a_failing_server_or_a_refused_key(srv, status, said):
    srv.json("/health", {"error": {"message": "no"}}, status=status)
    with pytest.raises(DeadEndpoint, match=said):
        Endpoint(srv.url).check()


def test_check_asks_other_apis_their_cheapest_request_and_takes_any_other_answer(srv):
    srv.json("/v1/models", {"error": {"message": "not here"}}, status=404)
    Endpoint(srv.url, api="completions", model="m").check()
    srv.json("/api/version", {"version": "0.5"})
    Endpoint(srv.url, api="ollama").check()  # no model needed to ask whether it is there
    assert [r.path for r in srv.requests] == ["/v1/models", "/api/version"]


def test_check_of_nothing_listening_says_start_the_server():
    from httpfake import closed_port_url

    with pytest.raises(DeadEndpoint, match="is not answering"):
        Endpoint(closed_port_url()).check(timeout=2)


def test_probe_says_whether_the_server_serves_now(srv):
    srv.json("/health", {"status": "ok"})
    Endpoint(srv.url).probe()
    srv.json("/health", {"error": {"message": "down"}}, status=500)
    with pytest.raises(BackendError):
        Endpoint(srv.url).probe()
    srv.json("/v1/models", {"error": {"message": "who?"}}, status=401)
    Endpoint(srv.url, api="completions", model="m").probe()  # an answer: it is there
    srv.stop()
    with pytest.raises(BackendError):
        Endpoint(srv.url, api="completions", model="m").probe()


def test_wait_ready_polls_only_a_server_that_says_when_it_is_ready(srv):
    srv.json("/health", {"error": {"message": "Loading model"}}, status=503)
    srv.json("/health", {"status": "ok"})
    Endpoint(srv.url).wait_ready(timeout=10)
    Endpoint(srv.url, api="completions", model="m").wait_ready(timeout=10)
    assert [r.path for r in srv.requests] == ["/health", "/health"]


def test_the_prefix_cache_goes_to_the_backends_that_restore_prefixes(srv):
    ep = Endpoint(srv.url)
    ep.prefix_cache = cache = object()
    assert ep.connect().prefix_cache is cache  # type: ignore[attr-defined]
    assert getattr(ep.connect(chat=True), "prefix_cache", None) is None
