"""Knowledge: reading a project's documents (issue 29; arthur-engine §2.2, §3.8).

``formats`` decides how a file is read (``detect_format``); ``parsing`` turns its bytes into
``Passage``s that a search hit can cite by section and page or lines (``parse``), through
``markup`` (Markdown and HTML), ``code`` (source files) and ``pdf`` (which reads a PDF with
pypdf in a child process bounded in time and memory, forked per file by a warm reader
process, ``pdf_child``); ``chunking`` cuts the text into passages.

``retrieval`` searches a project's passages through the ``DocumentStore`` port
(``Retriever``), lexically and, with an embedding endpoint, by vector (fused); ``sample`` seeds the sample document ``vancetope serve`` gives a new project.

Rule: the reading modules only read bytes they are given, importing ``errors``, ``config``
and ``models`` — no store, no events, no network. ``retrieval`` and ``sample`` also use
``store`` and ``observability``, ``retrieval`` the embeddings of ``llm``, and nothing above
them. Modules import each submodule
directly, so this file exports nothing.
"""
