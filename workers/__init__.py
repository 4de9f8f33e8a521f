"""Celery: the app factory, thin tasks, the worker's composition root (``parts``), the
embedded in-process worker, beat jobs.

Rule: tasks decode arguments, call a service of the worker's parts and map errors — no
domain logic here. Never ``task_always_eager``: tests run real workers. Nothing here
imports the gateway.
"""
