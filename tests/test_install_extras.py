"""The store extras a config needs: `lineage-agent config extras` names them from the schemes
of spark.event_log_dirs, and deploy/install.sh installs them into the environment it makes
when --extras does not say otherwise (the real pip, as test_ops' real-environment test)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.agentproc import cli
from tests.test_ops import (
    INSTALL,
    ROOT,
    image_source,
    needs_distribution_python,
    run_script,
    snapshot,
)

EXAMPLE = ROOT / "config" / "file.yaml"
LOCAL_DIRS = "event_log_dirs: [/var/log/spark-events]"


def config_with(path: Path, *directories: str) -> Path:
    """The example config following `directories` instead of its own, written at `path`."""
    text = EXAMPLE.read_text()
    assert LOCAL_DIRS in text
    listed = ", ".join(f'"{d}"' for d in directories)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text.replace(LOCAL_DIRS, f"event_log_dirs: [{listed}]"))
    return path


def test_config_extras_names_the_extra_of_each_store(tmp_path: Path) -> None:
    """Each scheme's extra once, sorted (HDFS and local directories need none); an empty
    line for the example config; a config that does not load is exit 78, with its line."""
    stores = config_with(
        tmp_path / "stores.yaml",
        "/var/log/spark-events",
        "s3a://logs/a",
        "s3://logs/b",
        "gs://logs/c",
        "abfss://logs@account.dfs.core.windows.net/d",
        "hdfs://namenode/e",
    )
    assert cli("config", "extras", str(stores), check=True).stdout == "azure,gcs,s3\n"
    only_hdfs = config_with(tmp_path / "hdfs.yaml", "hdfs://namenode/e")
    assert cli("config", "extras", str(only_hdfs), check=True).stdout == "\n"
    assert cli("config", "extras", str(EXAMPLE), check=True).stdout == "\n"
    broken = tmp_path / "broken.yaml"
    broken.write_text(stores.read_text().replace("spark:", "spork:"))
    refused = cli("config", "extras", str(broken))
    assert refused.returncode == 78 and f"{broken}:" in refused.stderr
    assert refused.stdout == ""


@needs_distribution_python
def test_install_adds_the_extras_the_config_needs(tmp_path: Path) -> None:
    """With a config kept in the tree that follows s3a://, install.sh --root (no --extras)
    installs the agent, asks it what the config needs and adds the [s3] extra: s3fs imports
    in the staged environment; a second run changes nothing. --extras '' installs none
    (needs pip's package index)."""
    root = tmp_path / "root"
    source = image_source(root, tmp_path)
    kept = config_with(root / "etc/lineage-agent/config.yaml", "s3a://spark-logs/events")
    result = run_script(INSTALL, "--root", str(root), "--source", str(source))
    assert result.returncode == 0, result.stdout + result.stderr
    assert (
        f"install: {kept} names stores that need the extras [s3]: installing them"
        in result.stdout.splitlines()
    )
    venv = root / "opt/lineage-agent/venv"
    assert (venv / ".lineage-agent-source").read_text().endswith(" [s3]\n")

    def imports(module: str) -> bool:
        found = subprocess.run(
            [str(venv / "bin/python"), "-I", "-c", f"import {module}"],
            capture_output=True,
            timeout=60,
        )
        return found.returncode == 0

    assert imports("s3fs") and not imports("gcsfs")
    before = snapshot(root)
    again = run_script(INSTALL, "--root", str(root), "--source", str(source))
    assert f"install: {venv} is up to date with {source}" in again.stdout.splitlines()
    assert "installing them" not in again.stdout
    assert snapshot(root) == before
    none = run_script(INSTALL, "--root", str(root), "--source", str(source), "--extras", "")
    assert none.returncode == 0, none.stdout + none.stderr
    assert "installing them" not in none.stdout
    assert not (venv / ".lineage-agent-source").read_text().endswith("]\n")
