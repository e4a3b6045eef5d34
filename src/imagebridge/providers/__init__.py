"""imagebridge.providers."""
