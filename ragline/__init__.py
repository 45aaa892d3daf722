"""ragline: advanced RAG as a mesh of gRPC services."""

__version__ = "0.1.0"
