"""Dynamic Context Pruning strategies: pure functions proposing replacements; the order is pipeline.STRATEGY_ORDER."""
