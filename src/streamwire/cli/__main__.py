"""``python -m streamwire.cli``: the ``streamwire`` command."""

import sys

from . import main

sys.exit(main())
