"""The store extras a config needs: `lineage-agent config extras` names them from the schemes
of spark.event_log_dirs (deploy/install.sh installs them into the environment it makes:
test_ops' real-environment test, with the real pip)."""

from __future__ import annotations

from pathlib import Path

from tests.agentproc import cli
from tests.test_ops import EXAMPLE, config_with


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
