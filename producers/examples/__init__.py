"""Example producers: run them with `python -m producers.examples.NAME --help`."""
