"""The member clusters as the hub sees them: registration, connections built from their
kubeconfigs, probes and readiness, capacity, the fleet snapshot; and real local control
planes (fleet.local)."""
