"""`python -m aep_bridge` is the `aep-bridge` command."""

import sys

from .launch import main

sys.exit(main())
