"""Domain rules that more than one process applies, each with one owner: question text, routing rules, lexical
coverage, decomposition, the answers' fixed sentences, tenant names, strategy names and request limits.
Services import these; no service imports another service's code."""
