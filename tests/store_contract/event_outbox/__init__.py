"""The event outbox port (``EventOutboxStore``): events enqueued with a turn's commit, read in
order, removed once published, found by the sweeper when left behind."""
