"""`python -m flight_server.cli`."""

import sys

from flight_server.cli import main

sys.exit(main())
