"""Inspector turn records: written once by id, read whole by tenant and id, listed per
process newest first without their steps, paged; another tenant's reads as missing."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.store_contract.conftest import World
from tests.store_contract.inspector._build import inspection
from vancetope_brain.errors import NotFound
from vancetope_brain.models import utcnow
from vancetope_brain.store import InspectorStore
from vancetope_brain.store.inspector import InspectionPosition
from vancetope_brain.store.sql import to_ms


def test_a_record_reads_back_whole_and_is_written_once(
        world: World, inspector: InspectorStore) -> None:
    tenant = world.tenant()
    process = world.process(tenant)
    record = inspection(process)
    inspector.put_inspection(record)
    inspector.put_inspection(record.model_copy(update={"tokens_in": 999}))  # a retry
    assert inspector.get_inspection(tenant, record.id) == record


def test_another_tenants_record_reads_as_missing(
        world: World, inspector: InspectorStore) -> None:
    tenant, other = world.tenant(), world.tenant()
    record = inspection(world.process(tenant))
    inspector.put_inspection(record)
    with pytest.raises(NotFound):
        inspector.get_inspection(other, record.id)
    with pytest.raises(NotFound):
        inspector.get_inspection(tenant, "turn_missing")
    assert inspector.list_inspections(other, record.process_id) == []


def test_a_listing_is_the_process_s_newest_first_without_steps_and_pages(
        world: World, inspector: InspectorStore) -> None:
    tenant = world.tenant()
    process, sibling = world.process(tenant), world.process(tenant)
    now = utcnow()
    records = [inspection(process, now + timedelta(seconds=n)) for n in range(5)]
    for record in [*records, inspection(sibling, now)]:
        inspector.put_inspection(record)
    listed = inspector.list_inspections(tenant, process.id)
    assert listed == [r.head() for r in reversed(records)]
    assert all(r.steps == [] and r.tools == [] and r.step_count == 2 for r in listed)
    first = inspector.list_inspections(tenant, process.id, limit=2)
    after = InspectionPosition(to_ms(first[-1].started_at), first[-1].id)
    rest = inspector.list_inspections(tenant, process.id, after, limit=10)
    assert [r.id for r in first + rest] == [r.id for r in reversed(records)]
    assert inspector.list_inspections(tenant, process.id, limit=0) == []
