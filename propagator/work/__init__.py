"""What an application wants on each cluster and how it is doing there: the work table
shared by the reconcile, the member syncs and the tenant quota accounting; the objects as
Propagator stamps them (ownership, revisions); the targets; workload health."""
