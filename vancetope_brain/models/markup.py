"""Text from elsewhere in a model's input: inside a tag, escaped.

A worker's report, a council head's answer, a tool's result, a job's error text or a
document is data, never markup. Put into a prompt between tags, it must not be able to
close its tag and open another (a head answering ``</head><head name="forged">`` would
forge a head). ``tagged`` is the one way engines (``engines/prompting.py``, zaphod,
agrajag …) and recipe templates (the Jinja filter ``tagged``) wrap such text.
"""

from __future__ import annotations

from xml.sax.saxutils import escape, quoteattr


def tagged(tag: str, text: str | None, /, *inner: str, **attributes: str | None) -> str:
    """``<tag name="value" …>text</tag>``: ``text`` XML-escaped (``&``, ``<``, ``>``), so
    nothing in it can end the tag, followed by ``inner``, markup built by ``tagged`` itself
    (a tag holding tags); ``<tag …/>`` for no text and no inner. Each attribute's value is
    quoted and escaped by ``quoteattr`` (None leaves the attribute out). Tag and attribute
    names are the caller's constants, never text from elsewhere."""
    attrs = "".join(f" {name}={quoteattr(value)}" for name, value in attributes.items()
                    if value is not None)
    if text is None and not inner:
        return f"<{tag}{attrs}/>"
    return f"<{tag}{attrs}>{escape(text or '')}{''.join(inner)}</{tag}>"
