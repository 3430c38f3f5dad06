"""Rolling an application's revisions out across its clusters: the revisions kept on the
hub, the waves a revision goes in, suspension and undo."""
