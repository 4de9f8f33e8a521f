"""The distributed shape's web process: ``gunicorn 'vancetope_gateway.wsgi:app'``."""

from vancetope_brain.config import Config
from vancetope_brain.llm.factory import describe
from vancetope_gateway.app import create_app
from workers.celery_app import create_celery

_config = Config.from_env()
_celery = create_celery(_config)
app = create_app(_celery.vancetope_brain(), llm_description=describe(_config))
