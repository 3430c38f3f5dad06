"""Tenancy: which TenantQuota an application belongs to and what room it has left."""
