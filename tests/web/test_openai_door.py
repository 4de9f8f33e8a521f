"""Issue 33 part 3's last acceptance: a conversation the official ``openai`` client held
with a real ``vancetope serve`` (the demo model) is a session the web client shows, with
both of the client's messages and both replies, and can go on with."""

from __future__ import annotations

import openai

from tests.web.test_paging import _pager
from vancetope_gateway.openai_api import SESSION_HEADER


def test_the_web_client_shows_the_openai_clients_conversation(server, page, shoot):
    # A user of its own: the other tests count the local user's sessions.
    token = _pager(server, "usr_olly", "Olly")
    client = openai.OpenAI(base_url=server.url + "/v1", api_key=token, max_retries=0,
                           timeout=60)
    stream = client.chat.completions.create(
        model="arthur", stream=True,
        messages=[{"role": "user", "content": "Which bird is grey and fishes?"}])
    session_id = stream.response.headers[SESSION_HEADER]
    first = "".join(chunk.choices[0].delta.content or "" for chunk in stream)
    second = client.chat.completions.create(
        model="arthur", extra_headers={SESSION_HEADER: session_id},
        messages=[{"role": "user", "content": "Which bird is grey and fishes?"},
                  {"role": "assistant", "content": first},
                  {"role": "user", "content": "And where does it nest?"}],
    ).choices[0].message.content
    assert "Which bird is grey and fishes?" in first and "And where does it nest?" in second

    page.goto(f"{server.url}/#token={token}")
    sessions = page.get_by_role("navigation", name="Sessions")
    sessions.get_by_role("button", name="Which bird is grey and fishes?").click()
    transcript = page.get_by_test_id("transcript")
    for said in ("Which bird is grey and fishes?", "And where does it nest?"):
        transcript.locator("[data-role=user]").filter(has_text=said).wait_for()
    assistant = transcript.locator("[data-role=assistant]")
    assistant.filter(has_text=second.strip().splitlines()[0][:40]).wait_for()
    assert transcript.locator("[data-role=user]").count() == 2
    shoot(page, "openai-conversation-in-the-web-client")
