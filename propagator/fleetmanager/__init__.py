"""The fleet manager: member monitors and probes, MemberCluster and Fleet status, health
taints, the fleet snapshot."""

from propagator.fleetmanager.manager import FleetManager

__all__ = ["FleetManager"]
