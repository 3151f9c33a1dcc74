"""What a conversation is: its messages, roles and texts, its tool calls and what each did; below strategies/ and memory/, imports only redaction."""
