"""Grader: document relevance, answer support and answer usefulness."""
