"""tools/validation.py: a schema's $ref is resolved within the schema only; references to URLs,
files or other documents are refused when the tool is made and never fetched (hardening round 4,
X1 and X2)."""

from __future__ import annotations

import http.server
import json
import socket
import threading
import time

import pytest

from textagent.errors import ToolArgumentError
from textagent.tools import Tool
from textagent.tools.validation import make_validator, remote_references, validate


class _Counting(http.server.BaseHTTPRequestHandler):
    hits = 0

    def do_GET(self):
        type(self).hits += 1
        body = json.dumps({"type": "string", "const": "secret-from-the-server"}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def http_schema_server():
    _Counting.hits = 0
    server = http.server.HTTPServer(("127.0.0.1", 0), _Counting)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/s.json", _Counting
    server.shutdown()


def test_local_references_and_meta_schemas_are_fine():
    schema = {
        "type": "object",
        "$defs": {"city": {"type": "string"}},
        "properties": {"a": {"$ref": "#/$defs/city"}, "b": {"$ref": "https://json-schema.org/draft/2020-12/schema"}},
        "required": ["a"],
    }
    tool = Tool("f", "d", schema, fn=lambda **kw: kw)
    assert tool.bind({"a": "Paris"}) == {"a": "Paris"}
    with pytest.raises(ToolArgumentError, match="'a'|a"):
        tool.bind({"a": 5})
    embedded = {
        "$id": "https://example.com/root",
        "type": "object",
        "$defs": {"o": {"$id": "other.json", "type": "integer"}},
        "properties": {"n": {"$ref": "other.json"}},
    }
    assert remote_references(embedded) == []
    assert Tool("g", "d", embedded, fn=lambda **kw: kw).bind({"n": 3}) == {"n": 3}


@pytest.mark.parametrize(
    "ref",
    ["http://127.0.0.1:9/x.json", "file:///etc/passwd", "other.json#/a", "https://example.com/schema#/definitions/x"],
)
def test_a_reference_outside_the_schema_is_refused_when_the_tool_is_made(ref):
    with pytest.raises(ValueError, match=r"never fetched"):
        Tool("f", "d", {"type": "object", "properties": {"a": {"$ref": ref}}}, fn=lambda **kw: kw)


def test_nothing_is_fetched_from_a_url_or_a_file(http_schema_server, tmp_path):
    url, handler = http_schema_server
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps({"const": "the secret in a local file"}))
    for ref in (url, secret.as_uri()):
        with pytest.raises(ValueError):
            Tool("f", "d", {"type": "object", "properties": {"a": {"$ref": ref}}}, fn=lambda **kw: kw)
        # and the validator itself, given such a schema by other code, refuses to resolve it
        validator = make_validator({"type": "object", "properties": {"a": {"$ref": ref}}})
        with pytest.raises(ToolArgumentError) as err:
            validate(validator, {"a": "x"})
        assert "the secret in a local file" not in str(err.value)
    assert handler.hits == 0


def test_a_reference_to_a_server_that_never_answers_costs_no_time():
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(1)  # accepts connections, never answers
    try:
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/never.json"
        started = time.process_time(), time.monotonic()
        with pytest.raises(ValueError):
            Tool("f", "d", {"type": "object", "properties": {"a": {"$ref": url}}}, fn=lambda **kw: kw)
        validator = make_validator({"type": "object", "properties": {"a": {"$ref": url}}})
        with pytest.raises(ToolArgumentError):
            validate(validator, {"a": "x"})
        assert time.monotonic() - started[1] < 5  # no connection was made (the server never answers)
        silent.setblocking(False)
        with pytest.raises(BlockingIOError):
            silent.accept()  # nobody connected
    finally:
        silent.close()
