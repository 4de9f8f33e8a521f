"""Tenants, projects, users and bearer tokens.

Rule: a secret token exists only in the caller's hands and in the one
message that hands it out; the store keeps its SHA-256 hash.
"""

from vancetope_brain.identity.service import (
    DEFAULT_PROJECT,
    TOKEN_PREFIX,
    IdentityService,
    Principal,
)

__all__ = ["DEFAULT_PROJECT", "TOKEN_PREFIX", "IdentityService", "Principal"]
