"""Knowledge: reading a project's documents (issue 29; arthur-engine §2.2, §3.8).

``formats`` decides how a file is read (``detect_format``); ``parsing`` turns its bytes into
``Passage``s that a search hit can cite by section and page or lines (``parse``), through
``markup`` (Markdown and HTML), ``code`` (source files) and ``pdf`` (which reads a PDF with
pypdf in a child process, ``pdf_child``, bounded in time and memory); ``chunking`` cuts the
text into passages.

Rule: this package only reads bytes it is given. It imports ``errors``, ``config`` and
``models`` and nothing above them — no store, no events, no network; what stores or searches
passages builds on it. Modules import each submodule directly, so this file exports nothing.
"""
