"""Bundled recipes: package data, not code.

Rule: one ``<name>.yaml`` per recipe (the file name is the recipe's name),
manuals as Markdown under ``manuals/``, Vogon strategies to come. Nothing
here is imported as Python: ``vancetope_brain.recipes`` reads these files
and validates them (``tests/recipes/test_bundled.py`` loads and renders
every one). Tenant and project recipes of the same name override these.
"""
