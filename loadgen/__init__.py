"""The PySpark load generator (issue: PySpark load generator). Only the package exists yet."""
