"""MongoDB ``TransferStore``: every collection of the other adapters read out as the record
form of its kind (``store/transfer.py``: the SQL stores' rows) and written back from it.

Mapping. A kind's ``doc`` is the stored document without ``_id`` and the adapter's own
fields (``terms``, ``length``, ``tokens``, ``nextChatSeq``, ``probeAt``, ``drainClaim``,
the ``vector*`` fields, ``tenantId``/``projectId`` of a definition, …), its BSON datetimes
as the ISO text pydantic writes; the other columns are computed from the document as the
SQL adapters compute them (``to_ms`` of its times, ``tool`` ``''`` for a server's own
health record, …). Imported, ``doc`` is validated by its model and stored as it came, its
model's datetime fields made BSON datetimes (as ``to_bson`` stores them), with ``_id`` and
the fields the MongoDB adapters derive: a memory entry's ``terms`` and its scope's counter
in ``memory_scopes`` (recounted from the entries of every scope an import touches), a
chunk's ``terms``. Kinds without a collection of their own:

- ``lanes``: the lane fields of the process document (``status``, ``epoch``, ``nextSeq``,
  ``nextChatSeq``, ``pendingControl``, ``controlRequestedAt``, ``turnAttempts``). SQL keeps
  them in ``lanes`` and never updates their copies in ``processes.doc``; an imported
  process keeps those copies as its ``doc`` held them in ``_importedDoc``, so it exports
  the same ``doc`` again (a process made on MongoDB exports its current values there). A
  process stays marked ``_laneToImport`` from its import until its lane's, and exports no
  lane meanwhile; a lane imported before its process is parked (below).
- ``messages``: ``drained_at`` (``sql.iso`` text), ``drained_epoch``, ``attempts``, ``seq``
  and ``dead_ms`` are the message document's fields; its ``doc`` holds them as SQL's
  ``append_in`` wrote them (no drain, no attempt), ``deadLetter`` with its ``at`` as text.
- ``knowledge_chunks`` and ``knowledge_vectors``: a chunk's SQL integer id is its
  ``rowId`` (a sparse unique index ``transfer_row``); the chunks that have none (written on
  MongoDB) are numbered past the highest when an export of either kind starts, so both
  kinds name them alike. A vector is the ``vector``, ``vectorModel`` and ``vectorDim`` of
  its chunk's document; its import sets them on the chunk (parked if the chunk has not come
  yet).
  A document's ``tokens`` is counted only while it is READY (as SQL's ``_put`` leaves it).
- ``knowledge_vector_generations``: a collection of that name that only this adapter
  keeps (MongoDB caches no vectors; the generation is kept for an export back to SQL). A
  project with vectors and no imported generation exports generation 1 (what SQLite holds
  after one write; any value serves SQL's cache, which starts empty).
- Parked: a lane or vector imported before its process or chunk waits in
  ``transfer_parked`` (exported with its kind) until that comes; the import of the process
  or chunk sets it and drops it. So the kinds may be imported in any order, but a store is
  served only once every kind is in (a parked record is invisible to the other ports).
- ``recipes``: the collections ``recipes``, ``strategies`` and ``templates``, one per
  ``kind``, merged in key order.
- ``llm_usage``: the usage collection (``usage.py``), whose ``_id`` is the kind's key.

Order. Key-ordered kinds come in their key's order (string ``_id`` or key fields, compared
as MongoDB compares strings: by bytes). Insertion-ordered kinds come in the MongoDB
adapters' oldest-first order, ``createdAt`` then the key (a chat line: its process and
``seq``; a turn record: its process, epoch and ``endedAt``; a journal entry: its process and
``seq``), so an export from MongoDB may list them otherwise than one from SQL: the
engine's digest does not depend on the order. A cursor is the last record's sort values.

Exporting writes twice, both no more than a serving store would do: it numbers unnumbered
chunks (above), and before the first page of ``messages`` it delivers every message an
Inbox item still holds in its ``_outbox`` (``redeliver_inbox_messages``, what the
housekeeping does), so no answer is lost for sitting in an item's outbox.

Atomicity (no multi-document transactions): ``import_records`` reads which keys of the
batch are stored, then inserts the others in order (``insert_many(ordered=True)``) — a
record of a stored key is skipped untouched; a clash on another unique index (a token hash,
a document name) is ``Conflict``. Then come the derived writes: the memory counters of the
batch's scopes (recounted, so they are right whatever ran before), a lane's ``$set`` on its
process (conditional on ``_laneToImport``), a vector's on its chunk (conditional on having
none), the parked records of the batch's processes or chunks (set, then dropped). A crash
part way leaves a prefix of the batch inserted and its derived writes perhaps undone;
running the import again skips what is stored and finishes the rest (the recounts and the
parked records of every process or chunk of the batch, stored before or not). Not safe
against a serving store or two imports at once.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

from bson import Binary
from pydantic import ValidationError
from pymongo import ASCENDING, DESCENDING

from vancetope_brain.errors import InvalidInput
from vancetope_brain.models.knowledge import Chunk
from vancetope_brain.models.recipe import Definition, Recipe
from vancetope_brain.models.strategy import Strategy
from vancetope_brain.models.workflow_template import WorkflowTemplate
from vancetope_brain.store.documents import index_terms
from vancetope_brain.store.mongo import MongoAdapter, MongoBackend
from vancetope_brain.store.mongo._codec import from_bson, translated
from vancetope_brain.store.mongo._transfer_records import (
    IMPORTED_DOC,
    LANE_FIELDS,
    LANE_TO_IMPORT,
    PLAIN,
    Plain,
    Raw,
    bson_of,
    check_records,
    doc_of,
    hashable,
    in_columns,
    insert_new,
    merged_pages,
    ms_of,
    naive_of_ms,
    query_after,
    read_page,
)
from vancetope_brain.store.mongo.sessions import PROCESSES
from vancetope_brain.store.mongo.usage import KEY_FIELDS, USAGE, usage_id
from vancetope_brain.store.transfer import (
    KINDS,
    TransferStore,
    cursor_values,
    kind_named,
)
from vancetope_brain.store.user_inbox import UserInboxStore

_ROW = "rowId"
_VECTOR = ("vector", "vectorModel", "vectorDim")
_CHUNKS = "knowledge_chunks"
_GENERATIONS = "knowledge_vector_generations"
_PARKED = "transfer_parked"
"""Lanes and vectors imported before their process or chunk, until it comes."""
_KINDS_OF_DEFINITION: tuple[type[Definition], ...] = (Recipe, Strategy, WorkflowTemplate)
_DEFINITIONS = {kind.KIND: kind for kind in sorted(_KINDS_OF_DEFINITION,
                                                   key=lambda kind: kind.KIND)}
"""The definition kinds by ``kind``, in key order (each has a collection of its own)."""


class MongoTransfer(MongoAdapter, TransferStore):
    def __init__(self, db: MongoBackend) -> None:
        super().__init__(db)
        self._database = db.database
        self._database[_CHUNKS].create_index(_ROW, unique=True, sparse=True,
                                             name="transfer_row")
        self._special: dict[str, tuple[Callable[[str | None, int], Any],
                                       Callable[[list[Raw]], int]]] = {
            "recipes": (self._export_definitions, self._import_definitions),
            "lanes": (self._export_lanes, self._import_lanes),
            "knowledge_chunks": (self._export_chunks, self._import_chunks),
            "knowledge_vectors": (self._export_vectors, self._import_vectors),
            _GENERATIONS: (self._export_generations, self._import_generations),
            USAGE: (self._export_usage, self._import_usage),
        }

    @translated
    def export_page(self, kind: str, after: str | None, limit: int
                    ) -> tuple[list[Raw], str | None]:
        kind_named(kind)
        if kind in self._special:
            records, cursor = self._special[kind][0](after, limit)
            return records, cursor
        plain = PLAIN[kind]
        if kind == "messages" and after is None:
            self._deliver_outboxes()
        rows, cursor = read_page(self._database[plain.collection], {}, plain.order, after, limit)
        return [self._plain_record(kind, plain, raw) for raw in rows], cursor

    @translated
    def import_records(self, kind: str, records: list[Raw]) -> int:
        check_records(kind_named(kind), records)
        try:
            return self._import(kind, records)
        except ValidationError as e:
            raise InvalidInput(f"a record of {kind} holds an invalid document: {e}") from None

    def _import(self, kind: str, records: list[Raw]) -> int:
        if kind in self._special:
            return self._special[kind][1](records)
        plain = PLAIN[kind]
        docs = [bson_of(plain.model, record["doc"], **plain.stored(record)) for record in records]
        if kind == "processes":
            return self._import_processes(docs)
        if kind == "journal":
            self._number_journal(docs)
        written = insert_new(self._database[plain.collection], docs)
        if kind == "memory_entries":
            self._recount_memory(docs)
        return len(written)

    @translated
    def is_empty(self) -> bool:
        collections = {plain.collection for plain in PLAIN.values()} | {
            kind.COLLECTION for kind in _DEFINITIONS.values()} | {_CHUNKS, _GENERATIONS, _PARKED,
                                                                  USAGE}
        return all(self._database[name].find_one({}, {"_id": True}) is None
                   for name in sorted(collections))

    # -- plain kinds ------------------------------------------------------------------

    def _plain_record(self, kind: str, plain: Plain, raw: Raw) -> Raw:
        doc = doc_of(raw, plain.extras)
        model = from_bson(plain.model, dict(raw))
        if kind == "processes" and IMPORTED_DOC in raw:
            imported = raw[IMPORTED_DOC]
            for name in LANE_FIELDS:
                if name in imported:
                    doc[name] = imported[name]
                else:
                    doc.pop(name, None)
        if kind == "messages":  # as SQL's append_in wrote it; the columns say the rest
            doc.update(drainedAt=None, drainedEpoch=None, attempts=0)
        return in_columns(kind, {**plain.columns(model, raw), "doc": doc})

    def _deliver_outboxes(self) -> None:
        inbox = self.db.port(UserInboxStore)
        while inbox.redeliver_inbox_messages(100) == 100:
            pass

    def _number_journal(self, docs: list[Raw]) -> None:
        """Give each entry the next position of its process's journal, in record order."""
        journal = self._database[PLAIN["journal"].collection]
        next_seq: dict[tuple[str, str], int] = {}
        for doc in docs:
            mine = (doc["tenantId"], doc["processId"])
            if mine not in next_seq:
                last = journal.find_one({"tenantId": mine[0], "processId": mine[1]},
                                        {"seq": True}, sort=[("seq", DESCENDING)])
                next_seq[mine] = 0 if last is None else last["seq"] + 1
            doc["seq"] = next_seq[mine]
            next_seq[mine] += 1

    def _recount_memory(self, docs: list[Raw]) -> None:
        """Set the counter of each scope of ``docs`` to what its entries hold."""
        entries, scopes = self._database["memory_entries"], self._database["memory_scopes"]
        for key in sorted({(d["tenantId"], d["scope"], d["scopeId"]) for d in docs}):
            counter = {"tenantId": key[0], "scope": key[1], "scopeId": key[2]}
            held = list(entries.aggregate([
                {"$match": dict(counter)},
                {"$group": {"_id": None, "entries": {"$sum": 1}, "terms": {"$sum": "$length"}}}]))
            scopes.update_one({"_id": counter}, {"$set": {
                "entries": held[0]["entries"] if held else 0,
                "terms": held[0]["terms"] if held else 0}}, upsert=True)

    # -- recipes: one collection per definition kind ------------------------------------

    def _export_definitions(self, after: str | None, limit: int) -> tuple[list[Raw], str | None]:
        position = None if after is None else cursor_values(after, 4)
        found: list[tuple[tuple[Any, ...], Raw]] = []
        for name, kind in _DEFINITIONS.items():
            query: Raw = {}
            if position is not None:
                tenant, project, last_kind, last_name = position
                if name == last_kind:
                    query = query_after((("tenantId", False), ("projectId", False), ("name", False)),
                                   [tenant, project, last_name])
                else:
                    query = query_after((("tenantId", False), ("projectId", False)),
                                   [tenant, project], inclusive=name > last_kind)
            rows = self._database[kind.COLLECTION].find(query).sort(
                [("tenantId", ASCENDING), ("projectId", ASCENDING), ("name", ASCENDING)]
            ).limit(limit + 1)
            found += [((raw["tenantId"], raw["projectId"], name, raw["name"]), in_columns(
                "recipes", {"tenant_id": raw["tenantId"], "project_id": raw["projectId"],
                            "kind": name, "name": raw["name"],
                            "doc": doc_of(raw, ("tenantId", "projectId"))})) for raw in rows]
        return merged_pages(found, limit)

    def _import_definitions(self, records: list[Raw]) -> int:
        unknown = {record["kind"] for record in records} - set(_DEFINITIONS)
        if unknown:
            raise InvalidInput(f"definitions of unknown kinds: {', '.join(sorted(unknown))}")
        docs: dict[str, list[Raw]] = {name: [] for name in _DEFINITIONS}
        for record in records:  # all validated before any is written
            _DEFINITIONS[record["kind"]].load(record["doc"])
            tenant, project = record["tenant_id"], record["project_id"]
            docs[record["kind"]].append({
                **record["doc"], "tenantId": tenant, "projectId": project,
                "_id": {"tenantId": tenant, "projectId": project, "name": record["name"]}})
        return sum(len(insert_new(self._database[kind.COLLECTION], docs[name]))
                   for name, kind in _DEFINITIONS.items())

    # -- lanes and vectors, which may come before their process or chunk ------------------

    def _parked(self, kind: str, after: str | None, limit: int
                ) -> list[tuple[tuple[Any, ...], Raw]]:
        """The first ``limit + 1`` parked records of ``kind`` past the cursor."""
        query: Raw = {"kind": kind}
        if after is not None:
            query["key"] = {"$gt": cursor_values(after, 1)[0]}
        rows = self._database[_PARKED].find(query).sort("key", ASCENDING).limit(limit + 1)
        return [((raw["key"],), raw["record"]) for raw in rows]

    def _park(self, kind: str, key: Any, record: Raw) -> bool:
        """Keep ``record`` until its process or chunk comes; False if it is kept already."""
        return bool(insert_new(self._database[_PARKED], [
            {"_id": hashable([kind, key]), "kind": kind, "key": key, "record": record}]))

    def _unpark(self, kind: str, keys: list[Any], write: Callable[[Raw], Any]) -> None:
        """Write the parked records of ``keys`` (``write`` is a no-op where done), then drop
        them."""
        parked = self._database[_PARKED]
        for raw in parked.find({"kind": kind, "key": {"$in": keys}}):
            write(raw["record"])
            parked.delete_one({"_id": raw["_id"]})

    def _import_processes(self, docs: list[Raw]) -> int:
        written = insert_new(self._database[PROCESSES], docs)
        self._unpark("lanes", [doc["_id"] for doc in docs], self._set_lane)
        return len(written)

    def _set_lane(self, record: Raw) -> bool:
        """Set the lane on its process if that has none yet; whether it did."""
        return bool(self._database[PROCESSES].update_one(
            {"_id": record["process_id"], "tenantId": record["tenant_id"],
             LANE_TO_IMPORT: True},
            {"$set": {"status": record["status"], "epoch": record["epoch"],
                      "nextSeq": record["next_seq"], "nextChatSeq": record["next_chat_seq"],
                      "pendingControl": record["pending_control"],
                      "controlRequestedAt": naive_of_ms(record["control_requested_ms"]),
                      "turnAttempts": record["turn_attempts"]},
             "$unset": {LANE_TO_IMPORT: ""}}).matched_count)

    def _export_lanes(self, after: str | None, limit: int) -> tuple[list[Raw], str | None]:
        query: Raw = {LANE_TO_IMPORT: {"$exists": False}}
        if after is not None:
            query["_id"] = {"$gt": cursor_values(after, 1)[0]}
        rows = self._database[PROCESSES].find(query).sort("_id", ASCENDING).limit(limit + 1)
        return merged_pages([((raw["_id"],), in_columns("lanes", {
            "process_id": raw["_id"], "tenant_id": raw["tenantId"], "status": raw["status"],
            "epoch": raw["epoch"], "next_seq": raw["nextSeq"],
            "next_chat_seq": raw.get("nextChatSeq", 0),
            "pending_control": raw.get("pendingControl"),
            "control_requested_ms": ms_of(raw.get("controlRequestedAt")),
            "turn_attempts": raw.get("turnAttempts", 0)})) for raw in rows]
            + self._parked("lanes", after, limit), limit)

    def _import_lanes(self, records: list[Raw]) -> int:
        processes, written = self._database[PROCESSES], 0
        for record in records:
            if self._set_lane(record):
                written += 1
            elif processes.find_one({"_id": record["process_id"]}, {"_id": True}) is None:
                written += self._park("lanes", record["process_id"], record)
        return written

    def _number_chunks(self) -> None:
        """Give every chunk without a ``rowId`` one past the highest (of the chunks and the
        parked vectors), in ``_id`` order."""
        chunks = self._database[_CHUNKS]
        last = chunks.find_one({_ROW: {"$exists": True}}, {_ROW: True},
                               sort=[(_ROW, DESCENDING)])
        parked = self._database[_PARKED].find_one({"kind": "knowledge_vectors"}, {"key": True},
                                                  sort=[("key", DESCENDING)])
        row = max(0, 0 if last is None else last[_ROW], 0 if parked is None else parked["key"])
        for raw in chunks.find({_ROW: {"$exists": False}}, {"_id": True}).sort("_id", ASCENDING):
            row += 1
            chunks.update_one({"_id": raw["_id"], _ROW: {"$exists": False}}, {"$set": {_ROW: row}})

    def _export_chunks(self, after: str | None, limit: int) -> tuple[list[Raw], str | None]:
        if after is None:
            self._number_chunks()
        rows, cursor = read_page(self._database[_CHUNKS], {}, ((_ROW, False),), after, limit)
        return [in_columns("knowledge_chunks", {
            "id": raw[_ROW], "tenant_id": raw["tenantId"], "project_id": raw["projectId"],
            "document_id": raw["documentId"], "version": raw["documentVersion"],
            "ordinal": raw["ordinal"], "length": raw["length"], "text": raw["text"],
            "doc": doc_of(raw, ("terms", "length", "text", _ROW, *_VECTOR))}) for raw in rows], cursor

    def _import_chunks(self, records: list[Raw]) -> int:
        docs = []
        for record in records:
            chunk = Chunk.load({**record["doc"], "text": record["text"]})
            docs.append({**record["doc"], "text": record["text"], "_id": chunk.id,
                         "terms": index_terms(chunk.text), "length": record["length"],
                         _ROW: record["id"]})
        written = insert_new(self._database[_CHUNKS], docs)
        self._unpark("knowledge_vectors", [doc[_ROW] for doc in docs], self._set_vector)
        return len(written)

    def _set_vector(self, record: Raw) -> bool:
        """Set the vector on its chunk if that has none yet; whether it did."""
        return bool(self._database[_CHUNKS].update_one(
            {_ROW: record["chunk_id"], "tenantId": record["tenant_id"],
             "vector": {"$exists": False}},
            {"$set": {"vector": Binary(base64.b64decode(record["vector"])),
                      "vectorModel": record["model"], "vectorDim": record["dim"]}}
        ).matched_count)

    def _export_vectors(self, after: str | None, limit: int) -> tuple[list[Raw], str | None]:
        if after is None:
            self._number_chunks()
        query: Raw = {"vector": {"$exists": True}}
        if after is not None:
            query[_ROW] = {"$gt": cursor_values(after, 1)[0]}
        rows = self._database[_CHUNKS].find(query).sort(_ROW, ASCENDING).limit(limit + 1)
        return merged_pages([((raw[_ROW],), in_columns("knowledge_vectors", {
            "chunk_id": raw[_ROW], "tenant_id": raw["tenantId"], "project_id": raw["projectId"],
            "document_id": raw["documentId"], "version": raw["documentVersion"],
            "model": raw["vectorModel"], "dim": raw["vectorDim"],
            "vector": base64.b64encode(bytes(raw["vector"])).decode()})) for raw in rows]
            + self._parked("knowledge_vectors", after, limit), limit)

    def _import_vectors(self, records: list[Raw]) -> int:
        chunks, written = self._database[_CHUNKS], 0
        for record in records:
            if self._set_vector(record):
                written += 1
            elif chunks.find_one({_ROW: record["chunk_id"]}, {"_id": True}) is None:
                written += self._park("knowledge_vectors", record["chunk_id"], record)
        return written

    # -- vector generations ---------------------------------------------------------------

    def _export_generations(self, after: str | None,
                            limit: int) -> tuple[list[Raw], str | None]:
        """The imported generations, and generation 1 for each other project with vectors
        (what SQLite holds after one write)."""
        rows, _ = read_page(self._database[_GENERATIONS], {},
                        (("tenantId", False), ("projectId", False)), after, limit + 1)
        found = [((raw["tenantId"], raw["projectId"]), raw["generation"]) for raw in rows]
        position = None if after is None else tuple(cursor_values(after, 2))
        with_vectors = sorted(
            key for key in ((group["_id"]["tenantId"], group["_id"]["projectId"])
                            for group in self._database[_CHUNKS].aggregate([
                                {"$match": {"vector": {"$exists": True}}},
                                {"$group": {"_id": {"tenantId": "$tenantId",
                                                    "projectId": "$projectId"}}}]))
            if position is None or key > position)
        found += [(key, 1) for key in with_vectors[:limit + 1]]
        return merged_pages([(key, in_columns(_GENERATIONS, {
            "tenant_id": key[0], "project_id": key[1], "generation": generation}))
            for key, generation in found], limit)

    def _import_generations(self, records: list[Raw]) -> int:
        docs = [{"_id": {"tenantId": r["tenant_id"], "projectId": r["project_id"]},
                 "tenantId": r["tenant_id"], "projectId": r["project_id"],
                 "generation": r["generation"]} for r in records]
        return len(insert_new(self._database[_GENERATIONS], docs))

    # -- token usage ----------------------------------------------------------------------

    def _export_usage(self, after: str | None, limit: int) -> tuple[list[Raw], str | None]:
        rows, cursor = read_page(self._database[USAGE], {},
                             tuple((f"_id.{name}", False) for name in KEY_FIELDS), after, limit)
        return [in_columns(USAGE, {
            "tenant_id": raw["tenantId"], "day": raw["day"], "session_id": raw["sessionId"],
            "model": raw["model"], "user_id": raw["userId"], "project_id": raw["projectId"],
            "tokens_in": raw["tokensIn"], "tokens_out": raw["tokensOut"],
            "calls": raw["calls"], "estimated_calls": raw["estimatedCalls"]})
            for raw in rows], cursor

    def _import_usage(self, records: list[Raw]) -> int:
        docs = []
        for r in records:
            key = usage_id(r["tenant_id"], r["day"], r["session_id"], r["model"],
                           r["user_id"], r["project_id"])
            docs.append({"_id": key, **key, "tokensIn": r["tokens_in"],
                         "tokensOut": r["tokens_out"], "calls": r["calls"],
                         "estimatedCalls": r["estimated_calls"]})
        return len(insert_new(self._database[USAGE], docs))


assert set(PLAIN) | {"recipes", "lanes", "knowledge_chunks", "knowledge_vectors",
                      _GENERATIONS, USAGE} == {kind.name for kind in KINDS}
