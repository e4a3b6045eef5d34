"""imagebridge.client."""
