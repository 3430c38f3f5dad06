"""Tenancy: which TenantQuota an application belongs to, the boundary its objects stay
inside (namespaces, kinds, Pod Security, exposure), its quota checked on the hub and
enforced by each member, and what the platform keeps in its namespaces."""
