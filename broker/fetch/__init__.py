"""Fetching: a leader serving Fetch (sessions, reads, the wait) and followers fetching from
leaders (one fetcher per leader over a long-lived stream)."""
