"""What users run beside the chain: inspect a table, export documents, verify shards, train the
quality classifier."""
