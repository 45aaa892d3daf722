"""Evaluation on public data sets: retrieval quality (`ragline eval retrieval`) and answers (`ragline eval qa`)."""
