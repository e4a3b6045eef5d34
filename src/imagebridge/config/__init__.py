"""imagebridge.config."""
