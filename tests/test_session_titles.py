"""A session's title taken from the user's first message (``vancetope_brain.sessions.titles``)."""

from __future__ import annotations

import pytest

from vancetope_brain.sessions.titles import DERIVED_MAX, title_from_message


@pytest.mark.parametrize(("message", "title"), [
    ("What is green tea?", "What is green tea?"),
    ("  two\n\nlines\tand   spaces  ", "two lines and spaces"),
    # Cut at the last word boundary that fits, without a comma before the ellipsis.
    ("Please compare   green and black tea\nfor caffeine, taste and price, and tell me "
     "which to buy", "Please compare green and black tea for caffeine, taste and…"),
    ("I would like a plan, with milestones, for the migration of our billing service",
     "I would like a plan, with milestones, for the migration of…"),
    # A boundary that would keep less than half: cut mid-word.
    ("see https://example.com/" + "a" * 80, "see https://example.com/" + "a" * 35 + "…"),
    ("x" * 100, "x" * (DERIVED_MAX - 1) + "…"),
    ("!" * 100, "!" * (DERIVED_MAX - 1) + "…"),
])
def test_title_from_message(message: str, title: str) -> None:
    assert title_from_message(message) == title
    assert len(title) <= DERIVED_MAX
