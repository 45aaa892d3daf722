"""The gateway: ragline's public API (gRPC and HTTP/JSON) for other backend services."""
