"""The agent of a Pull member: runs in the member, takes its work from the hub, applies it
with the member syncs the hub runs for Push members, and reports back (docs/pull-mode.md)."""
