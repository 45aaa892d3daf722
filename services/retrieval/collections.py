"""What the chunk store and the document catalog share: a multi-tenant Weaviate collection of self-provided
vectors — created once, its tenants created on first use and remembered, removed with everything they hold."""

from __future__ import annotations

import logging
from typing import Any

import weaviate
from weaviate.classes.config import Configure, DataType, Property, Tokenization
from weaviate.classes.tenants import Tenant

log = logging.getLogger(__name__)

# Who may read an object (ragline/domain/access.py): filtered inside every query, never afterwards.
ACCESS_GROUPS = Property(name="access_groups", data_type=DataType.TEXT_ARRAY, tokenization=Tokenization.FIELD,
                         index_searchable=False)


def keyword(name: str) -> Property:
    """A property matched whole (filters), never searched."""
    return Property(name=name, data_type=DataType.TEXT, tokenization=Tokenization.FIELD, index_searchable=False)


class TenantCollection:
    def __init__(self, client: weaviate.WeaviateAsyncClient, name: str) -> None:
        self.client = client
        self.name = name
        self._known_tenants: set[str] = set()

    async def create(self, properties: list[Property], inverted_index: Any = None) -> bool:
        """Create the collection unless it exists; True when it was created."""
        if await self.client.collections.exists(self.name):
            return False
        await self.client.collections.create(
            self.name,
            vector_config=Configure.Vectors.self_provided(),
            inverted_index_config=inverted_index,
            multi_tenancy_config=Configure.multi_tenancy(enabled=True, auto_tenant_creation=True, auto_tenant_activation=True),
            properties=properties,
        )
        log.info("created collection %s", self.name)
        return True

    async def of(self, tenant: str) -> Any:
        """The collection as one tenant sees it, the tenant created on first use."""
        if tenant not in self._known_tenants:
            coll = self.client.collections.use(self.name)
            if tenant not in await coll.tenants.get_by_names([tenant]):
                await coll.tenants.create([Tenant(name=tenant)])
            self._known_tenants.add(tenant)
        return self.client.collections.use(self.name).with_tenant(tenant)

    async def remove_tenant(self, tenant: str) -> bool:
        """Remove a tenant and its objects; whether it existed."""
        coll = self.client.collections.use(self.name)
        existed = tenant in await coll.tenants.get_by_names([tenant])
        if existed:
            await coll.tenants.remove([tenant])
        self._known_tenants.discard(tenant)
        return existed

    async def drop(self) -> None:
        """Delete the whole collection, every tenant with it."""
        if await self.client.collections.exists(self.name):
            await self.client.collections.delete(self.name)
        self._known_tenants.clear()
