"""The delivery log port (``DeliveryStore``)."""
