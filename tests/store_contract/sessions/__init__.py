"""The sessions port (``SessionStore``): sessions and the process documents they own."""
