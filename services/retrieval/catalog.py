"""The document catalog: one Weaviate object per indexed document (not per chunk), in a collection of its own
beside the chunks, with the same tenants. What listing, getting, sync and "unchanged, skip it" read."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

import weaviate
from weaviate.classes.config import DataType, Property
from weaviate.classes.query import Filter, Sort
from weaviate.util import generate_uuid5

from ragline.domain.access import EVERYONE, readable_by, stored_groups
from services.retrieval.collections import ACCESS_GROUPS, TenantCollection, keyword


@dataclass
class DocumentRecord:
    id: str
    title: str
    source: str
    format: str
    content_hash: str
    access_groups: list[str] = field(default_factory=list)
    sync_root: str = ""
    parts: int = 0
    chunks: int = 0
    updated_at: str = ""
    # How the chunks were made (parsers' version, chunking settings, embedder): a document whose content is
    # unchanged is still re-indexed when this changed.
    pipeline: str = ""


class DocumentCatalog:
    def __init__(self, client: weaviate.WeaviateAsyncClient, collection: str) -> None:
        self.name = collection
        self.collection = TenantCollection(client, collection)

    async def ensure_schema(self) -> None:
        await self.collection.create([
            keyword("document_id"), keyword("title"), keyword("source"), keyword("format"),
            keyword("content_hash"), keyword("sync_root"), keyword("pipeline"), ACCESS_GROUPS,
            Property(name="chunks", data_type=DataType.INT),
            Property(name="parts", data_type=DataType.INT),
            Property(name="updated_at", data_type=DataType.DATE),
        ])

    @staticmethod
    def _uuid(tenant: str, document_id: str) -> str:
        return str(generate_uuid5(f"document/{tenant}/{document_id}"))

    async def put_many(self, tenant: str, records: list[DocumentRecord]) -> dict[str, str]:
        """Written after the documents' chunks: a record means its chunks are complete, so an interrupted
        ingestion leaves the old hash (or none) and is simply done again. One batch (an upsert: a record of the
        same id is replaced); returns the records Weaviate refused, with the reason."""
        from weaviate.classes.data import DataObject

        if not records:
            return {}
        coll = await self.collection.of(tenant)
        now = dt.datetime.now(dt.UTC)
        result = await coll.data.insert_many([DataObject(uuid=self._uuid(tenant, r.id), properties={
            "document_id": r.id, "title": r.title, "source": r.source, "format": r.format,
            "content_hash": r.content_hash, "sync_root": r.sync_root, "pipeline": r.pipeline,
            "access_groups": stored_groups(r.access_groups), "chunks": r.chunks, "parts": r.parts, "updated_at": now,
        }) for r in records])
        return {records[i].id: f"Weaviate refused the record: {e.message}" for i, e in result.errors.items()}

    async def records(self, tenant: str, document_ids: list[str]) -> dict[str, DocumentRecord]:
        """The records of those already indexed, whoever may read them (ingestion's own check)."""
        if not document_ids:
            return {}
        coll = await self.collection.of(tenant)
        res = await coll.query.fetch_objects(filters=Filter.by_property("document_id").contains_any(document_ids),
                                             limit=len(document_ids))
        return {str(o.properties["document_id"]): _record(o.properties) for o in res.objects}

    def _visible(self, groups: list[str], sync_root: str = "", ids: list[str] | None = None) -> Any:
        where = Filter.by_property("access_groups").contains_any(readable_by(groups))
        if sync_root:
            where = where & Filter.by_property("sync_root").equal(sync_root)
        if ids is not None:
            where = where & Filter.by_property("document_id").contains_any(ids)
        return where

    async def list(self, tenant: str, groups: list[str], sync_root: str, limit: int, offset: int) -> tuple[list[DocumentRecord], bool]:
        """A page in id order, and whether another follows."""
        coll = await self.collection.of(tenant)
        res = await coll.query.fetch_objects(filters=self._visible(groups, sync_root), limit=limit + 1, offset=offset,
                                             sort=Sort.by_property("document_id"))
        records = [_record(o.properties) for o in res.objects]
        return records[:limit], len(records) > limit

    async def visible(self, tenant: str, groups: list[str], document_ids: list[str]) -> list[DocumentRecord]:
        coll = await self.collection.of(tenant)
        res = await coll.query.fetch_objects(filters=self._visible(groups, ids=document_ids), limit=max(1, len(document_ids)))
        return [_record(o.properties) for o in res.objects]

    async def delete(self, tenant: str, document_ids: list[str]) -> None:
        coll = await self.collection.of(tenant)
        await coll.data.delete_many(where=Filter.by_property("document_id").contains_any(document_ids))


def _groups(props: dict[str, Any]) -> list[str]:
    return sorted(g for g in props.get("access_groups") or [] if g != EVERYONE)


def _record(props: dict[str, Any]) -> DocumentRecord:
    updated = props.get("updated_at")
    return DocumentRecord(
        id=str(props.get("document_id", "")), title=str(props.get("title") or ""), source=str(props.get("source") or ""),
        format=str(props.get("format") or ""), content_hash=str(props.get("content_hash") or ""),
        access_groups=_groups(props), sync_root=str(props.get("sync_root") or ""), parts=int(props.get("parts") or 0),
        chunks=int(props.get("chunks") or 0), pipeline=str(props.get("pipeline") or ""),
        updated_at=updated.astimezone(dt.UTC).isoformat().replace("+00:00", "Z") if isinstance(updated, dt.datetime) else str(updated or ""),
    )
