"""vscheduler."""
