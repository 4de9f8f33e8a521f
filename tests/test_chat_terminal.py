"""``vancetope chat`` in a real pty against a real ``vancetope serve`` (offline demo model),
as a new user meets it: started in another folder, it finds the server; the welcome comes
before the first prompt (or, from a server slower than the client waits, streaming above
it), each reply after its own message, a worker's report and an Inbox
item without typing (the item read with ``/details ITEM`` and answered with ``/answer``); a
killed server is reconnected to, and a line typed meanwhile is sent then; a streamed reply
shows rendered, never its raw Markdown; a revoked token is said so; Ctrl-C and Ctrl-D leave
without a traceback. Piped, it prints the plain transcript, each line before what it caused.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pexpect
import pytest

from tests.gateway.test_interrupt import answer
from tests.llm.fake_openai_server import FakeOpenAiServer
from vancetope_brain.engines.arthur import WELCOME
from vancetope_brain.knowledge.sample import SAMPLE_NAME
from vancetope_brain.llm.demo_summary import HEADER
from vancetope_gateway.chat_client import WELCOME_WAIT

CLI = [sys.executable, "-m", "vancetope_gateway.cli"]
WAIT = 20


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VANCETOPE_", "OPENAI_"))}
    return {**env, "XDG_STATE_HOME": str(tmp / "state"), "TERM": "xterm",
            "PROMPT_TOOLKIT_NO_CPR": "1", **extra}


class Server:
    """``vancetope serve`` with its data in ``data``; ``port`` 0 picks a free one."""

    def __init__(self, tmp: Path, port: int = 0, **extra: str) -> None:
        env = _env(tmp, VANCETOPE_DATA_DIR=str(tmp / "data"), VANCETOPE_PORT=str(port), **extra)
        self.proc = subprocess.Popen(CLI + ["serve"], env=env, text=True, cwd=tmp,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.banner = ""
        for line in self.proc.stdout:
            self.banner += line
            if line.startswith("Any WebSocket client"):
                break
        found = re.search(r"Terminal: vancetope chat --url ws://127\.0\.0\.1:(\d+)/ws\n",
                          self.banner)
        assert found, self.banner
        self.port = int(found.group(1))

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.communicate(timeout=10)


def _chat(tmp: Path, **extra: str) -> pexpect.spawn:
    """``vancetope chat`` started in a folder of its own: no data dir there, none set."""
    folder = tmp / "elsewhere"
    folder.mkdir(exist_ok=True)
    return pexpect.spawn(CLI[0], CLI[1:] + ["chat"], cwd=str(folder), env=_env(tmp, **extra),
                         encoding="utf-8", dimensions=(50, 160), timeout=WAIT)


def _text(raw: str) -> str:
    """What a person reads in terminal output: no ANSI codes, the lines rich wrapped joined."""
    return " ".join(re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", raw).split())


def _leave(child: pexpect.spawn, key: str) -> str:
    child.sendcontrol(key)
    child.expect(pexpect.EOF)
    child.close()
    return child.before


@pytest.mark.slow
def test_a_conversation_in_a_terminal(tmp_path):
    server = Server(tmp_path)
    seen = ""
    try:
        started = time.monotonic()
        child = _chat(tmp_path)
        # The welcome before the first prompt — unless the server took longer than the
        # client waits for it (WELCOME_WAIT; a loaded CI machine did once): then the prompt
        # comes with the welcome streaming above it, printed there when it ends.
        if child.expect([re.escape("you> "), re.escape(WELCOME)]) == 0:
            assert time.monotonic() - started >= WELCOME_WAIT, child.before
            child.expect_exact(WELCOME)
        child.expect_exact("you> ")
        seen += child.before + child.after

        child.sendline("hello arthur")
        child.expect_exact("You said: “hello arthur”")  # its own reply, after it
        child.expect_exact("you> ")
        seen += child.before

        child.sendline("please research green tea")
        child.expect_exact("⚙ process_create demo-research (marvin) → STARTING")
        child.expect_exact("I started a worker (demo-research)")
        # The worker's report and Arthur's relay of it arrive without typing.
        child.expect_exact("◆ worker demo-research DONE: Report on “please research green tea”")
        child.expect_exact("The worker demo-research is done.")  # Arthur names it
        seen += child.before

        # A worker asks for approval in the Inbox: shown as it arrives, answered here.
        child.sendline("please run the strategy for a tea slogan")
        child.expect(r"✉ inbox: (\S+)  APPROVAL  ")
        item = child.match.group(1)
        child.expect_exact("you> ")
        # Read before it is approved: the draft itself, and how to answer.
        child.sendline(f"/details {item}")
        child.expect_exact("Demo result for “Write a first draft for: please run the strategy")
        child.expect_exact(f"/answer {item} yes")
        child.sendline(f"/answer {item} yes")
        child.expect_exact("(answered)")
        child.expect_exact("◆ worker demo-strategy DONE")
        seen += child.before

        child.sendline("/nope")
        child.expect_exact("unknown command /nope; /help lists the commands")
        child.sendline("/details")
        child.expect_exact("◆ worker demo-strategy: done")  # the whole report, as text
        child.expect_exact("you> ")
        seen += child.before
        assert "<process-event" not in seen and '{"' not in seen
        seen += _leave(child, "c")
        assert "Ctrl-C: bye" in seen

        # Again: the session resumes; the server is killed, comes back, and the chat goes on.
        child = _chat(tmp_path)
        child.expect_exact("resumed session")
        child.expect_exact("you> ")
        server.kill()
        child.expect_exact("lost the connection to ws://127.0.0.1:")
        # A line typed while the server is away waits, and is sent once it is back.
        child.sendline("typed while the server was down")
        child.expect_exact("(not connected: the line waits and is sent once the connection "
                           "is back)")
        server = Server(tmp_path, server.port)
        child.expect_exact("(reconnected)", timeout=40)  # a server start on a loaded machine
        child.expect_exact("(sent 1 line typed while the connection was down)")
        child.expect_exact("You said: “typed while the server was down”")
        seen += child.before
        child.sendline("still there?")
        child.expect_exact("You said: “still there?”")
        seen += child.before
        seen += _leave(child, "d")
        assert "bye; `vancetope chat` continues this session" in seen
    finally:
        server.kill()
    assert "Traceback" not in seen, seen


@pytest.mark.slow
def test_serve_on_a_terminal_prints_a_web_url_that_signs_in(tmp_path):
    """On a terminal the web address carries the token in its fragment (which a browser
    never sends); captured output gets the plain address instead (tests/test_cli.py)."""
    env = _env(tmp_path, VANCETOPE_DATA_DIR=str(tmp_path / "data"), VANCETOPE_PORT="0")
    serve = pexpect.spawn(CLI[0], CLI[1:] + ["serve"], cwd=str(tmp_path), env=env,
                          encoding="utf-8", dimensions=(50, 300), timeout=WAIT)
    try:
        serve.expect(r"Browser:  http://127\.0\.0\.1:(\d+)/#token=(\S+)\r\n")
        assert serve.match.group(2) == (tmp_path / "data" / "token").read_text().strip()
        serve.sendintr()
        serve.expect_exact("Vancetope stopped.")
    finally:
        serve.close(force=True)


@pytest.mark.slow
def test_piped_chat_prints_the_transcript_plainly_each_reply_once(tmp_path):
    """stdin and stdout are pipes: no styles and no streaming — the committed lines, each
    prefixed (every line of a reply too), the user's own lines included, in chat order."""
    server = Server(tmp_path)
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    try:
        done = subprocess.run(CLI + ["chat"], cwd=folder, env=_env(tmp_path), text=True,
                              input="hello arthur\nwhat do my documents say about citations"
                                    "\nask me for approval\n/inbox\n/bogus\n",
                              capture_output=True, timeout=120)
    finally:
        server.kill()
    out = done.stdout
    assert done.returncode == 0 and not done.stderr, out + done.stderr
    assert "\x1b" not in out  # no ANSI at all
    lines = out.splitlines()
    assert lines[0].startswith("(new session ses_") and lines[1] == f"assistant> {WELCOME}"
    asked = lines.index("you> hello arthur")
    assert all(line.startswith("assistant>") for line in lines[1:asked])  # the whole welcome
    assert any(line.startswith("assistant> - “ask me for approval” — ")
               for line in lines[1:asked])
    reply = lines[asked + 1]
    assert reply.startswith("assistant> You said: “hello arthur”. I am Vancetope's offline")
    assert out.count("You said: “hello arthur”") == 1  # streamed, but printed once, whole
    # serve seeded its sample document: the demo answers from it, its sources listed under
    # the reply (and a reply that used no document lists none).
    docs = lines.index("you> what do my documents say about citations")
    assert docs == asked + 2 and lines[docs + 1].startswith("assistant> Your documents say")
    sources = [line for line in lines if line.startswith("source> ")]
    assert sources and all(line.startswith(f"source> {SAMPLE_NAME} › ") for line in sources)
    assert lines.index(sources[0]) > docs + 1
    approval = lines.index("you> ask me for approval")
    assert approval > asked + 1
    posted = next(i for i, line in enumerate(lines)
                  if line.startswith("assistant> I put an item into your Inbox: APPROVAL."))
    pushed = [i for i, line in enumerate(lines)
              if re.fullmatch(r"\(inbox\) item_\w+  APPROVAL  NORMAL  Approve the demo "
                              r"deployment\?", line)]
    # Pushed as it was posted (mid-turn), shown after the line that caused it, then /inbox.
    assert len(pushed) == 2 and approval < pushed[0] < posted < pushed[1]
    assert "⚙ inbox_post APPROVAL “Approve the demo deployment?” → PENDING" in \
        lines[approval:posted]
    assert lines[-2:] == ["(1 pending; /details ITEM shows one in full)",
                          "(unknown command /bogus; /help lists the commands)"]


@pytest.mark.slow
def test_a_streamed_reply_shows_rendered_never_its_raw_markdown(tmp_path):
    """While a reply streams, the preview above the prompt shows it as the transcript will:
    a worker's report relayed word by word never shows its ``**`` or its ``- ``."""
    server = Server(tmp_path, VANCETOPE_DEMO_TOKEN_DELAY="0.03")
    try:
        child = _chat(tmp_path)
        child.expect_exact("you> ", timeout=60)  # the welcome, streamed too
        child.sendline("please research green tea")
        child.expect_exact("The worker demo-research is done.", timeout=60)  # streaming
        child.sendline("hello")  # its reply streams once the report's relay is committed
        child.expect_exact("You said: “hello”", timeout=60)
        seen = child.before
        _leave(child, "d")
    finally:
        server.kill()
    assert "Gather the facts about" in seen
    assert "**" not in seen and "- “" not in seen and "\n- " not in seen


def _admin(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(CLI + ["admin", *args], env=_env(tmp, VANCETOPE_DATA_DIR=str(
        tmp / "data")), text=True, capture_output=True, check=True, timeout=60)


@pytest.mark.slow
def test_a_revoked_token_is_said_so(tmp_path):
    """The token in VANCETOPE_TOKEN is revoked while the chat runs: the chat says the token
    was revoked and to replace that variable (not that the server is away), and leaves; run
    again, it says the server refused the token from that variable."""
    server = Server(tmp_path, VANCETOPE_TOKEN_RECHECK="0.5")
    try:
        created = _admin(tmp_path, "token", "create", "--tenant", "local", "--user", "local")
        secret = created.stdout.strip()
        token_id = re.search(r"token id: (\S+) ", created.stderr).group(1)
        child = _chat(tmp_path, VANCETOPE_TOKEN=secret)
        child.expect_exact("you> ")
        _admin(tmp_path, "token", "revoke", "--tenant", "local", "--quiet", token_id)
        child.expect(pexpect.EOF)
        child.close()
        seen = _text(child.before)
        again = subprocess.run(CLI + ["chat"], cwd=tmp_path / "elsewhere", text=True,
                               env=_env(tmp_path, VANCETOPE_TOKEN=secret), input="hello\n",
                               capture_output=True, timeout=60)
    finally:
        server.kill()
    assert ("(your token was revoked (the server closed the connection: 1008 token revoked); the "
            "token comes from the VANCETOPE_TOKEN variable: replace it, or unset it to use the "
            "local user's token in ") in seen, seen
    assert "cannot reach the server" not in seen and "Traceback" not in seen, seen
    assert again.returncode == 2
    assert again.stderr.startswith(f"vancetope: the server at ws://127.0.0.1:{server.port}/ws "
                                   "refused the token (HTTP 401: unknown or revoked); the token "
                                   "comes from the VANCETOPE_TOKEN variable: check or replace "
                                   "it"), again.stderr


@pytest.mark.slow
def test_summary_shows_what_the_model_sees_of_a_long_chat(tmp_path):
    """Piped, against ``serve`` on the demo model: a short chat has no summary; messages long
    enough to pass Arthur's default budget get one (the demo model's, deterministic), and
    ``/summary`` shows it."""
    server = Server(tmp_path)
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    long = [f"m{i} " + "word " * 6_000 for i in range(8)]  # 30,000 characters each
    try:
        done = subprocess.run(CLI + ["chat"], cwd=folder, env=_env(tmp_path), text=True,
                              input="\n".join(["/summary", *long, "/summary"]) + "\n",
                              capture_output=True, timeout=240)
    finally:
        server.kill()
    out = done.stdout
    assert done.returncode == 0 and not done.stderr, out[-2000:] + done.stderr
    lines = out.splitlines()
    assert "(no summary yet: the model still sees the whole chat)" in lines
    shown = next(i for i, line in enumerate(lines) if line.startswith("Summary of lines 1–"))
    assert lines[shown + 1] == HEADER
    assert lines[shown + 2].startswith("- the assistant answered “Hi, I'm Arthur.")
    assert lines[shown + 3].startswith("- the user said “m0 word word")


@pytest.mark.slow
def test_esc_or_ctrl_c_stops_a_streaming_reply_and_ctrl_c_at_the_prompt_leaves(tmp_path):
    """Issue 32 part 1 (b): against a model that streams a word every 50 ms."""
    with FakeOpenAiServer() as fake:
        fake.respond_with(answer)
        server = Server(tmp_path, OPENAI_BASE_URL=fake.base_url,
                        OPENAI_API_KEY="sk-fake-0123456789")
        seen = ""
        try:
            child = _chat(tmp_path)
            child.expect_exact(WELCOME)
            child.expect_exact("you> ")
            for key in ("escape", "ctrl-c"):
                child.sendline("talk long")
                child.expect_exact("word5")  # the preview streams
                if key == "escape":
                    child.send("\x1b")
                else:
                    child.sendcontrol("c")
                child.expect_exact("(interrupted)")
                seen += child.before
                child.expect_exact("you> ")
                child.sendline("and now?")
                child.expect_exact("A normal answer.")
                child.expect_exact("you> ")
                seen += child.before
            child.sendline("/again")  # regenerate: the earlier reply stays above
            child.expect_exact("(asked again; the earlier attempt is above)")
            child.expect_exact("you> ")
            seen += child.before
            time.sleep(0.5)  # the prompt is back (after its redraw)
            seen += _leave(child, "c")  # at the prompt, Ctrl-C still quits
            assert "Ctrl-C: bye" in seen
        finally:
            server.kill()
    text = _text(seen)
    assert "word0" in text and "word399" not in text
    assert "Traceback" not in seen, seen
