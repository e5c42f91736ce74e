"""Streamed calls: each valid call of a reply reaches the client as soon as its line is complete;
a later call that fails is repaired alone (the calls sent stay, with their ids); the client never
sees an invalid call. Ordering is asserted by events (the scripted upstream waits for what the
client got), never by the clock."""

from __future__ import annotations

import json
import threading

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")

from proxykit import ASK, WEATHER, start  # noqa: E402

from textagent.proxy import REPAIRS_HEADER  # noqa: E402

TIME = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "Local time in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
TOOLS = [WEATHER, TIME]
WAIT = 30  # seconds a scripted upstream waits for the client: generous, on a shared 2-core box


def pieces(*parts) -> list:
    """A llama.cpp /completion stream: each str a piece of text, each callable a hook the upstream
    calls when it gets there (tests/httpfake.py)."""
    texts = [p for p in parts if isinstance(p, str)]
    return [
        *({"content": p, "stop": False} if isinstance(p, str) else p for p in parts),
        {
            "content": "",
            "stop": True,
            "stop_type": "eos",
            "tokens_evaluated": 50,
            "tokens_predicted": len(texts),
            "timings": {"prompt_n": 50, "cache_n": 0, "predicted_n": len(texts)},
        },
    ]


def events_of(proxy, body, on_event=None, path="/v1/chat/completions") -> tuple[httpx.Headers, list]:
    """The streamed response's headers and events, each given to ``on_event`` as it arrives."""
    events: list = []
    with httpx.stream("POST", proxy.url + path, json={**body, "stream": True}, timeout=120) as resp:
        assert resp.status_code == 200, resp.read()
        for line in resp.iter_lines():
            if line.startswith("data: "):
                event = line[6:] if line[6:] == "[DONE]" else json.loads(line[6:])
                events.append(event)
                if on_event is not None:
                    on_event(event)
        return resp.headers, events


def deltas(event) -> list[dict]:
    if not isinstance(event, dict) or not event.get("choices"):
        return []
    return event["choices"][0]["delta"].get("tool_calls") or []


def assembled(events) -> list[tuple[str, str, dict]]:
    """The calls as a client puts them together from the deltas: (id, name, arguments)."""
    calls: dict[int, dict] = {}
    for event in events:
        for d in deltas(event):
            call = calls.setdefault(d["index"], {"id": None, "name": "", "arguments": ""})
            call["id"] = d.get("id") or call["id"]
            call["name"] += d.get("function", {}).get("name") or ""
            call["arguments"] += d.get("function", {}).get("arguments") or ""
    return [(c["id"], c["name"], json.loads(c["arguments"])) for _, c in sorted(calls.items())]


def finish_of(events) -> str:
    return next(
        e["choices"][0]["finish_reason"]
        for e in events
        if isinstance(e, dict) and e.get("choices") and e["choices"][0]["finish_reason"]
    )


class Meeting:
    """The upstream waits (``hook``) until the client has had a call (``seen``); ``log`` says in
    which order things happened."""

    def __init__(self, wanted=lambda event: any("id" in d for d in deltas(event))):
        self.wanted, self.got, self.log = wanted, threading.Event(), []

    def seen(self, event) -> None:
        if not self.got.is_set() and self.wanted(event):
            self.log.append("client got the first call")
            self.got.set()

    def hook(self) -> None:
        self.log.append("upstream goes on" if self.got.wait(WAIT) else "upstream gave up waiting")


@pytest.mark.parametrize(
    "first",
    [
        'TOOL: get_weather ARGS: {"city": "Paris"}\n',
        'Thought: two look-ups.\nTOOL: get_weather\nARGS: {\n  "city": "Paris"\n}\n',  # a call over lines
    ],
)
def test_the_first_call_reaches_the_client_before_the_model_writes_the_second(upstream, proxy, first):
    meeting = Meeting()
    upstream.sse("/completion", pieces(first, meeting.hook, 'TOOL: get_time ARGS: {"city": "Paris"}'))
    headers, events = events_of(proxy, {"messages": ASK, "tools": TOOLS}, meeting.seen)
    assert meeting.log == ["client got the first call", "upstream goes on"]
    calls = assembled(events)
    assert [(name, args) for _, name, args in calls] == [
        ("get_weather", {"city": "Paris"}),
        ("get_time", {"city": "Paris"}),
    ]
    assert all(i.startswith("call_") for i, _, _ in calls) and len({i for i, _, _ in calls}) == 2
    assert finish_of(events) == "tool_calls" and events[-1] == "[DONE]" and headers[REPAIRS_HEADER] == "0"
    assert events[0]["choices"][0]["delta"] == {"role": "assistant", "content": None}


def test_an_invalid_second_call_is_repaired_alone_and_the_first_stays(upstream, proxy):
    upstream.sse(
        "/completion", pieces('TOOL: get_weather ARGS: {"city": "Paris"}\n', 'TOOL: get_time ARGS: {"town": "Paris"}')
    )
    upstream.sse("/completion", pieces('TOOL: get_time ARGS: {"city": "Paris"}'))
    _, events = events_of(proxy, {"messages": ASK, "tools": TOOLS})
    calls = assembled(events)
    assert [(name, args) for _, name, args in calls] == [
        ("get_weather", {"city": "Paris"}),
        ("get_time", {"city": "Paris"}),
    ]
    assert len([d for e in events for d in deltas(e) if "id" in d]) == 2  # call 1 once, then the repaired one
    assert not any("town" in (d.get("function", {}).get("arguments") or "") for e in events for d in deltas(e))
    assert finish_of(events) == "tool_calls"
    first, second = upstream.bodies("/completion")
    feedback = second["prompt"][len(first["prompt"]) :]
    assert "city" in feedback and 'Accepted, and not to be written again: get_weather {"city": "Paris"}' in feedback
    assert "Write the whole reply again" not in feedback


def test_a_repair_that_repeats_an_accepted_call_does_not_send_it_twice(upstream, proxy):
    upstream.sse("/completion", pieces('TOOL: get_weather ARGS: {"city": "Paris"}\n', "TOOL: get_time ARGS: {}"))
    upstream.sse(
        "/completion", pieces('TOOL: get_weather ARGS: {"city": "Paris"}\n', 'TOOL: get_time ARGS: {"city": "Paris"}')
    )
    _, events = events_of(proxy, {"messages": ASK, "tools": TOOLS})
    assert [name for _, name, _ in assembled(events)] == ["get_weather", "get_time"]


def test_a_repair_that_rewrites_an_accepted_call_with_its_keys_in_another_order_does_not_send_it_again(upstream, proxy):
    """Hardening round 4, A5: the client ran send_email twice."""
    email = {
        "type": "function",
        "function": {
            "name": "send_email",
            "parameters": {
                "type": "object",
                "properties": {"to": {"type": "string"}, "body": {"type": "string"}},
                "required": ["to"],
            },
        },
    }
    upstream.sse(
        "/completion", pieces('TOOL: send_email ARGS: {"to": "a@b.c", "body": "hi"}\n', "TOOL: get_time ARGS: {}")
    )
    upstream.sse(
        "/completion",
        pieces('TOOL: send_email ARGS: {"body": "hi",  "to": "a@b.c"}\n', 'TOOL: get_time ARGS: {"city": "Paris"}'),
    )
    _, events = events_of(proxy, {"messages": ASK, "tools": [email, TIME]})
    assert [name for _, name, _ in assembled(events)] == ["send_email", "get_time"]


def test_when_repairs_run_out_the_client_keeps_the_calls_it_has(upstream, proxy):
    upstream.sse("/completion", pieces('TOOL: get_weather ARGS: {"city": "Paris"}\n', "TOOL: get_time ARGS: {}"))
    for _ in range(2):
        upstream.sse("/completion", pieces("TOOL: get_time ARGS: {}"))
    _, events = events_of(proxy, {"messages": ASK, "tools": TOOLS})
    assert [(name, args) for _, name, args in assembled(events)] == [("get_weather", {"city": "Paris"})]
    assert finish_of(events) == "tool_calls" and events[-1] == "[DONE]"
    assert len(upstream.bodies("/completion")) == 3
    assert not any(isinstance(e, dict) and e.get("choices") and e["choices"][0]["delta"].get("content") for e in events)


def test_a_reply_that_breaks_after_a_sent_call_is_repaired_and_the_call_stays(upstream, proxy):
    upstream.sse(
        "/completion", pieces('TOOL: get_weather ARGS: {"city": "Paris"}\n', 'TOOL: get_time ARGS: {"city": "Par')
    )
    upstream.sse("/completion", pieces("ANSWER: that is all"))  # the model gives up on the broken call
    _, events = events_of(proxy, {"messages": ASK, "tools": TOOLS})
    assert [name for _, name, _ in assembled(events)] == ["get_weather"] and finish_of(events) == "tool_calls"
    first, second = upstream.bodies("/completion")
    assert "Accepted" in second["prompt"][len(first["prompt"]) :]


def test_with_parallel_tool_calls_false_only_the_first_call_is_sent(upstream, proxy):
    upstream.sse(
        "/completion", pieces('TOOL: get_weather ARGS: {"city": "Paris"}\n', 'TOOL: get_time ARGS: {"city": "Paris"}\n')
    )
    _, events = events_of(proxy, {"messages": ASK, "tools": TOOLS, "parallel_tool_calls": False})
    assert [name for _, name, _ in assembled(events)] == ["get_weather"] and finish_of(events) == "tool_calls"


def test_a_non_streamed_request_keeps_the_valid_calls_and_repairs_only_the_others(upstream, proxy):
    """Issue 40, fault 3: one invalid call made the whole reply be asked again, and the model's
    next reply lost the plan; now the plain path keeps the valid calls, as streaming does."""
    upstream.json(
        "/completion",
        {"content": 'TOOL: get_weather ARGS: {"city": "Paris"}\nTOOL: get_time ARGS: {}', "stop_type": "eos"},
    )
    upstream.json("/completion", {"content": 'TOOL: get_time ARGS: {"city": "Paris"}', "stop_type": "eos"})
    resp = httpx.post(proxy.url + "/v1/chat/completions", json={"messages": ASK, "tools": TOOLS}, timeout=60)
    calls = resp.json()["choices"][0]["message"]["tool_calls"]
    assert [c["function"]["name"] for c in calls] == ["get_weather", "get_time"]
    assert resp.headers[REPAIRS_HEADER] == "1"
    first, second = upstream.bodies("/completion")
    feedback = second["prompt"][len(first["prompt"]) :]
    assert "get_time" in feedback and "get_weather" in feedback and "Write the whole reply again" not in feedback


@pytest.mark.parametrize("stream", [False, True])
def test_a_reply_cut_by_max_tokens_while_looping_on_calls_says_so_and_repeats_collapse(upstream, proxy, stream):
    """Issue 40, fault 2: 38 calls, 7 distinct, reached the client as finish_reason "tool_calls"."""
    lines = [f'TOOL: get_weather ARGS: {{"city": "C{i % 7}"}}\n' for i in range(38)] + ['TOOL: get_weather ARGS: {"ci']
    if stream:
        upstream.sse(
            "/completion",
            [
                *({"content": x, "stop": False} for x in lines),
                {"content": "", "stop": True, "stop_type": "limit", "tokens_evaluated": 50, "tokens_predicted": 512},
            ],
        )
        _, events = events_of(proxy, {"messages": ASK, "tools": TOOLS})
        names = [(n, a) for _, n, a in assembled(events)]
        finish = finish_of(events)
    else:
        upstream.json(
            "/completion",
            {"content": "".join(lines), "stop_type": "limit", "tokens_evaluated": 50, "tokens_predicted": 512},
        )
        resp = httpx.post(proxy.url + "/v1/chat/completions", json={"messages": ASK, "tools": TOOLS}, timeout=60)
        choice = resp.json()["choices"][0]
        names = [
            (c["function"]["name"], json.loads(c["function"]["arguments"])) for c in choice["message"]["tool_calls"]
        ]
        finish = choice["finish_reason"]
    assert names == [("get_weather", {"city": f"C{i}"}) for i in range(7)]
    assert finish == "length"


def test_the_responses_api_streams_each_function_call_item_as_it_is_known(upstream, proxy):
    meeting = Meeting(
        lambda event: event.get("type") == "response.output_item.added" and event["item"]["type"] == "function_call"
    )
    upstream.sse(
        "/completion", pieces('TOOL: get_weather ARGS: {"city": "Paris"}\n', meeting.hook, "TOOL: get_time ARGS: {}")
    )
    upstream.sse("/completion", pieces('TOOL: get_time ARGS: {"city": "Paris"}'))
    tools = [{"type": "function", **t["function"]} for t in TOOLS]
    _, events = events_of(
        proxy, {"input": "Weather and time in Paris?", "tools": tools}, meeting.seen, path="/v1/responses"
    )
    assert meeting.log == ["client got the first call", "upstream goes on"]
    done = [e["item"] for e in events if e["type"] == "response.output_item.done"]
    assert [(i["name"], json.loads(i["arguments"])) for i in done] == [
        ("get_weather", {"city": "Paris"}),
        ("get_time", {"city": "Paris"}),
    ]
    final = events[-1]["response"]
    assert events[-1]["type"] == "response.completed" and [i["call_id"] for i in final["output"]] == [
        i["call_id"] for i in done
    ]
    assert [e["sequence_number"] for e in events] == list(range(len(events)))


def test_the_openai_sdk_assembles_the_streamed_calls(upstream, proxy):
    openai = pytest.importorskip("openai")
    meeting = Meeting()
    upstream.sse(
        "/completion",
        pieces('TOOL: get_weather ARGS: {"city": "Paris"}\n', meeting.hook, 'TOOL: get_time ARGS: {"town": "Paris"}'),
    )
    upstream.sse("/completion", pieces('TOOL: get_time ARGS: {"city": "Paris"}'))
    client = openai.OpenAI(base_url=proxy.url + "/v1", api_key="-", max_retries=0, timeout=120)
    with client.chat.completions.stream(model="m", messages=ASK, tools=TOOLS) as stream:
        for event in stream:
            if event.type == "tool_calls.function.arguments.delta":  # (".done" waits for the next call)
                meeting.seen({"choices": [{"delta": {"tool_calls": [{"id": "-"}]}}]})
        final = stream.get_final_completion()
    assert meeting.log == ["client got the first call", "upstream goes on"]
    choice = final.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert [(c.function.name, json.loads(c.function.arguments)) for c in choice.message.tool_calls] == [
        ("get_weather", {"city": "Paris"}),
        ("get_time", {"city": "Paris"}),
    ]


def test_the_trace_tells_which_calls_each_attempt_sent(upstream, tmp_path):
    proxy = start(upstream, trace_dir=tmp_path, max_repairs=1)
    try:
        upstream.sse("/completion", pieces('TOOL: get_weather ARGS: {"city": "Paris"}\n', "TOOL: get_time ARGS: {}"))
        upstream.sse("/completion", pieces("TOOL: get_time ARGS: {}"))
        _, events = events_of(proxy, {"messages": ASK, "tools": TOOLS})
        (path,) = tmp_path.iterdir()
        first, second = json.loads(path.read_text())["attempts"]
    finally:
        proxy.stop()
    ((call_id, _, _),) = assembled(events)
    assert first["details"] == {
        "accepted": [{"id": call_id, "name": "get_weather", "arguments": '{"city": "Paris"}'}],
        "streamed": True,
    }
    assert "Accepted, and not to be written again" in first["observations"][0]
    assert second["details"] == {"feedback_sent": False} and "city" in second["observations"][0]


# -- streamed = plain (hardening round 4: A1-A4) -----------------------------------------------------


def _plain_and_streamed(upstream, proxy, pieces_list, body):
    """The message a client gets for the same upstream replies, asked plain and streamed."""
    for chunks in pieces_list:
        upstream.sse("/completion", pieces(*chunks))
    plain = httpx.post(proxy.url + "/v1/chat/completions", json=body, timeout=120)
    for chunks in pieces_list:
        upstream.sse("/completion", pieces(*chunks))
    _, events = events_of(proxy, body)
    content = "".join(
        e["choices"][0]["delta"].get("content") or "" for e in events if isinstance(e, dict) and e.get("choices")
    )
    return plain, content, [(name, args) for _, name, args in assembled(events)], events


@pytest.mark.parametrize(
    "chunks, tools, content, calls",
    [
        # A1: no tools: nothing is a call, a line "Tool: a hammer" is words of the answer
        (
            ("ANSWER: You need one thing.\n", "Tool: a hammer\n", "Then nail it."),
            [],
            "You need one thing.\nTool: a hammer\nThen nail it.",
            [],
        ),
        # A2: an empty ANSWER line, then a call: the call
        (("ANSWER:\n", 'TOOL: get_weather ARGS: {"city": "Paris"}'), TOOLS, None, [("get_weather", {"city": "Paris"})]),
        # A3: repeated keywords are not content
        (("ANSWER: ANSWER: the answer ", "is four"), TOOLS, "the answer is four", []),
        (("ANSWER: Final Answer: ", "the answer is four"), TOOLS, "the answer is four", []),
        # A4: an answer with content, then a call: the answer, plain as streamed
        (
            ("ANSWER: Let me look that up.\n", 'TOOL: get_weather ARGS: {"city": "Paris"}'),
            TOOLS,
            "Let me look that up.",
            [],
        ),
    ],
)
def test_streamed_and_plain_answers_are_the_same(upstream, proxy, chunks, tools, content, calls):
    body = {"messages": ASK, **({"tools": tools} if tools else {})}
    plain, streamed, streamed_calls, _ = _plain_and_streamed(upstream, proxy, [chunks], body)
    assert plain.status_code == 200, plain.text
    message = plain.json()["choices"][0]["message"]
    plain_calls = [
        (c["function"]["name"], json.loads(c["function"]["arguments"])) for c in message.get("tool_calls") or []
    ]
    assert message["content"] == content and plain_calls == calls
    assert (streamed or None) == content and streamed_calls == calls
    assert plain.headers[REPAIRS_HEADER] == "0"


def test_two_answer_lines_reach_the_client_without_the_keyword(upstream, proxy):
    """Issue 40, fault 1: the content `lockDoors returned: {...}\\nANSWER: setHeadlights returned: {...}`."""
    chunks = ('ANSWER: lockDoors returned: {"locked": true}\n', "ANS", 'WER: setHeadlights returned: {"on": true}')
    plain, streamed, calls, _ = _plain_and_streamed(upstream, proxy, [chunks], {"messages": ASK, "tools": TOOLS})
    content = 'lockDoors returned: {"locked": true}\nsetHeadlights returned: {"on": true}'
    assert plain.json()["choices"][0]["message"]["content"] == content and streamed == content and calls == []


def test_an_empty_answer_prefill_then_a_call_is_the_whole_call(upstream, proxy):
    """Hardening round 4, A2 with a prefill: the call was cut at `TOOL: get_weather AR`."""
    chunks = ("\n", 'TOOL: get_weather ARGS: {"city": "Paris"}')
    body = {"messages": [*ASK, {"role": "assistant", "content": "ANSWER:"}], "tools": TOOLS}
    plain, streamed, calls, _ = _plain_and_streamed(upstream, proxy, [chunks], body)
    message = plain.json()["choices"][0]["message"]
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in message["tool_calls"]] == [
        ("get_weather", {"city": "Paris"})
    ]
    assert calls == [("get_weather", {"city": "Paris"})] and not streamed
    assert plain.headers[REPAIRS_HEADER] == "0"
