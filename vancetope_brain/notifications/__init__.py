"""Telling users about new inbox items (user-interaction.txt §12): WebSocket, e-mail, mobile.

Rule: channels decide (``can_handle``) and deliver; only the dispatcher writes the
delivery log, except that a batching channel finishes the QUEUED deliveries it
sends. A delivery failure is a logged status (FAILED with the error), never an
exception to the caller, and never shows the SMTP password. Imports nothing above
the brain; the gateway and the beat job call ``notify`` and ``flush``.
"""

from vancetope_brain.notifications.channels import MobileChannel, WsChannel, admits
from vancetope_brain.notifications.dispatcher import NotificationDispatcher, build_dispatcher
from vancetope_brain.notifications.mail import EmailChannel
from vancetope_brain.notifications.model import BatchChannel, Channel, NotifyEvent, item_link
from vancetope_brain.notifications.prefs import NotificationPrefs, in_quiet_hours

__all__ = [
    "BatchChannel",
    "Channel",
    "EmailChannel",
    "MobileChannel",
    "NotificationDispatcher",
    "NotificationPrefs",
    "NotifyEvent",
    "WsChannel",
    "admits",
    "build_dispatcher",
    "in_quiet_hours",
    "item_link",
]
