"""``python -m tacc_hub.launcher RUN_DIR VERB ID``: the same as the ``tacc-launcher`` command."""

import sys

from .cli import main

sys.exit(main())
