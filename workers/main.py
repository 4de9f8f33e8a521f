"""The distributed shape's Celery app: ``celery -A workers.main worker|beat|flower``."""

from vancetope_brain.config import Config
from vancetope_brain.observability import tracing
from workers.celery_app import create_celery

tracing.configure("vancetope-worker")
app = create_celery(Config.from_env())
