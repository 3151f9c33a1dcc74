"""Across dialects, for a route with ``translate: true``: through litellm, and the Responses API to a chat-only server."""
