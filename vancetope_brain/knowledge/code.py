"""The lines of a source file, each named after the top-level definition it is in.

One regular expression per language finds a definition that starts at column 0 (``def``,
``class``, ``func``, ``fn``, ``function``, ``CREATE TABLE``, a TOML table, a YAML key …);
its first group that matched is the name. The name holds until a closing line at column 0
(``}``, ``end``) — inclusive — or until another line at column 0 that is neither a
definition nor a comment, decorator or bracket (module-level code, which has no name).
Nested definitions keep the top-level name. A language without an expression here (JSON,
XML, CSS …) has no sections. This is a heuristic for citations, not a parser.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from vancetope_brain.knowledge.chunking import Line

_MODIFIERS = (r"(?:(?:public|private|protected|internal|abstract|final|sealed|static|open|"
              r"data|partial|export|inline|value|enum|annotation|case|implicit|override|"
              r"fileprivate|default)[ \t]+)*")
_DEFINITIONS: dict[str, str] = {
    "python": r"^(?:async[ \t]+)?(?:def|class)[ \t]+(\w+)",
    "javascript": (r"^(?:export[ \t]+(?:default[ \t]+)?)?(?:declare[ \t]+)?(?:abstract[ \t]+)?"
                   r"(?:async[ \t]+)?(?:function\*?|class|interface|enum|type|namespace)"
                   r"[ \t]+([\w$]+)"
                   r"|^(?:export[ \t]+)?(?:const|let|var)[ \t]+([\w$]+)[^=]*=[ \t]*"
                   r"(?:async[ \t]*)?(?:function|\(|[\w$]+[ \t]*=>)"),
    "go": r"^func[ \t]+(?:\([^)]*\)[ \t]*)?(\w+)|^type[ \t]+(\w+)",
    "rust": (r"^(?:pub(?:\([^)]*\))?[ \t]+)?(?:(?:async|const|unsafe|extern[ \t]+\"[^\"]*\")"
             r"[ \t]+)*(?:fn|struct|enum|trait|mod|union|type|macro_rules!)[ \t]+(\w+)"
             r"|^(?:unsafe[ \t]+)?impl(?:<[^>]*>)?[ \t]+([^{]+?)[ \t]*(?:where\b|\{|$)"),
    "jvm": (rf"^{_MODIFIERS}(?:class|interface|enum|record|struct|object|trait|protocol|"
            r"extension|fun|func|def|namespace)[ \t]+([\w.]+)"),
    "c": (r"^(?:template[ \t]*<[^>]*>[ \t]*)?(?:class|struct|union|enum(?:[ \t]+class)?|"
          r"namespace)[ \t]+(\w+)(?![^;]*;[ \t]*$)"
          r"|^(?!(?:if|for|while|switch|return|else|typedef|do)\b)[A-Za-z_][\w:*&<>, \t]*?"
          r"[ \t*&]([A-Za-z_][\w:~]*)[ \t]*\([^;]*$"),
    "ruby": r"^(?:class|module|def)[ \t]+([\w:.?!=]+)",
    "php": (r"^(?:(?:abstract|final|readonly)[ \t]+)*(?:class|interface|trait|enum|function)"
            r"[ \t]+&?(\w+)"),
    "shell": r"^(?:function[ \t]+([\w.:-]+)|([\w.:-]+)[ \t]*\(\))",
    "sql": (r"(?i)^create[ \t]+(?:or[ \t]+replace[ \t]+)?(?:(?:temp|temporary|unique|"
            r"materialized)[ \t]+)*(?:table|view|function|procedure|index|trigger|type|schema|"
            r"sequence)[ \t]+(?:if[ \t]+not[ \t]+exists[ \t]+)?([\w.\"`]+)"),
    "yaml": r"^([\w\"'][^:#]*?)[ \t]*:(?:[ \t]|$)",
    "toml": r"^\[\[?[ \t]*([^\]]+?)[ \t]*\]\]?",
    "ini": r"^\[[ \t]*([^\]]+?)[ \t]*\]",
}
_LANGUAGES: dict[str, str] = {
    ".py": "python", ".pyi": "python",
    **dict.fromkeys((".js", ".mjs", ".cjs", ".jsx", ".ts", ".tsx"), "javascript"),
    ".go": "go", ".rs": "rust",
    **dict.fromkeys((".java", ".kt", ".kts", ".scala", ".swift", ".cs"), "jvm"),
    **dict.fromkeys((".c", ".h", ".cc", ".cpp", ".cxx", ".hpp", ".hh"), "c"),
    ".rb": "ruby", ".php": "php",
    **dict.fromkeys((".sh", ".bash", ".zsh"), "shell"),
    ".sql": "sql", ".yaml": "yaml", ".yml": "yaml", ".toml": "toml",
    **dict.fromkeys((".ini", ".cfg"), "ini"),
}
_PATTERNS = {language: re.compile(pattern) for language, pattern in _DEFINITIONS.items()}
_KEEPS_NAME = frozenset({"yaml", "toml", "ini"})
"""Languages whose other column-0 lines (keys, list items) belong to the open section."""
_CLOSING = re.compile(r"^(?:[}\])]|end\b)")
_CONTINUING = ("#", "//", "/*", "*", "@", "--", "{", "<?php", '"""', "'''")
_DEFINITION_CHARS = 400
"""Longer lines are not matched: definitions are short, and a few of the expressions above
would take quadratic time on a hostile line of a megabyte."""


def code_lines(text: str, *, name: str) -> list[Line]:
    """The lines of the source file ``name`` with the names of their definitions."""
    language = _LANGUAGES.get(PurePosixPath(name).suffix.lower())
    pattern = _PATTERNS.get(language or "")
    section = ""
    out: list[Line] = []
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw.rstrip()
        closes = False
        if pattern is not None and line[:1].strip() and len(line) <= _DEFINITION_CHARS:
            if match := pattern.match(line):
                section = next(group for group in match.groups() if group).strip()
            elif _CLOSING.match(line):
                closes = True
            elif language not in _KEEPS_NAME and not line.startswith(_CONTINUING):
                section = ""
        out.append(Line(line, number, number, section))
        if closes:
            section = ""
    return out
