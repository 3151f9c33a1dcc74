"""Ruyi's MCP server at ``/mcp``: what Ruyi remembers, as tools the model calls (recall, notebook, anchors, cards)."""
