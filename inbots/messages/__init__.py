"""Messages: immutable bodies addressed to threads."""
