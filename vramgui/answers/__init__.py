"""Use cases every front end calls: the answers built from sources, hardware and the core."""
