"""``python -m lingyi`` is the ``lingyi`` command."""

import sys

from lingyi.cli import main

if __name__ == "__main__":
    sys.exit(main())
