"""One local Spark session per test module that uses it (starting one costs ~8 s), with the
minibroker data source registered. Module scope: its JVM (~400 MB) stops with the module instead
of staying up beside every later test (issue 26). A test module takes it in with

    from tests.integration import spark_fixtures
    spark = spark_fixtures.spark

(a plain `from ... import spark` makes ruff see every `spark` argument as a redefinition).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from loadgen.datasource import MinibrokerDataSource


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    # Workers must run this interpreter (it has the project and pyarrow) and Spark must bind to
    # loopback (docs/notes.md); both are read when the JVM starts.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    session = (
        SparkSession.builder.master("local[2]")
        .appName("minibroker-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    session.dataSource.register(MinibrokerDataSource)
    try:
        yield session
    finally:
        session.stop()
