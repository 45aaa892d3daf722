"""Retrieval: ingestion and Weaviate native hybrid search."""
