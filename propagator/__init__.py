"""The Propagator hub controller and its command line."""
