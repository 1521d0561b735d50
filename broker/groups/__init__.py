"""Consumer groups for the KAFKA listener: the group rules (pure), their coordinator on the loop,
where a group's coordinator is, and committed offsets in ZooKeeper."""
