"""`python -m aep_bridge` is the `aep-bridge` command."""

import sys

from .cli import main

sys.exit(main())
