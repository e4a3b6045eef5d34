"""imagebridge.server."""
