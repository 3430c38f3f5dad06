"""Canary releases: the replica split, the track copies, the step machine and the stable
revision kept on the hub."""
