"""Generator: answers with citations, question decomposition and query rewriting."""
