"""`python -m tests.faults --help`."""

import sys

from tests.faults.cli import main

sys.exit(main())
