"""Issue 33 part 3: the OpenAI-compatible door, driven by the official ``openai`` client
against a real gateway (served from a thread) and a real embedded Celery worker whose model
is a test double: streamed and plain completions, a conversation continued in its session,
Arthur delegating, and every refusal as an OpenAI error object (docs/interop.md)."""

from __future__ import annotations

import http.client
import json
import os
import socket
import threading
import time
import urllib.error
import urllib.request

import openai
import pytest

from tests.helpers import wait_for
from vancetope_brain import keys
from vancetope_brain.llm import LlmResponse, ToolCall
from vancetope_brain.llm.testing import FunctionModel
from vancetope_brain.models import ChatRole, ProcessStatus, SessionStatus
from vancetope_brain.store import LaneStore, SessionStore
from vancetope_gateway import openai_api
from vancetope_gateway.app import MAX_BODY_BYTES
from vancetope_gateway.openai_api import SESSION_HEADER


@pytest.fixture
def token(emb) -> str:
    """A token of ada, whose minute of requests starts afresh (the module makes more than
    ``REQUESTS_PER_MINUTE``)."""
    emb.brain.redis.delete(keys.openai_requests("acme", "ada"))
    return emb.brain.identity.create_token("acme", "ada", "openai")[1]


@pytest.fixture
def sdk(served, token) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"http://{served}/v1", api_key=token, max_retries=0,
                         timeout=30)


class _Paced(FunctionModel):
    """Answers with ``fn``'s text through ``respond``, streamed a word at a time with pauses
    longer than a worker's token flush, so each word is a token event of its own."""

    def _deliver(self, result, on_token, tools):
        words = result.split(" ")
        for i, word in enumerate(words):
            time.sleep(0.15)
            if on_token is not None:
                on_token(word if i == len(words) - 1 else word + " ")
        return LlmResponse(content=result, model="paced", tool_calls=(ToolCall(
            "r1", "respond", json.dumps({"message": result, "awaiting_user_input": False})),))


def _lines(emb, process_id):
    return [(m.role, m.content) for m in
            emb.brain.store.port(LaneStore).chat_history("acme", process_id)]


def _chat_of(emb, session_id):
    return emb.brain.store.port(SessionStore).get_session("acme", session_id).chat_process_id


class _Answer:
    def __init__(self, status: int, text: str) -> None:
        self.status_code, self.text = status, text

    def json(self):
        return json.loads(self.text)


def _http(served, method, path, token, body=None, headers=None) -> _Answer:
    data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"http://{served}{path}", data=data, method=method,
                                     headers={"Authorization": f"Bearer {token}",
                                              "Content-Type": "application/json",
                                              **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return _Answer(response.status, response.read().decode())
    except urllib.error.HTTPError as e:
        return _Answer(e.code, e.read().decode())


def _post(served, token, body, headers=None) -> _Answer:
    return _http(served, "POST", "/v1/chat/completions", token, body, headers)


def _models(served, token) -> _Answer:
    return _http(served, "GET", "/v1/models", token)


def _assert_error(response, status, code, param=None):
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["code"] == code and error["param"] == param and error["message"]
    return error


# ── the acceptance: stream, continue, unknown model ─────────────────────────
def test_the_openai_client_streams_continues_and_meets_an_unknown_model(emb, sdk):
    seen: list[list[str]] = []

    def answer(messages, tools):
        seen.append([m.content for m in messages if m.role == "user"])
        return f"Noted ({len(seen)}): {messages[-1].content[-20:]}"

    emb.model = _Paced(answer)
    stream = sdk.chat.completions.create(
        model="arthur", stream=True,
        messages=[{"role": "user", "content": "Remember the word heron."}])
    session_id = stream.response.headers[SESSION_HEADER]
    chunks = list(stream)
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-1].choices[0].finish_reason == "stop"
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert len([c for c in chunks if c.choices[0].delta.content]) > 1  # token by token
    chat = _chat_of(emb, session_id)
    assert streamed == _lines(emb, chat)[-1][1] and streamed.startswith("Noted (1): ")

    # The same conversation: only the new last message is steered.
    stream = sdk.chat.completions.create(
        model="arthur", stream=True, extra_headers={SESSION_HEADER: session_id},
        messages=[{"role": "user", "content": "Remember the word heron."},
                  {"role": "assistant", "content": streamed},
                  {"role": "user", "content": "Which word?"}])
    assert stream.response.headers[SESSION_HEADER] == session_id
    second = "".join(c.choices[0].delta.content or "" for c in stream)
    assert second == "Noted (2): Which word?"
    users = [text for role, text in _lines(emb, chat) if role is ChatRole.USER]
    assert users == ["Remember the word heron.", "Which word?"]
    assert any("heron" in text for text in seen[-1]) and "Which word?" in seen[-1][-1]

    with pytest.raises(openai.NotFoundError) as refused:
        sdk.chat.completions.create(model="no-such-recipe",
                                    messages=[{"role": "user", "content": "hi"}])
    assert refused.value.code == "model_not_found"
    assert refused.value.body["type"] == "invalid_request_error"


def test_a_plain_completion_and_the_session_named_in_metadata(emb, sdk):
    emb.model = FunctionModel(lambda m, t: "plain answer")
    raw = sdk.chat.completions.with_raw_response.create(
        model="ford-chat", messages=[{"role": "user", "content": "one"}])
    completion = raw.parse()
    session_id = raw.headers[SESSION_HEADER]
    assert completion.object == "chat.completion"
    assert completion.choices[0].message.content == "plain answer"
    assert completion.choices[0].finish_reason == "stop" and completion.usage is None
    assert completion.model == "ford-chat"
    chat = emb.brain.store.port(SessionStore).get_process("acme", _chat_of(emb, session_id))
    assert chat.recipe_name == "ford-chat"
    again = sdk.chat.completions.with_raw_response.create(
        model="ford-chat", metadata={"vancetope_session": session_id},
        messages=[{"role": "user", "content": "two"}])
    assert again.headers[SESSION_HEADER] == session_id
    assert [t for r, t in _lines(emb, chat.id) if r is ChatRole.USER] == ["one", "two"]


def test_a_new_conversation_gives_the_earlier_messages_as_context(emb, sdk):
    emb.model = FunctionModel(lambda m, t: "ok")
    raw = sdk.chat.completions.with_raw_response.create(model="arthur", messages=[
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "Earlier question"}]},
        {"role": "assistant", "content": "Earlier answer"},
        {"role": "user", "content": "Now this."}])
    chat = _chat_of(emb, raw.headers[SESSION_HEADER])
    [steered] = [t for r, t in _lines(emb, chat) if r is ChatRole.USER]
    assert steered == (
        '<conversation-context>\n<message role="system">\nBe brief.\n</message>\n'
        '<message role="user">\nEarlier question\n</message>\n'
        '<message role="assistant">\nEarlier answer\n</message>\n</conversation-context>'
        '\n\nNow this.')


def test_the_models_are_the_chat_recipes(sdk):
    models = sdk.models.list()
    names = {m.id for m in models.data}
    assert {"arthur", "ford-chat"} <= names
    assert "marvin" not in names and "ford" not in names  # worker recipes
    assert all(m.object == "model" and m.owned_by == "bundled" for m in models.data)


def test_an_arthur_turn_that_delegates_still_answers(emb, sdk):
    def model(messages, tools):
        names = {t.name for t in tools}
        if "process_create" not in names:  # the worker
            return "worker result"
        if not any(m.role == "tool" for m in messages) and \
                "process-event" not in messages[-1].content:
            return LlmResponse(content="Let me delegate.", tool_calls=(ToolCall(
                "c1", "process_create", json.dumps({"recipe": "ford", "goal": "count"})),))
        return "Started a worker; I'll report back."

    emb.model = FunctionModel(model)
    stream = sdk.chat.completions.create(
        model="arthur", stream=True, messages=[{"role": "user", "content": "Count things"}])
    session_id = stream.response.headers[SESSION_HEADER]
    text = "".join(c.choices[0].delta.content or "" for c in stream)
    # What was streamed before the tool call cannot be taken back: the reply follows in full.
    assert text == "Let me delegate.\n\nStarted a worker; I'll report back."
    chat = _chat_of(emb, session_id)
    assert _lines(emb, chat)[-1] == (ChatRole.ASSISTANT, "Started a worker; I'll report back.")
    # The worker's report arrives in the session later.
    wait_for(lambda: any(r is ChatRole.EVENT and "worker result" in t
                         for r, t in _lines(emb, chat)), timeout=20)
    plain = sdk.chat.completions.create(
        model="arthur", extra_headers={SESSION_HEADER: session_id},
        messages=[{"role": "user", "content": "Done?"}])
    assert plain.choices[0].message.content == "Started a worker; I'll report back."


def test_a_suspended_session_is_resumed_to_continue(emb, sdk, token):
    emb.model = FunctionModel(lambda m, t: "here")
    raw = sdk.chat.completions.with_raw_response.create(
        model="arthur", messages=[{"role": "user", "content": "a"}])
    session_id = raw.headers[SESSION_HEADER]
    emb.brain.lifecycle.suspend(emb.who, session_id)
    wait_for(lambda: emb.brain.store.port(SessionStore).get_process(
        "acme", _chat_of(emb, session_id)).status is ProcessStatus.SUSPENDED)
    again = sdk.chat.completions.create(model="arthur", metadata={
        "vancetope_session": session_id}, messages=[{"role": "user", "content": "b"}])
    assert again.choices[0].message.content == "here"
    assert emb.brain.sessions.get(emb.who, session_id).status is SessionStatus.OPEN


# ── refusals ────────────────────────────────────────────────────────────────
@pytest.mark.parametrize(("extra", "param"), [
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}]}, "tools"),
    ({"functions": [{"name": "f", "parameters": {}}]}, "functions"),
    ({"tool_choice": "required"}, "tool_choice"),
    ({"n": 2}, "n"),
    ({"logprobs": True}, "logprobs"),
    ({"top_logprobs": 3}, "top_logprobs"),
    ({"response_format": {"type": "json_object"}}, "response_format"),
])
def test_what_cannot_be_honoured_is_refused(emb, served, token, extra, param):
    response = _post(served, token, {"model": "arthur", "messages": [
        {"role": "user", "content": "hi"}], **extra})
    error = _assert_error(response, 400, "unsupported_parameter", param)
    assert error["type"] == "invalid_request_error"


@pytest.mark.parametrize(("messages", "code", "param"), [
    ([{"role": "user", "content": "x"}, {"role": "tool", "content": "r",
                                         "tool_call_id": "c"}], "unsupported_parameter",
     "messages[1]"),
    ([{"role": "assistant", "content": None, "tool_calls": [{"id": "c"}]},
      {"role": "user", "content": "x"}], "unsupported_parameter", "messages[0]"),
    ([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}],
     "unsupported_parameter", "messages[0].content"),
    ([{"role": "assistant", "content": "x"}], "invalid_input", "messages[0].role"),
    ([{"role": "user", "content": "  "}], "invalid_input", "messages[0].content"),
    ([{"role": "wizard", "content": "x"}], "invalid_input", "messages[0]"),
    ([], "invalid_input", "messages"),
])
def test_bad_messages_are_refused(emb, served, token, messages, code, param):
    _assert_error(_post(served, token, {"model": "arthur", "messages": messages}), 400, code,
                  param)


def test_the_sdk_raises_its_own_errors_for_refusals(sdk):
    with pytest.raises(openai.BadRequestError) as refused:
        sdk.chat.completions.create(model="arthur", n=2,
                                    messages=[{"role": "user", "content": "hi"}])
    assert refused.value.code == "unsupported_parameter" and refused.value.param == "n"


def test_a_continued_conversations_message_has_the_same_cap(emb, served, token, sdk):
    emb.model = FunctionModel(lambda m, t: "ok")
    session_id = sdk.chat.completions.with_raw_response.create(
        model="arthur", messages=[{"role": "user", "content": "x"}]).headers[SESSION_HEADER]
    at_cap = "y" * openai_api.MAX_INPUT_CHARS
    _assert_error(_post(served, token, {"model": "arthur", "messages": [
        {"role": "user", "content": at_cap + "y"}]}, {SESSION_HEADER: session_id}), 413,
        "input_too_large", "messages")
    assert _post(served, token, {"model": "arthur", "messages": [
        {"role": "user", "content": at_cap}]}, {SESSION_HEADER: session_id}).status_code == 200


def test_the_caps_on_size(emb, served, token):
    many = [{"role": "user", "content": "x"}] * (openai_api.MAX_MESSAGES + 1)
    _assert_error(_post(served, token, {"model": "arthur", "messages": many}), 413,
                  "input_too_large", "messages")
    long = [{"role": "user", "content": "x" * 20_000}, {"role": "user", "content": "y" * 13_000}]
    _assert_error(_post(served, token, {"model": "arthur", "messages": long}), 413,
                  "input_too_large", "messages")
    huge = {"model": "arthur", "messages": [{"role": "user", "content": "x" * MAX_BODY_BYTES}]}
    _assert_error(_post(served, token, huge), 413, "payload_too_large")
    _assert_error(_post(served, token, b"[1"), 400, "invalid_input")


def test_other_openai_routes_answer_in_the_doors_shape(emb, served, token):
    for method, path in (("POST", "/v1/embeddings"), ("POST", "/v1/responses"),
                         ("GET", "/v1/models/arthur")):
        error = _assert_error(_http(served, method, path, token, {} if method == "POST"
                                    else None), 404, "not_found")
        assert "/v1/chat/completions" in error["message"]
    _assert_error(_http(served, "POST", "/v1/embeddings", "bad", {}), 401, "unauthorized")


def test_tokens_are_checked_like_the_websockets(emb, served, token):
    for bad in ("", "vt_" + "x" * 43, "nonsense"):
        error = _assert_error(_models(served, bad), 401, "unauthorized")
        assert error["type"] == "authentication_error"
    record, secret = emb.brain.identity.create_token("acme", "ada", "to revoke")
    sdk = openai.OpenAI(base_url=f"http://{served}/v1", api_key=secret, max_retries=0)
    assert sdk.models.list().data
    emb.brain.identity.revoke_token("acme", record.id)
    with pytest.raises(openai.AuthenticationError) as refused:
        sdk.models.list()
    assert refused.value.code == "unauthorized"


def test_a_conversation_is_its_owners_alone(emb, served, sdk):
    emb.model = FunctionModel(lambda m, t: "mine")
    raw = sdk.chat.completions.with_raw_response.create(
        model="arthur", messages=[{"role": "user", "content": "private"}])
    session_id = raw.headers[SESSION_HEADER]
    emb.brain.identity.create_user("acme", "bob", "bob")
    other = emb.brain.identity.create_token("acme", "bob")[1]
    for header in ({SESSION_HEADER: session_id}, {}):
        body = {"model": "arthur", "messages": [{"role": "user", "content": "let me in"}]}
        if not header:
            body["metadata"] = {"vancetope_session": session_id}
        _assert_error(_post(served, other, body, header), 404, "not_found",
                      "metadata.vancetope_session")
    assert "let me in" not in str(_lines(emb, _chat_of(emb, session_id)))
    # The owner naming another recipe for the session's chat is refused, not ignored.
    _assert_error(_post(served, sdk.api_key, {
        "model": "ford-chat", "messages": [{"role": "user", "content": "x"}]},
        {SESSION_HEADER: session_id}), 400, "invalid_input", "model")


def test_the_rate_limit_and_the_cap_on_replies_under_way(emb, served, token, monkeypatch):
    monkeypatch.setattr(openai_api, "MAX_REPLIES_PER_USER", 1)
    key = keys.openai_replies("acme", "ada")
    emb.brain.redis.zadd(key, {"held": time.time() + 60})
    try:
        _assert_error(_post(served, token, {"model": "arthur", "messages": [
            {"role": "user", "content": "x"}]}), 429, "limit_exceeded")
    finally:
        emb.brain.redis.zrem(key, "held")
    assert emb.brain.redis.zcard(key) == 0  # the refused one took nothing
    monkeypatch.setattr(openai_api, "REQUESTS_PER_MINUTE", 2)
    emb.brain.redis.delete(keys.openai_requests("acme", "ada"))
    for _ in range(2):
        assert _models(served, token).status_code == 200
    error = _assert_error(_models(served, token), 429, "rate_limited")
    assert error["type"] == "rate_limit_error"
    emb.brain.redis.delete(keys.openai_requests("acme", "ada"))


@pytest.mark.parametrize("cap", ["tenant", "gateway"])
def test_one_tenant_or_one_gateway_has_a_cap_of_replies_under_way(emb, served, token,
                                                                  monkeypatch, cap):
    """A tenant's users together, and one gateway process, serve a bounded number of
    completions at once: one tenant cannot hold every slot, nor a gateway every thread."""
    if cap == "tenant":
        monkeypatch.setattr(openai_api, "MAX_REPLIES_PER_TENANT", 1)
        key, said = keys.openai_tenant_replies("acme"), "your organisation has 1"
    else:  # the gateway serves in this process (``served``)
        monkeypatch.setattr(openai_api, "MAX_REPLIES_PER_GATEWAY", 1)
        key = keys.openai_gateway_replies(f"{socket.gethostname()}:{os.getpid()}")
        said = "this server has 1"
    emb.brain.redis.zadd(key, {"held": time.time() + 60})  # another user's reply under way
    try:
        error = _assert_error(_post(served, token, {"model": "arthur", "messages": [
            {"role": "user", "content": "x"}]}), 429, "limit_exceeded")
        assert said in error["message"], error
        # The refused one took nothing, in any of the three.
        assert emb.brain.redis.zrange(key, 0, -1) == [b"held"]
        assert emb.brain.redis.zcard(keys.openai_replies("acme", "ada")) == 0
    finally:
        emb.brain.redis.zrem(key, "held")


def test_a_stream_frees_its_slot_when_the_client_leaves(emb, served, token):
    gate = threading.Event()

    def slow(messages, tools):
        gate.wait(10)
        return "late"

    emb.model = FunctionModel(slow)
    key = keys.openai_replies("acme", "ada")
    host, port = served.split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    connection.request("POST", "/v1/chat/completions", headers={
        "Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        body=json.dumps({"model": "arthur", "stream": True,
                         "messages": [{"role": "user", "content": "x"}]}))
    response = connection.getresponse()
    assert response.getheader("Content-Type").startswith("text/event-stream")
    assert response.readline().startswith(b"data: ") and emb.brain.redis.zcard(key) == 1
    connection.close()
    gate.set()
    wait_for(lambda: emb.brain.redis.zcard(key) == 0, timeout=20)


def test_a_failed_turn_is_an_error_the_client_does_not_retry(emb, served, token, sdk):
    from vancetope_brain.errors import LlmError

    def fail(messages, tools):
        raise LlmError("the endpoint is down")

    emb.model = FunctionModel(fail)
    response = _post(served, token, {"model": "arthur",
                                     "messages": [{"role": "user", "content": "x"}]})
    error = _assert_error(response, 503, "llm_error")
    assert "the endpoint is down" in error["message"] and error["type"] == "server_error"
    stream = sdk.chat.completions.create(model="arthur", stream=True,
                                         messages=[{"role": "user", "content": "y"}])
    with pytest.raises(openai.APIError) as failed:
        list(stream)
    assert failed.value.code == "llm_error"


def test_a_reply_that_does_not_come_in_time(emb, served, token, monkeypatch):
    gate = threading.Event()

    def slow(messages, tools):
        gate.wait(10)
        return "too late"

    emb.model = FunctionModel(slow)
    monkeypatch.setattr(openai_api, "REPLY_TIMEOUT", 0.5)
    request = urllib.request.Request(
        f"http://{served}/v1/chat/completions", method="POST",
        data=json.dumps({"model": "arthur", "messages": [{"role": "user", "content": "x"}]})
        .encode(), headers={"Authorization": f"Bearer {token}"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    gate.set()
    assert refused.value.code == 504 and refused.value.headers["x-should-retry"] == "false"
    body = json.loads(refused.value.read())
    assert body["error"]["code"] == "reply_timeout"
    session_id = refused.value.headers[SESSION_HEADER]
    wait_for(lambda: _lines(emb, _chat_of(emb, session_id))[-1:] == [
        (ChatRole.ASSISTANT, "too late")], timeout=20)


def test_after_lost_events_the_reply_is_read_from_the_store(emb):
    """An ``events-gap`` (the log trimmed or lost): the committed reply is looked up in the
    chat history instead of waited for."""
    from vancetope_brain.events import EventListener, Gap

    gate = threading.Event()

    def held(messages, tools):
        gate.wait(10)
        return "from the store"

    emb.model = FunctionModel(held)
    session = emb.brain.sessions.create(emb.who, chat_recipe="arthur")
    listener = EventListener(emb.brain.redis)
    try:
        turn = openai_api._Turn.start(emb.brain, listener, emb.who, session, "lost?")
        turn.close()  # from here on no event reaches the turn
        gate.set()
        wait_for(lambda: _lines(emb, turn.process_id)[-1:] == [
            (ChatRole.ASSISTANT, "from the store")], timeout=20)
        turn.events.put(Gap(session.id, 0, 99))
        assert turn.reply() == "from the store"
    finally:
        listener.close()


def test_failures_below_say_nothing_of_the_internals(emb, served, token, monkeypatch):
    import redis

    def broken(*args, **kwargs):
        raise RuntimeError("a detail of /srv/internal.py")

    monkeypatch.setattr(openai_api, "_chat_recipes", broken)
    error = _assert_error(_models(served, token), 500, "internal")
    assert "internal.py" not in json.dumps(error) and error["type"] == "server_error"

    def down(*args, **kwargs):
        raise redis.ConnectionError("Error 111 connecting to 10.0.0.7:6379")

    monkeypatch.setattr(emb.brain.redis, "pipeline", down)
    error = _assert_error(_models(served, token), 503, "runtime_failure")
    assert "10.0.0.7" not in json.dumps(error)
