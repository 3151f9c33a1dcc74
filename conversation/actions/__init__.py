"""What a tool call does: the shell parser and tool classification (read/write/edit/search/list); imports nothing outside this room."""
