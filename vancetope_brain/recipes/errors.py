"""The recipe errors (both ``UserError``\\s: never retried).

They belong in ``vancetope_brain/errors.py``'s tree: ``RecipeError`` under
``InvalidInput``, ``UnknownRecipe`` under ``NotFound``; they live here until
that module is free to edit, and keep their parents' wire codes.
"""

from __future__ import annotations

from vancetope_brain.errors import InvalidInput, NotFound


class RecipeError(InvalidInput):
    """Raised when a recipe is malformed (YAML, a field, a template) or its prompt cannot render.

    The message names where (the file or the stored scope) and the field path.
    """


class UnknownRecipe(NotFound):
    """Raised when no recipe has the name in the cascade; the message suggests the closest."""
