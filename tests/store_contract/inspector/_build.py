"""A turn's inspector record with a model step and a tool step, for the contract tests."""

from __future__ import annotations

from datetime import datetime, timedelta

from vancetope_brain.models import ProcessStatus, ThinkProcess, new_id, utcnow
from vancetope_brain.models.inspector import (
    InspectedCall,
    InspectedMessage,
    ModelStep,
    OfferedTool,
    ToolStep,
    TurnInspection,
)
from vancetope_brain.models.usage import UsageSource


def inspection(process: ThinkProcess, started_at: datetime | None = None, *,
               text: str = "hello") -> TurnInspection:
    started = started_at or utcnow()
    return TurnInspection(
        id=new_id("turn"), tenant_id=process.tenant_id, session_id=process.session_id,
        process_id=process.id, user_id=process.user_id, epoch=1, engine="arthur",
        lifecycle="steer", profile="default", model="m1", started_at=started,
        ended_at=started + timedelta(milliseconds=40), status_after=ProcessStatus.IDLE,
        tokens_in=12, tokens_out=3, chat_ids=["chat_1"], step_count=2,
        tools=[OfferedTool(name="spawn", description="Start a process",
                           parameters='{"type": "object"}')],
        steps=[ModelStep(at_ms=1, duration_ms=20, model="m1", shared=0,
                         messages=[InspectedMessage(role="system", content="Be brief."),
                                   InspectedMessage(role="user", content=text)],
                         tools=["spawn"],
                         output=InspectedMessage(role="assistant", tool_calls=[
                             InspectedCall(id="c1", name="spawn", arguments='{"goal": "x"}')]),
                         finish_reason="tool_calls", tokens_in=12, tokens_out=3,
                         usage_source=UsageSource.PROVIDER),
               ToolStep(at_ms=22, duration_ms=5, name="spawn", arguments='{"goal": "x"}',
                        outcome="SUCCESS", result='{"processId": "proc_2"}')])
