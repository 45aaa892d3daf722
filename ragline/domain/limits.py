"""Request limits that several processes enforce, so that the gateway never accepts what a stage refuses."""

from __future__ import annotations

# A question as a caller may ask it (gateway and orchestrator).
MAX_QUERY_CHARS = 2000
# A search a flow makes: the question plus bridge entities or rewrite terms, so retrieval allows more.
MAX_SEARCH_QUERY_CHARS = 2 * MAX_QUERY_CHARS
