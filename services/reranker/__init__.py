"""Reranker: re-scores retrieval candidates and keeps the best."""
