"""The distributed shape's web process: ``gunicorn 'vancetope_gateway.wsgi:app'``."""

from vancetope_brain.config import Config
from vancetope_brain.llm.factory import describe
from vancetope_brain.observability import logs, tracing
from vancetope_gateway.app import create_app
from vancetope_gateway.parts import build_gateway
from workers.celery_app import broker_ping, create_celery, enqueue_index_on, enqueue_on

_config = Config.from_env()
logs.configure(_config.log_level, _config.log_format, also=("gunicorn.error", "gunicorn.access"))
tracing.configure("vancetope-gateway")
_celery = create_celery(_config)
app = create_app(build_gateway(_config, enqueue_on(_celery), enqueue_index=enqueue_index_on(_celery)), llm_description=describe(_config),
                 ping_broker=broker_ping(_celery))
