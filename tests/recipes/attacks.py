"""Templates that tried to stall or exhaust the server (issue 12), shared by the sandbox's unit
tests and the protocol tests: name → (prompt template, the recipe's default params)."""

from __future__ import annotations

ROWS = {"rows": list(range(100))}

ATTACKS: dict[str, tuple[str, dict]] = {
    "power": ("{{ 7**(5*10**6) > 1 }}", {}),
    "repetition": ("{{ 'x' * 10**9 }}", {}),
    "a 10^9-iteration loop": (
        "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}", {}),
    "loops nested over params": (
        "{% for a in params.rows %}{% for b in params.rows %}{% for c in params.rows %}"
        "{% for d in params.rows %}{{ d }}{% endfor %}{% endfor %}{% endfor %}{% endfor %}", ROWS),
    "a recursive macro": ("{% macro m(n) %}{{ m(n + 1) }}{% endmacro %}{{ m(0) }}", {}),
    "a branching macro": ("{% macro m(n) %}{% if n < 30 %}{{ m(n + 1) }}{{ m(n + 1) }}"
                          "{% endif %}{% endmacro %}{{ m(0) }}", {}),
    "a growth filter chain": (
        "{{ 'ab'|replace('a', 'a' * 1000)|replace('a', 'a' * 1000)|center(10**9)|format(1) }}",
        {}),
    "a wide % format": ("{{ '%999999999s' % 1 }}", {}),
    "a wide str.format": ("{{ '{:>999999999}'.format(1) }}", {}),
    "a str method": ("{{ 'x'.center(10**9) }}", {}),
    "int.to_bytes": ("{{ (1).to_bytes(10**9, 'big') }}", {}),
    "doubling with ~": ("{% set ns = namespace(s='x') %}{% for i in range(64) %}"
                        "{% set ns.s = ns.s ~ ns.s %}{% endfor %}", {}),
    "literal text in a loop": (
        "{% set x %}{% for i in range(10000) %}" + "y" * 1000 + "{% endfor %}{% endset %}", {}),
    "CPU in a loop": ("{% for a in range(5000) %}{{ range(100000)|sum }}{% endfor %}", {}),
}
"""Each is refused by the save-time render."""

LATER = ("{% for a in range(params.n) %}{% for b in range(params.n) %}{{ b }}{% endfor %}"
         "{% endfor %}", {"n": 1})
"""Harmless with its default params (so it is saved), a 10¹⁰-iteration loop with n=100000."""

BOMB = "\n".join(["name: bomb", "engine: ford", "params:",
                  '  a: &a ["x","x","x","x","x","x","x","x","x"]',
                  *(f"  {b}: &{b} [{','.join([f'*{a}'] * 9)}]"
                    for a, b in zip("abcdefgh", "bcdefghi", strict=True))]) + "\n"
"""The classic "billion laughs": under 400 bytes of YAML that expand to 9⁹ strings."""
