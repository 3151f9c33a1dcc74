"""Knowledge cards (Lite RAG, seed 003) and project rules: card files and their index, keywords, AGENTS.md, per-agent workspaces, draft cards; imports memory.store only."""
