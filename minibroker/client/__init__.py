"""Client-side access to a cluster: admin look-ups now; producer and consumer later."""
