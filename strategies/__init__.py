"""Dynamic Context Pruning strategies: pure functions proposing replacements (order: pipeline.STRATEGY_ORDER); import conversation/ and redaction only."""
