"""The user Inbox port (``UserInboxStore``): idempotent creates, compare-and-set saves, listing."""
