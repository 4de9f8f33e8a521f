"""The identity port (``IdentityStore``): tenants, projects, users, API tokens."""
