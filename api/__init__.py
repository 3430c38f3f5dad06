"""The Propagator API contract: models of the custom resources. Pure: no I/O, no client."""
