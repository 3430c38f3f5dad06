"""Propagation: the application reconcile (resolve, place, render), the per-(application,
cluster) member sync (apply, prune, drift), and the application's status."""
