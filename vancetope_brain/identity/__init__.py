"""Tenants, users and bearer tokens.

Rule: a secret token exists only in the caller's hands and in the one
message that hands it out; the store keeps its SHA-256 hash.
"""

from vancetope_brain.identity.service import IdentityService, Principal, bootstrap_local

__all__ = ["IdentityService", "Principal", "bootstrap_local"]
