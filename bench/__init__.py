"""`make bench`: latency, throughput and cost across the mesh, measured side by side in one run."""
