"""imagebridge.storage."""
