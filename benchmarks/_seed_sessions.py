"""``session_list.py``'s users and their CLOSED sessions, written before the server opens the
store, by the code the server will run (a process of its own: ``--source`` puts another
checkout first on PYTHONPATH, and a store written by newer code is refused by older code).

    python benchmarks/_seed_sessions.py TENANT USER=COUNT ...   # env: the server's

The users through the brain's services, each with a token; the sessions through the store
port (``SessionStore.create_session``), one a second, oldest first. Prints progress, then
the tokens as JSON (``{"user": "token"}``) on its last line.
"""

from __future__ import annotations

import json
import os
import sys
import time
from datetime import timedelta

from vancetope_brain.config import Config
from vancetope_brain.models import Session, SessionStatus, new_id, utcnow
from vancetope_brain.store import SessionStore
from vancetope_gateway.parts import build_gateway


def main(tenant: str, counts: dict[str, int]) -> dict[str, str]:
    brain = build_gateway(Config.from_env(dict(os.environ)), lambda *a: None,
                          enqueue_index=lambda job: None)
    try:
        brain.identity.create_tenant(tenant, tenant)
        sessions = brain.store.port(SessionStore)
        tokens = {}
        for user, count in counts.items():
            brain.identity.create_user(tenant, user, user)
            tokens[user] = brain.identity.issue_token(tenant, user, label="benchmark")
            start, began = utcnow() - timedelta(seconds=count), time.monotonic()
            for i in range(count):
                sessions.create_session(Session(
                    id=new_id("ses"), tenant_id=tenant, user_id=user, title=f"closed {i}",
                    status=SessionStatus.CLOSED, created_at=start + timedelta(seconds=i)))
                if (i + 1) % 2000 == 0:
                    print(f"  {user}: {i + 1:,} of {count:,} sessions written", flush=True)
            print(f"seeded {user}: {count:,} closed sessions in "
                  f"{time.monotonic() - began:.1f} s", flush=True)
        return tokens
    finally:
        brain.close()


if __name__ == "__main__":
    wanted = {user: int(count) for user, _, count in (a.partition("=") for a in sys.argv[2:])}
    print(json.dumps(main(sys.argv[1], wanted)), flush=True)
