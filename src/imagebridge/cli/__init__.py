"""imagebridge.cli."""
