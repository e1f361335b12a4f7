"""``python -m tests.compat``: see ``tests.compat.runner``."""

import sys

from tests.compat.runner import main

sys.exit(main())
