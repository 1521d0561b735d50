"""The `minibroker` command line."""
