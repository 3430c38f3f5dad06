"""How Propagator reads any kind of object: health, replicas and what each requests,
status fields reflected to the hub, dependencies — CEL rules per {group, kind}, built-in
for core kinds and replaceable by a platform's ResourceInterpreters (pure: no I/O)."""
