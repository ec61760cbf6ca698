"""`python -m flight_cli`."""

import sys

from flight_cli import main

if __name__ == "__main__":  # not when a worker process (multiprocessing spawn) imports it
    sys.exit(main())
