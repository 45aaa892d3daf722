"""The runtime every ragline service shares: config, logs, tracing, serving, deadlines and breakers."""
