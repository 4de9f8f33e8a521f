"""The recipes port (``RecipeStore``)."""
