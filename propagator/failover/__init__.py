"""Failover: which clusters an application is kept off and when it comes back (pure
decisions), graceful moves, and the failover step of a reconcile."""
