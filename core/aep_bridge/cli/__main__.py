"""`python -m aep_bridge.cli`: the command, as `aep-bridge` runs it after its launcher."""

import sys

from . import main

sys.exit(main())
