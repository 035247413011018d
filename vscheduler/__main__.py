"""`python -m vscheduler`: the same program as the `vscheduler` command."""

import sys

from vscheduler.cli import entry

sys.exit(entry())
