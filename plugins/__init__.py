"""Built-in plugins."""
