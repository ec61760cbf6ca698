"""`python -m flight_server.cli`."""

import sys

from flight_server.cli import main

if __name__ == "__main__":  # not when a worker process (multiprocessing spawn) imports it
    sys.exit(main())
