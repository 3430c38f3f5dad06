"""The member clusters as the hub sees them, and real local control planes (fleet.local)."""
