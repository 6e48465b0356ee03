import os

from celery import Celery

from inspect_web.broker import use_for_redis_urls

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "inspect_web.settings")

use_for_redis_urls()  # before any broker connection (inspect_web/broker.py says why)
app = Celery("inspect_web")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
