"""The load generator's Spark session: local, quiet, with the minibroker data source registered.

One session per process (starting one costs ~8 s): the CLI, the verifier and tests share it.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from pyspark.sql import SparkSession

LOG_CONFIG = Path(__file__).with_name("log4j2.properties")
# The JVM of a load run lives for seconds to minutes and spends most of its CPU compiling and
# collecting: the client compiler alone (C1, no C2) and the serial collector took a 10,000-
# record run from ~56 to ~36 CPU-seconds and 35 to 28 s (200,000 records: 109 -> 95 CPU-s, the
# same time); docs/notes.md, Spark.
JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def master_cores(master: str) -> int:
    """How many task slots a master string gives (local[N], local[*], local); 2 otherwise."""
    m = re.fullmatch(r"local(?:\[(\d+|\*)(?:,\d+)?\])?", master.strip())
    if m is None:
        return 2
    if m.group(1) is None:
        return 1
    if m.group(1) == "*":
        return os.cpu_count() or 2
    return max(1, int(m.group(1)))


def spark_session(app_name: str, master: str = "local[*]") -> SparkSession:
    """A session on `master` for the load generator, with the data source registered.

    Spark's workers must run this interpreter (it has the project and pyarrow installed) and
    bind to loopback (docs/notes.md); an environment that says otherwise wins.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    spark = (
        SparkSession.builder.appName(app_name)
        .master(master)
        .config("spark.ui.enabled", "false")
        # The CLI prints its own progress lines; Spark's bar would garble them.
        .config("spark.ui.showConsoleProgress", "false")
        # A handful of shuffle partitions: the verification joins are small and local.
        .config("spark.sql.shuffle.partitions", str(max(2, master_cores(master))))
        .config(
            "spark.driver.extraJavaOptions",
            f"-Dlog4j2.configurationFile=file:{LOG_CONFIG} {JVM_OPTIONS}",
        )
        .config("spark.executor.extraJavaOptions", JVM_OPTIONS)
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    # Imported here so that the rest of the package (and its unit tests) needs no data source.
    from loadgen.datasource import MinibrokerDataSource

    spark.dataSource.register(MinibrokerDataSource)
    return spark
