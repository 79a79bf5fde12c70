"""Fetch pinned JVM artifacts from Maven Central into `build/jars/<bundle>/`, once.

    python3 scripts/jars.py BUNDLE...          fetch (if not cached) and print each bundle's dir
    python3 scripts/jars.py --classpath BUNDLE print the bundle's jars joined with ':'
    python3 scripts/jars.py --list             the bundles and their coordinates

A bundle is a list of Maven coordinates resolved with their runtime dependencies by `mvn`
(through a throwaway pom, so Maven's own resolution, exclusions and version mediation apply).
The cache is keyed by the bundle's coordinates: changing a pin fetches again; otherwise no
network is touched. Tests, benchmarks and `./run` call this; the agent never does.
Standard library only, so it runs before the project's virtual environment exists.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "build" / "jars"


@dataclass(frozen=True)
class Bundle:
    """Artifacts resolved together; `exclusions` are `group:artifact` cut from every one."""

    coordinates: tuple[str, ...]
    exclusions: tuple[str, ...] = ()
    note: str = ""

    def key(self) -> str:
        text = "\n".join((*self.coordinates, "--", *self.exclusions))
        return hashlib.sha256(text.encode()).hexdigest()[:16]


#: The pins. Versions are chosen for Java 17 and Spark 4 (Scala 2.13); see docs/peer.md.
BUNDLES: dict[str, Bundle] = {
    "openlineage-spark": Bundle(
        ("io.openlineage:openlineage-spark_2.13:1.53.0",),
        note="the OpenLineage Spark listener (shaded), the peer of the side-by-side harness",
    ),
    # Lakehouse connectors, all for Spark 4.1.1 (Scala 2.13): the newest Spark release that
    # Delta, Iceberg, the Kafka connector (with its dependencies) and spark-avro are all
    # published for (the venv that runs them: scripts/pyenv.py).
    "delta": Bundle(
        ("io.delta:delta-spark_2.13:4.3.1", "io.delta:delta-storage:4.3.1"),
        exclusions=(  # what PySpark's own jars directory already has, newer
            "org.scala-lang:scala-library",
            "org.apache.hadoop:hadoop-client-api",
            "org.apache.hadoop:hadoop-client-runtime",
            "org.apache.parquet:parquet-hadoop",
            "org.apache.parquet:parquet-column",
            "com.fasterxml.jackson.core:jackson-core",
            "com.fasterxml.jackson.core:jackson-databind",
            "com.fasterxml.jackson.core:jackson-annotations",
            "org.apache.logging.log4j:log4j-api",
            "org.apache.logging.log4j:log4j-core",
            "org.apache.logging.log4j:log4j-slf4j2-impl",
            "org.slf4j:slf4j-api",
            "org.xerial.snappy:snappy-java",
            "com.github.luben:zstd-jni",
            "org.roaringbitmap:RoaringBitmap",
            "io.airlift:aircompressor",
            "commons-pool:commons-pool",
            "com.google.code.findbugs:jsr305",
            "org.locationtech.jts:jts-core",
        ),
        note="Delta Lake 4.3.1 (built for Spark 4.1.0); the pip package delta-spark==4.3.1",
    ),
    "iceberg": Bundle(
        ("org.apache.iceberg:iceberg-spark-runtime-4.1_2.13:1.12.0",),
        note="Iceberg 1.12.0 Spark runtime (shaded) for Spark 4.1",
    ),
    "spark-kafka": Bundle(
        ("org.apache.spark:spark-sql-kafka-0-10_2.13:4.1.1",),
        exclusions=(
            "org.scala-lang:scala-library",
            "org.apache.spark:spark-tags_2.13",
            "org.slf4j:slf4j-api",
            "org.lz4:lz4-java",
            "org.xerial.snappy:snappy-java",
            "com.github.luben:zstd-jni",
            "org.apache.hadoop:hadoop-client-runtime",
            "org.apache.hadoop:hadoop-client-api",
            "org.scala-lang.modules:scala-parallel-collections_2.13",
            "com.google.code.findbugs:jsr305",
        ),
        note="Structured Streaming / batch Kafka source and sink (kafka-clients, pool2)",
    ),
    "spark-avro": Bundle(
        ("org.apache.spark:spark-avro_2.13:4.1.1",),
        exclusions=(
            "org.scala-lang:scala-library",
            "org.apache.spark:spark-tags_2.13",
            "org.scala-lang.modules:scala-parallel-collections_2.13",
        ),
        note="from_avro / to_avro and the avro file format",
    ),
    # The same connectors for Spark 3.5.9 (Scala 2.12), for the Spark 3.5 logs of
    # tests/data/make_spark35_logs.py (its venv: scripts/pyenv.py spark35).
    "delta-3.5": Bundle(
        ("io.delta:delta-spark_2.12:3.3.3", "io.delta:delta-storage:3.3.3"),
        exclusions=(  # PySpark 3.5's own jars directory has these
            "org.scala-lang:scala-library",
            "com.fasterxml.jackson.core:jackson-core",
            "com.fasterxml.jackson.core:jackson-databind",
            "com.fasterxml.jackson.core:jackson-annotations",
            "org.slf4j:slf4j-api",
        ),
        note="Delta Lake 3.3.3 (for Spark 3.5); the pip package delta-spark==3.3.3",
    ),
    "spark-kafka-3.5": Bundle(
        ("org.apache.spark:spark-sql-kafka-0-10_2.12:3.5.7",),
        exclusions=(  # the same as spark-kafka's, for Scala 2.12: a bundle's key is its text
            "org.scala-lang:scala-library",
            "org.apache.spark:spark-tags_2.12",
            "org.slf4j:slf4j-api",
            "org.lz4:lz4-java",
            "org.xerial.snappy:snappy-java",
            "com.github.luben:zstd-jni",
            "org.apache.hadoop:hadoop-client-runtime",
            "org.apache.hadoop:hadoop-client-api",
            "com.google.code.findbugs:jsr305",
        ),
        note="the Kafka source and sink: 3.5.7 is the newest 3.5 release of it on Maven Central",
    ),
    "spark-avro-3.5": Bundle(
        ("org.apache.spark:spark-avro_2.12:3.5.9",),
        exclusions=("org.scala-lang:scala-library", "org.apache.spark:spark-tags_2.12"),
        note="from_avro / to_avro for Spark 3.5.9",
    ),
    "sqlite-jdbc": Bundle(
        ("org.xerial:sqlite-jdbc:3.54.1.0",),
        exclusions=("org.slf4j:slf4j-api",),
        note="SQLite JDBC driver: the store of Iceberg's JDBC catalog in local jobs",
    ),
    "kafka-broker": Bundle(
        (
            "org.apache.kafka:kafka_2.13:4.3.1",
            "org.apache.kafka:kafka-tools:4.3.1",  # console producer / consumer, topics
            "org.apache.logging.log4j:log4j-slf4j-impl:2.25.3",  # broker log to a file
        ),
        exclusions=(  # kafka-tools' Connect plugin-path tool (jetty, jersey) is not needed
            "org.apache.kafka:connect-runtime",
            "org.apache.kafka:connect-api",
            "org.apache.kafka:connect-json",
            "org.apache.kafka:connect-transforms",
        ),
        note="a single-node KRaft broker for tests (tests/kafka.py), main class kafka.Kafka",
    ),
    # Matches PySpark's own Hadoop (pyspark/jars/hadoop-client-api-3.5.0.jar): S3A for Spark
    # writing its event logs to the loopback S3 server of the object-store tests.
    "hadoop-aws": Bundle(
        ("org.apache.hadoop:hadoop-aws:3.5.0",),
        exclusions=(  # PySpark's shaded Hadoop client has these
            "org.apache.hadoop:hadoop-common",
            "org.apache.hadoop:hadoop-client-api",
            "org.apache.hadoop:hadoop-client-runtime",
            "org.slf4j:slf4j-api",
        ),
        note="S3A (hadoop-aws 3.5.0 and the AWS SDK v2 bundle) for Spark 4.3's Hadoop 3.5.0",
    ),
    "hadoop-minicluster": Bundle(
        (
            "org.apache.hadoop:hadoop-client-minicluster:3.5.0",
            "org.junit.jupiter:junit-jupiter-api:5.11.4",  # its MiniDFSCluster asserts with it
        ),
        note="Hadoop's mini cluster (MiniDFSCluster) for the HDFS tests, with PySpark's client",
    ),
}


def _pom(bundle: Bundle) -> str:
    exclusions = "".join(
        f"<exclusion><groupId>{g}</groupId><artifactId>{a}</artifactId></exclusion>"
        for g, a in (e.split(":") for e in bundle.exclusions)
    )
    deps = []
    for coordinate in bundle.coordinates:
        group, artifact, version, *rest = coordinate.split(":")
        classifier = f"<classifier>{rest[0]}</classifier>" if rest else ""
        deps.append(
            f"<dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId>"
            f"<version>{version}</version>{classifier}"
            f"<exclusions>{exclusions}</exclusions></dependency>"
        )
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
        "<groupId>local.lineage</groupId><artifactId>jars</artifactId><version>0</version>"
        f"<dependencies>{''.join(deps)}</dependencies></project>"
    )


#: Every repository (including ones that dependency poms declare, such as the Google mirror in
#: Spark's parent pom, unreachable here) is read from Maven Central.
SETTINGS = (
    '<settings xmlns="http://maven.apache.org/SETTINGS/1.0.0"><mirrors><mirror>'
    "<id>central-only</id><mirrorOf>*</mirrorOf>"
    "<url>https://repo.maven.apache.org/maven2</url></mirror></mirrors></settings>"
)


def fetch(name: str) -> Path:
    """The bundle's directory of jars, resolved through `mvn` unless already cached; one
    process at a time (test workers ask at once: the others wait, then find it cached)."""
    bundle = BUNDLES[name]
    target = CACHE / name
    stamp = target / ".bundle"
    if stamp.is_file() and stamp.read_text() == bundle.key():
        return target
    CACHE.mkdir(parents=True, exist_ok=True)
    with (CACHE / f".{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.is_file() and stamp.read_text() == bundle.key():
            return target
        return _resolve(name, bundle, target, stamp)


def _resolve(name: str, bundle: Bundle, target: Path, stamp: Path) -> Path:
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "pom.xml").write_text(_pom(bundle))
        (Path(tmp) / "settings.xml").write_text(SETTINGS)
        staging = Path(tmp) / "jars"
        command = [
            "mvn", "-q", "-B", "-s", str(Path(tmp) / "settings.xml"),
            "-f", str(Path(tmp) / "pom.xml"),
            "dependency:copy-dependencies", f"-DoutputDirectory={staging}",
            "-DincludeScope=runtime",
        ]  # fmt: skip
        print(f"== fetching {name}: {', '.join(bundle.coordinates)}", file=sys.stderr)
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            sys.stderr.write(done.stdout[-4000:] + done.stderr[-4000:])
            raise SystemExit(f"mvn could not resolve bundle {name!r} (exit {done.returncode})")
        if target.exists():
            shutil.rmtree(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(staging), target)
    stamp.write_text(bundle.key())
    return target


def jars(name: str) -> list[Path]:
    """The bundle's jar files, fetched first if need be, in a stable order."""
    return sorted(fetch(name).glob("*.jar"))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="jars.py", description=__doc__.splitlines()[0])
    parser.add_argument("bundles", nargs="*", metavar="BUNDLE", choices=[*BUNDLES, []])
    parser.add_argument("--classpath", action="store_true", help="print jars joined with ':'")
    parser.add_argument("--list", action="store_true", help="list the bundles")
    args = parser.parse_args(argv)
    if args.list:
        for name, bundle in BUNDLES.items():
            print(f"{name}: {' '.join(bundle.coordinates)}  # {bundle.note}")
        return 0
    for name in args.bundles:
        if args.classpath:
            print(":".join(str(p) for p in jars(name)))
        else:
            print(fetch(name))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
