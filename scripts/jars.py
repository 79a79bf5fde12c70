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


#: The pins. Versions are chosen for Java 17 and Spark 4 (Scala 2.13); see the README.
BUNDLES: dict[str, Bundle] = {
    "openlineage-spark": Bundle(
        ("io.openlineage:openlineage-spark_2.13:1.53.0",),
        note="the OpenLineage Spark listener (shaded), the peer of the side-by-side harness",
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


def fetch(name: str) -> Path:
    """The bundle's directory of jars, resolved through `mvn` unless already cached."""
    bundle = BUNDLES[name]
    target = CACHE / name
    stamp = target / ".bundle"
    if stamp.is_file() and stamp.read_text() == bundle.key():
        return target
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "pom.xml").write_text(_pom(bundle))
        staging = Path(tmp) / "jars"
        command = [
            "mvn", "-q", "-B", "-f", str(Path(tmp) / "pom.xml"),
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
