"""Sessions and the commands clients give to processes.

Rule: every call takes the acting ``Principal``; a session or process of
another user or tenant raises ``NotFound`` exactly as a missing one does.
Messages are persisted before the process is woken.
"""

from vancetope_brain.sessions.service import SessionService

__all__ = ["SessionService"]
