"""Celery: the app factory, thin tasks, the embedded in-process worker, beat jobs.

Rule: tasks decode arguments, call the brain and map errors — no domain
logic here. Never ``task_always_eager``: tests run real workers.
"""
