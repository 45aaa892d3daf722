"""The ragline stages, one folder each: server, logic, config."""
