"""A small, real PySpark pipeline for the demo: read CSVs, join, aggregate, write parquet and
a catalog table. Spark writes its event log to --event-log-dir (zstd, rolling: the Spark 4
defaults); the agent watches that directory.

    python examples/sample_pipeline.py --work DIR --event-log-dir DIR
"""

from __future__ import annotations

import argparse
import csv
import random
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F


def write_inputs(data: Path) -> tuple[Path, Path]:
    """Two CSV inputs: customers and their orders (deterministic)."""
    data.mkdir(parents=True, exist_ok=True)
    rng = random.Random(7)
    customers = data / "customers.csv"
    orders = data / "orders.csv"
    with customers.open("w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["customer_id", "name", "country"])
        for i in range(200):
            out.writerow([i, f"customer-{i}", rng.choice(["DE", "FR", "NL", "PL", "SE"])])
    with orders.open("w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["order_id", "customer_id", "amount", "day"])
        for i in range(5000):
            out.writerow(
                [
                    i,
                    rng.randrange(200),
                    round(rng.uniform(5, 500), 2),
                    f"2026-11-{rng.randrange(1, 29):02d}",
                ]
            )
    return customers, orders


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--work", required=True, type=Path)
    parser.add_argument("--event-log-dir", required=True, type=Path)
    parser.add_argument("--app-name", default="Daily Revenue Pipeline")
    args = parser.parse_args()
    work: Path = args.work.resolve()
    customers_csv, orders_csv = write_inputs(work / "input")
    args.event_log_dir.mkdir(parents=True, exist_ok=True)

    spark = (
        SparkSession.builder.master("local[2]")
        .appName(args.app_name)
        .config("spark.eventLog.enabled", "true")
        .config("spark.eventLog.dir", args.event_log_dir.resolve().as_uri())
        .config("spark.sql.warehouse.dir", (work / "warehouse").as_uri())
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    try:
        customers = (
            spark.read.option("header", True).option("inferSchema", True).csv(str(customers_csv))
        )
        orders = spark.read.option("header", True).option("inferSchema", True).csv(str(orders_csv))
        revenue = (
            orders.join(customers, "customer_id")
            .groupBy("country", "day")
            .agg(F.sum("amount").alias("revenue"), F.count("order_id").alias("orders"))
        )
        revenue.write.mode("overwrite").parquet(str(work / "output" / "daily_revenue"))
        spark.read.parquet(str(work / "output" / "daily_revenue")).groupBy("country").agg(
            F.sum("revenue").alias("revenue")
        ).write.mode("overwrite").saveAsTable("country_revenue")
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
