"""Built-in actions."""
