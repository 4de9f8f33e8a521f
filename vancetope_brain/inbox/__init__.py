"""The user Inbox (user-interaction.txt §3–§8, §15): what a user must answer or look at.

``payloads`` holds the per-type rules for an item's payload and its answer;
``attachments`` stores the bytes behind OUTPUT_IMAGE / OUTPUT_DOCUMENT items
and signs the URLs that serve them.

Rule: like all of ``vancetope_brain``, no Flask and no Celery; the gateway
serves attachments by calling ``AttachmentStore.open``. Modules import each
submodule directly, so this file exports nothing.
"""
