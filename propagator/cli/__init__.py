"""The ``propagator`` command line."""
