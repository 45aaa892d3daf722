"""Orchestrator: runs the standard, multi-hop, self-RAG, combined and adaptive flows."""
