"""imagebridge.engine."""
