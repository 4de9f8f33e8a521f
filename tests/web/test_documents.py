"""The Documents tab (issue 29 item 1): files dropped or picked are uploaded to the REST
route with a progress bar each, then follow their status (PENDING → INDEXING → READY) from
the pushes; Arthur's reply names them as its sources; a deleted one is no longer found; a
refused file says what its error code means. Names are data: shown as text. On a phone the
tab fits the screen."""

from __future__ import annotations

import re

from tests.knowledge.pdfs import rewritten, text_pdf
from tests.web.ui import create_session

WORD = "quokkafjord"  # in these documents only
MARKDOWN_NAME = "field-notes.md"
MARKDOWN = "\n".join([
    "# Field notes", "", "The office kitchen has a coffee machine.", "",
    "## Parking", "", "Parking is behind the building.", "",
    "## Wildlife", "", f"The {WORD} colony nests on the north shore in spring.", "",
    "## Holidays", "", "Holidays are booked in the HR portal.", ""]).encode()
PDF_NAME = "survey.pdf"
PDF = text_pdf([["Survey of the coast", "The printer on floor two is broken."],
                [f"Page two: the {WORD} count rose to forty birds."]])
HOSTILE_NAME = "<img src=x onerror=alert(1)>.png"
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64


def _drop(page, name: str, data: bytes, media_type: str) -> None:  # type: ignore[no-untyped-def]
    """Drop one file on the drop zone, as a drag from the desktop does."""
    page.get_by_test_id("drop-zone").evaluate(
        """(zone, [name, bytes, type]) => {
            const moved = new DataTransfer();
            moved.items.add(new File([new Uint8Array(bytes)], name, { type }));
            for (const kind of ["dragenter", "dragover", "drop"]) {
              zone.dispatchEvent(new DragEvent(kind, { dataTransfer: moved, bubbles: true }));
            }
        }""", [name, list(data), media_type])


def _row(page, name: str):  # type: ignore[no-untyped-def]
    return page.locator(f'[data-testid=document-row][data-name="{name}"]')


def _ask(page, text: str):  # type: ignore[no-untyped-def]
    """Ask Arthur in the Chat tab; his newest reply's sources as shown."""
    page.get_by_role("tab", name="Chat").click()
    replies = page.get_by_test_id("transcript").locator("[data-role=assistant]")
    before = replies.count()
    page.get_by_label("Message to Arthur").fill(text)
    page.keyboard.press("Enter")
    replies.nth(before).wait_for()
    reply = replies.nth(before)
    reply.get_by_text(re.compile("Your documents say|found no passage")).wait_for()
    return reply.locator("[data-role=source]").all_inner_texts()


def test_documents_are_uploaded_indexed_cited_and_deleted(server, page, shoot, axe_violations):
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(server.sign_in_url)
    page.get_by_test_id("connection").get_by_text("connected").wait_for()
    create_session(page, "documents tab")
    page.get_by_test_id("transcript").get_by_text("Hi, I'm Arthur").wait_for()
    page.get_by_role("tab", name="Documents").click()
    page.get_by_role("heading", name="Documents of project “default”").wait_for()

    # Dropped: its row follows the pushes to READY, with its passages counted.
    _drop(page, MARKDOWN_NAME, MARKDOWN, "text/markdown")
    _row(page, MARKDOWN_NAME).and_(page.locator("[data-status=READY]")).wait_for()
    assert re.fullmatch(r"[\d.]+ B · [1-9]\d* passages?",
                        _row(page, MARKDOWN_NAME).get_by_test_id("document-details").inner_text())

    # Picked: the upload's progress bar shows while the server has not answered (held here).
    held = []
    page.route("**/projects/default/documents", lambda route: held.append(route))
    with page.expect_file_chooser() as chosen:
        page.get_by_role("button", name="Choose files").click()
    chosen.value.set_files([{"name": PDF_NAME, "mimeType": "application/pdf", "buffer": PDF}])
    page.get_by_role("progressbar", name=f"Uploading {PDF_NAME}").wait_for(state="attached")
    for _ in range(100):  # the route's handler runs while Playwright waits
        if held:
            break
        page.wait_for_timeout(50)
    held[0].continue_()
    page.unroute("**/projects/default/documents")
    _row(page, PDF_NAME).and_(page.locator("[data-status=READY]")).wait_for()
    assert page.get_by_test_id("upload").count() == 0  # the row moved to the list
    assert re.fullmatch(r"[\d.]+ (B|KiB) · [1-9]\d* passages? · 2 pages",
                        _row(page, PDF_NAME).get_by_test_id("document-details").inner_text())

    # Taken, then refused by the worker that reads it (a password): FAILED, with its meaning.
    _drop(page, "locked.pdf", rewritten(PDF, password="secret"), "application/pdf")
    failed = _row(page, "locked.pdf").and_(page.locator("[data-status=FAILED]"))
    failed.get_by_text("The file could not be read").wait_for()
    assert "unreadable_document:" in failed.inner_text()

    # A type the server does not read: the refusal's meaning, the name as text.
    page.get_by_test_id("document-files").set_input_files(
        [{"name": HOSTILE_NAME, "mimeType": "image/png", "buffer": PNG}])
    refused = page.locator('[data-testid=upload][data-state=failed]')
    refused.get_by_text("This type of file cannot be read").wait_for()
    assert "unsupported_document:" in refused.inner_text()
    assert refused.get_by_text(HOSTILE_NAME, exact=True).count() == 1
    assert refused.locator("img").count() == 0 and not dialogs
    assert not axe_violations(page)
    shoot(page, "documents-desktop")
    refused.get_by_role("button", name=f"Dismiss {HOSTILE_NAME}").click()
    assert page.get_by_test_id("upload").count() == 0

    # Arthur finds the word in both and names them under his reply.
    shown = _ask(page, f"what do my documents say about {WORD}")
    assert f"{MARKDOWN_NAME} › Field notes › Wildlife, lines 9-11" in shown, shown
    assert f"{PDF_NAME}, p. 2" in shown, shown

    # Deleted after confirming: gone from the list, and no longer found.
    page.get_by_role("tab", name="Documents").click()
    _row(page, MARKDOWN_NAME).get_by_role("button", name=f"Delete {MARKDOWN_NAME}").click()
    confirm = page.get_by_role("dialog", name="Delete the document?")
    confirm.get_by_text(MARKDOWN_NAME).wait_for()
    confirm.get_by_role("button", name="Delete").click()
    _row(page, MARKDOWN_NAME).wait_for(state="detached")
    shown = _ask(page, f"what do my documents say about {WORD}")
    assert not any(s.startswith(MARKDOWN_NAME) for s in shown), shown
    assert f"{PDF_NAME}, p. 2" in shown, shown

    # The list is the server's: a reload shows the same.
    page.reload()
    page.get_by_role("tab", name="Documents").click()
    _row(page, PDF_NAME).wait_for()
    assert _row(page, MARKDOWN_NAME).count() == 0


def test_on_a_phone_the_documents_fit_the_screen(server, browser, shoot, axe_violations):
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True,
                                  has_touch=True, reduced_motion="reduce")
    try:
        page = context.new_page()
        page.goto(server.sign_in_url)
        page.get_by_test_id("connection").get_by_text("connected").wait_for()
        page.get_by_role("tab", name="Documents").click()
        long_name = "a-rather-long-document-name-that-would-not-fit-a-phone-" + "x" * 40 + ".md"
        page.get_by_test_id("document-files").set_input_files(
            [{"name": long_name, "mimeType": "text/markdown",
              "buffer": b"# Phone\n\nThe phone reads this.\n"}])
        _row(page, long_name).and_(page.locator("[data-status=READY]")).wait_for()
        assert page.evaluate("document.documentElement.scrollWidth") <= 390  # no sideways scroll
        delete = _row(page, long_name).get_by_role("button", name=f"Delete {long_name}")
        box = delete.bounding_box()
        assert box is not None and box["x"] + box["width"] <= 390, box
        assert not axe_violations(page)
        shoot(page, "documents-phone")
    finally:
        context.close()
