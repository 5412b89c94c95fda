"""`python3 -m hal_install …` (or a zipapp of this package): the same as `python3 install.py …`."""

import sys

from hal_install.cli import main

sys.exit(main())
