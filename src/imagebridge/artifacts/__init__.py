"""imagebridge.artifacts."""
