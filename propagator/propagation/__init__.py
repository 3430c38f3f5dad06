"""Propagation: the application reconcile as a pipeline (resolve, place, render, check,
record the work: :mod:`.reconcile`), the per-(application, cluster) member sync (apply,
prune, drift), the application's status, and the controller that runs them."""
