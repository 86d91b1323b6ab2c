"""``python -m trio_agent``: the command line (``demo``, ``run``, ``chat``); see ``--help``."""

import sys

from ._cli import main

if __name__ == "__main__":
    sys.exit(main())
