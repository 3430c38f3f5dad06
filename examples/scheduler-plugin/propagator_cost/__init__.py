"""An example Propagator scheduler plugin: clusters score by the cost tier their
platform team labels them with."""
