"""Round 5 of the proxy's hardening (docs/hardening.md): the model's output never ends the client's
conversation with an error where an OpenAI endpoint would answer, and the faults found beside it.
The scripted upstream is tests/httpfake.py's FakeServer, as in test_proxy_scripted.py."""

from __future__ import annotations

import json
import time

import pytest
import requests

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from httpfake import FakeServer
from proxykit import GREP, said, start

from textagent import local
from textagent.proxy import FAILURE_HEADER, REPAIRS_HEADER, ProxyServer, Upstream, UpstreamConfig

ASK = [{"role": "user", "content": "Find the TODOs."}]


def post(proxy: ProxyServer, body, **kw) -> requests.Response:
    kw.setdefault("timeout", 60)
    return requests.post(proxy.url + "/v1/chat/completions", json=body, **kw)


def events_of(resp: requests.Response) -> list:
    out = []
    for line in resp.text.splitlines():
        if line.startswith("data: "):
            data = line[len("data: ") :]
            out.append(data if data == "[DONE]" else json.loads(data))
    return out


# -- 1: a reply cut by max_tokens keeps the calls before its first bad line ------------------------


def _cut_reply() -> str:
    lines = ['TOOL: grep ARGS: {"file_name": "a.py", "pattern": "TODO"}']
    lines += [f'TOOL: grep ARGS: {{"file_name": "f{i}.py", "pattern": "TODO", "made_up_{i}": true}}' for i in range(6)]
    lines.append('TOOL: grep ARGS: {"file_name": "g.py", "ignorecase": true, "ignorecase": false}')  # a key twice
    lines.append('TOOL: grep ARGS: {"file_name": "h.py", "pat')  # cut here
    return "\n".join(lines)


@pytest.mark.parametrize("parallel", [True, False])
def test_a_cut_reply_keeps_the_valid_calls_before_a_bad_line(upstream, proxy, parallel):
    upstream.json("/completion", said(_cut_reply(), stop_type="limit"))
    body = {"messages": ASK, "tools": [GREP], "max_tokens": 512, "parallel_tool_calls": parallel}
    resp = post(proxy, body)
    assert resp.status_code == 200, resp.text
    choice = resp.json()["choices"][0]
    assert choice["finish_reason"] == "length"
    (call,) = choice["message"]["tool_calls"]
    assert json.loads(call["function"]["arguments"]) == {"file_name": "a.py", "pattern": "TODO"}
    assert len(upstream.bodies("/completion")) == 1  # a cut reply is not asked again


def _sse(text: str, stop_type: str) -> list[dict]:
    """A llama.cpp /completion stream of ``text``, a line a piece."""
    end = {"content": "", "stop": True, "stop_type": stop_type, "tokens_evaluated": 50, "tokens_predicted": 9}
    return [*({"content": line, "stop": False} for line in text.splitlines(keepends=True)), end]


def test_a_streamed_cut_reply_keeps_the_same_calls(upstream, proxy):
    upstream.json("/completion", said(_cut_reply(), stop_type="limit"))
    plain = post(proxy, {"messages": ASK, "tools": [GREP], "max_tokens": 512}).json()["choices"][0]
    upstream.sse("/completion", _sse(_cut_reply(), "limit"))
    resp = post(proxy, {"messages": ASK, "tools": [GREP], "max_tokens": 512, "stream": True})
    events = events_of(resp)
    calls = [d["function"] for e in events[:-1] for c in e["choices"] for d in c["delta"].get("tool_calls", [])]
    assert [c["name"] for c in calls if c.get("name")] == [
        c["function"]["name"] for c in plain["message"]["tool_calls"]
    ]
    assert (
        [e for e in events[:-1] if e["choices"] and e["choices"][0]["finish_reason"]][-1]["choices"][0]["finish_reason"]
        == plain["finish_reason"]
        == "length"
    )


# -- 2: spent repairs are an answer, not a 422, unless the client demanded something ---------------


def test_spent_repairs_with_no_words_are_an_empty_answer(upstream, proxy):
    for _ in range(3):
        upstream.json("/completion", said('TOOL: not_listed ARGS: {"x": 1}'))
    resp = post(proxy, {"messages": ASK, "tools": [GREP], "tool_choice": "auto"})
    assert resp.status_code == 200, resp.text
    assert resp.headers[REPAIRS_HEADER] == "2" and resp.headers[FAILURE_HEADER] == "no_usable_reply"
    choice = resp.json()["choices"][0]
    assert choice["message"] == {"role": "assistant", "content": ""} and choice["finish_reason"] == "stop"


def test_spent_repairs_streamed_end_the_stream_normally(upstream, proxy):
    for _ in range(3):
        upstream.sse("/completion", _sse('TOOL: not_listed ARGS: {"x": 1}', "eos"))
    resp = post(proxy, {"messages": ASK, "tools": [GREP], "stream": True})
    assert resp.status_code == 200
    events = events_of(resp)
    assert events[-1] == "[DONE]" and not any("error" in e for e in events[:-1])
    finishes = [c["finish_reason"] for e in events[:-1] for c in e["choices"] if c.get("finish_reason")]
    assert finishes == ["stop"]
    assert not any(c["delta"].get("tool_calls") for e in events[:-1] for c in e["choices"])


def test_the_failure_is_in_the_trace(upstream, tmp_path):
    server = start(upstream, trace_dir=tmp_path, max_repairs=2)
    try:
        for _ in range(3):
            upstream.json("/completion", said('TOOL: not_listed ARGS: {"x": 1}'))
        assert post(server, {"messages": ASK, "tools": [GREP]}).status_code == 200
    finally:
        server.stop()
    (trace_file,) = [p for p in tmp_path.rglob("*") if p.is_file()]
    text = trace_file.read_text()
    assert "no usable reply after 2 repairs" in text


def test_a_demanded_call_that_never_came_is_still_422(upstream, proxy):
    for _ in range(3):
        upstream.json("/completion", said('TOOL: not_listed ARGS: {"x": 1}'))
    resp = post(proxy, {"messages": ASK, "tools": [GREP], "tool_choice": "required"})
    assert resp.status_code == 422 and resp.json()["error"]["code"] == "tool_choice_not_met"


# -- 4: /v1/responses errors name the Responses parameters ---------------------------------------


@pytest.mark.parametrize(
    "choice, param",
    [({"type": "function", "name": 5}, "tool_choice.name"), ("sometimes", "tool_choice")],
)
def test_responses_errors_name_responses_parameters(upstream, proxy, choice, param):
    body = {"input": "Find the TODOs.", "tools": [{"type": "function", **GREP["function"]}], "tool_choice": choice}
    resp = requests.post(proxy.url + "/v1/responses", json=body, timeout=60)
    assert resp.status_code == 400, resp.text
    error = resp.json()["error"]
    assert error["param"] == param
    assert "function.name" not in error["message"] and '"function": {' not in error["message"]


# -- 3: a reply with an empty ANSWER: line, then calls, under a prefill: streamed as plain --------

CALL = 'TOOL: grep ARGS: {"file_name": "a.py", "pattern": "TODO"}'


def _streamed_calls_and_content(resp: requests.Response) -> tuple[list[str], str]:
    events = events_of(resp)
    deltas = [c["delta"] for e in events[:-1] for c in e["choices"]]
    names = [
        d["function"]["name"] for x in deltas for d in x.get("tool_calls", []) if d.get("function", {}).get("name")
    ]
    return names, "".join(x.get("content") or "" for x in deltas)


@pytest.mark.parametrize("prefill", ["ANSWER:", "Thought: I will search.", "Thought: x\n", "ANSWER: Let me check."])
@pytest.mark.parametrize("text", ["ANSWER:\n" + CALL, "\nANSWER:\n" + CALL + "\n", "\n" + CALL, "ANSWER: \n" + CALL])
@pytest.mark.parametrize("piece", [1, 1000])
def test_a_prefilled_reply_streams_as_it_answers_plain(upstream, proxy, prefill, text, piece):
    messages = [*ASK, {"role": "assistant", "content": prefill}]
    upstream.json("/completion", said(text))
    plain = post(proxy, {"messages": messages, "tools": [GREP]}).json()["choices"][0]["message"]
    end = {"content": "", "stop": True, "stop_type": "eos", "tokens_evaluated": 5, "tokens_predicted": 5}
    chunks = [text[i : i + piece] for i in range(0, len(text), piece)]
    upstream.sse("/completion", [*({"content": c, "stop": False} for c in chunks), end])
    names, content = _streamed_calls_and_content(post(proxy, {"messages": messages, "tools": [GREP], "stream": True}))
    assert names == [c["function"]["name"] for c in plain.get("tool_calls") or []]
    assert content == (plain["content"] or "")


# -- 15: an embedded llama-server that fails is stopped, and no other is started -----------------


def _embedded_upstream(monkeypatch, tmp_path, script, **config) -> tuple[Upstream, list[FakeServer]]:
    """An Upstream on the embedded server, whose llama-server is a scripted FakeServer (``script``
    fills it in): the servers started, in order, are in the list."""
    started: list[FakeServer] = []

    class FakeLlamaServer(local.LocalServer):
        def start(self):
            fake = FakeServer()
            fake.json("/health", {"status": "ok"}, repeat=True)
            script(fake)
            started.append(fake)
            self.fake, self.port, self.model_path, self.ready = fake, fake.port, tmp_path / "m.gguf", True
            self.model_path.write_bytes(b"GGUF")
            return self

        def stop(self, timeout=10):
            if getattr(self, "fake", None) is not None:
                self.fake.stop()
                self.fake = None

    monkeypatch.setenv("TEXTAGENT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(local, "LocalServer", FakeLlamaServer)
    return Upstream(UpstreamConfig(gguf="m.gguf", timeout=5, **config)), started


@pytest.mark.parametrize(
    "path, prefix_cache, said_",
    [("/apply-template", False, "could not learn the chat template"), ("/props", True, "/props")],
)
def test_a_failed_embedded_server_is_stopped_and_not_started_again(monkeypatch, tmp_path, path, prefix_cache, said_):
    def script(fake: FakeServer) -> None:
        fake.json(path, {"error": {"code": 500, "message": "it broke"}}, status=500, repeat=True)
        fake.json("/props", {"total_slots": 2}, repeat=True)  # after the refusal: never reached when it is /props

    up, started = _embedded_upstream(monkeypatch, tmp_path, script, prefix_cache=prefix_cache)
    try:
        with ProxyServer(up) as proxy:
            assert up.wait(10) and up.state == "failed"
            for _ in range(4):
                resp = post(proxy, {"messages": ASK})
                assert resp.status_code == 503 and resp.json()["error"]["code"] == "upstream_failed"
                message = resp.json()["error"]["message"]
                assert said_ in message and "it broke" in message and "could not be reached" not in message
            assert len(started) == 1 and started[0]._stopping.is_set()  # one server, and it was stopped
    finally:
        for fake in started:
            fake.stop()


# -- 16: a name a subschema of a closed schema declares is taken ----------------------------------


@pytest.mark.parametrize(
    "more",
    [
        {"allOf": [{"properties": {"ignorecase": {"type": "boolean"}}}]},
        {"$ref": "#/$defs/flags", "$defs": {"flags": {"properties": {"ignorecase": {"type": "boolean"}}}}},
        {"if": {"required": ["pattern"]}, "then": {"properties": {"ignorecase": {"type": "boolean"}}}},
    ],
    ids=["allOf", "$ref", "if-then"],
)
def test_a_name_a_subschema_declares_is_sent_as_the_model_wrote_it(upstream, proxy, more):
    parameters = {k: v for k, v in GREP["function"]["parameters"].items() if k != "additionalProperties"}
    tool = {"type": "function", "function": {**GREP["function"], "parameters": {**parameters, **more}}}
    upstream.json("/completion", said('TOOL: grep ARGS: {"file_name": "a.py", "pattern": "TODO", "ignorecase": true}'))
    resp = post(proxy, {"messages": ASK, "tools": [tool], "tool_choice": "required"})
    assert resp.status_code == 200, resp.text
    (call,) = resp.json()["choices"][0]["message"]["tool_calls"]
    assert json.loads(call["function"]["arguments"]) == {"file_name": "a.py", "pattern": "TODO", "ignorecase": True}
    assert resp.headers[REPAIRS_HEADER] == "0" and len(upstream.bodies("/completion")) == 1


# -- 17: "properties": {} lists no names: an invented one is refused and repaired ----------------


def test_an_invented_argument_of_a_tool_without_properties_is_repaired(upstream, proxy):
    now = {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}}}}
    upstream.json("/completion", said('TOOL: now ARGS: {"timezone": "UTC"}'))
    upstream.json("/completion", said("TOOL: now ARGS: {}"))
    resp = post(proxy, {"messages": [{"role": "user", "content": "What time is it?"}], "tools": [now]})
    assert resp.status_code == 200, resp.text
    (call,) = resp.json()["choices"][0]["message"]["tool_calls"]
    assert call["function"] == {"name": "now", "arguments": "{}"}
    assert resp.headers[REPAIRS_HEADER] == "1"
    assert "timezone" in upstream.bodies("/completion")[1]["prompt"]  # the model was told which name


# -- 18: naming unwritable tools is linear ---------------------------------------------------------


def test_unwritable_tool_names_are_named_in_linear_time():
    from textagent.proxy.convert import _Names

    def cpu_seconds(count: int) -> float:
        # no character of these writes in the protocol: each is ``tool``, ``tool_2``, ``tool_3``, ...
        names = [f"天気{chr(0x4E00 + i // 100)}{chr(0x4E00 + i % 100)}" for i in range(count)]
        best = float("inf")
        for _ in range(3):  # the least of three: a loaded machine only ever adds time
            started = time.process_time()
            made = _Names(names)
            best = min(best, time.process_time() - started)
        assert len(set(made.internal.values())) == count and made.client[made.internal[names[-1]]] == names[-1]
        return best

    small, large = cpu_seconds(2_000), cpu_seconds(20_000)
    assert large < 30 * max(small, 0.001), (small, large)  # 10x the names; quadratic was 100x


# -- 19: at most 16 calls in an answer, a partial repair's included, plain as streamed -------------


def _seventeen_calls(refused: int) -> str:
    lines = [f'TOOL: grep ARGS: {{"file_name": "f{i}.py", "pattern": "TODO"}}' for i in range(17)]
    lines[refused] = f'TOOL: grep ARGS: {{"file_name": "f{refused}.py", "pattern": "TODO", "made_up": 1}}'
    return "\n".join(lines)


@pytest.mark.parametrize("refused", [2, 16])
@pytest.mark.parametrize("stream", [False, True])
def test_a_partial_repair_never_passes_the_calls_cap(upstream, proxy, stream, refused):
    repaired = f'TOOL: grep ARGS: {{"file_name": "f{refused}.py", "pattern": "TODO"}}'
    if stream:
        upstream.sse("/completion", _sse(_seventeen_calls(refused), "eos"))
        upstream.sse("/completion", _sse(repaired, "eos"))
    else:
        upstream.json("/completion", said(_seventeen_calls(refused)))
        upstream.json("/completion", said(repaired))
    resp = post(proxy, {"messages": ASK, "tools": [GREP], "stream": stream})
    assert resp.status_code == 200, resp.text
    if stream:
        deltas = [d for e in events_of(resp)[:-1] for c in e["choices"] for d in c["delta"].get("tool_calls", [])]
        arguments = [d["function"]["arguments"] for d in deltas if d["function"].get("arguments")]
    else:
        arguments = [c["function"]["arguments"] for c in resp.json()["choices"][0]["message"]["tool_calls"]]
    files = [json.loads(a)["file_name"] for a in arguments]
    # the first 16 valid calls; a repair of the refused one could add nothing, so none is asked
    assert files == [f"f{i}.py" for i in range(17) if i != refused]
    assert len(upstream.bodies("/completion")) == 1


# -- the loop's retries in the proxy (textagent.retry, ProxyConfig.retry) ---------------------------


def test_a_proxy_with_retry_holds_the_repair_after_an_unknown_tool_to_the_grammar(upstream):
    from textagent.retry import Retry

    server = start(upstream, max_repairs=2, retry=Retry(vary=True, grammar=True))
    try:
        upstream.json("/completion", said('TOOL: not_listed ARGS: {"x": 1}'))
        upstream.json("/completion", said('TOOL: grep ARGS: {"file_name": "a.py", "pattern": "TODO"}'))
        resp = post(server, {"messages": ASK, "tools": [GREP]})
    finally:
        server.stop()
    assert resp.status_code == 200 and resp.json()["choices"][0]["finish_reason"] == "tool_calls"
    first, second = upstream.bodies("/completion")
    assert "grammar" not in first and "grep" in second["grammar"] and "not_listed" not in second["grammar"]


def test_a_proxy_without_retry_repairs_in_free_text(upstream, proxy):
    upstream.json("/completion", said('TOOL: not_listed ARGS: {"x": 1}'))
    upstream.json("/completion", said('TOOL: grep ARGS: {"file_name": "a.py", "pattern": "TODO"}'))
    assert post(proxy, {"messages": ASK, "tools": [GREP]}).status_code == 200
    assert all("grammar" not in body for body in upstream.bodies("/completion"))
