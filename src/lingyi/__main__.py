"""``python -m lingyi`` is the ``lingyi`` command."""

import sys

from lingyi.cli import main

sys.exit(main())
