"""Dataset and job naming rules (OpenLineage naming conventions) and dataset facets."""

from __future__ import annotations

import re

import pytest

from agent.facets import FACET_URLS, PRODUCER
from agent.spark.plan.datasets import DatasetRef
from agent.spark.plan.syntax import tables
from agent.spark.plan.syntax.schema import Field
from agent.spark.plan.syntax.tables import TableIdent
from agent.spark.translate import naming
from agent.spark.translate.datasets import rundatasets as datasets
from agent.spark.translate.naming import Catalog, DatasetName


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", ""),
        ("word", "word"),
        ("@ more than one     words !", "more_than_one_words"),
        ("with some Capitalized WORDS", "with_some_capitalized_words"),
        ("this (includes some) parenthesis", "this_includes_some_parenthesis"),
        ("in glue/aws we can have slashes", "in_glue_aws_we_can_have_slashes"),
        (
            "theNamesLikeThisShouldBeSeparated - are they?",
            "the_names_like_this_should_be_separated_are_they",
        ),
        ("testXMLTest", "test_xml_test"),
        ("testXMLtest", "test_xm_ltest"),
        ("foreignLetters ąśé•¶€ are supported", "foreign_letters_ase_are_supported"),
        ("but to a degree 这是一个例子", "but_to_a_degree"),
        ("323digits123Should45BE_ALSO34 fine89", "323digits123_should45_be_also34_fine89"),
        ("MyXMLBasedApplication", "my_xml_based_application"),
        ("JDBCRelationApplication", "jdbc_relation_application"),
        ("exp-success", "exp_success"),
        (
            "Execute InsertIntoHadoopFsRelationCommand",
            "execute_insert_into_hadoop_fs_relation_command",
        ),
        ("c9acd38e_71d4_4a61_89d5_fd4ff842bf79_0", "c9acd38e_71d4_4a61_89d5_fd4ff842bf79_0"),
    ],
)
def test_normalize_matches_the_openlineage_spark_integration(text: str, expected: str) -> None:
    """Application and node names are snake-cased exactly as the integration's NameNormalizer."""
    assert tables.normalize(text) == expected


@pytest.mark.parametrize(
    ("location", "namespace", "name"),
    [
        ("/data/out", "file", "/data/out"),
        ("file:/data/out", "file", "/data/out"),
        ("file:///data/out/", "file", "/data/out"),
        ("file://localhost/data/out", "file", "/data/out"),
        ("file://nas01/data/out", "file://nas01", "/data/out"),
        ("file:/", "file", "/"),
        ("hdfs://namenode:8020/warehouse/t", "hdfs://namenode:8020", "/warehouse/t"),
        ("HDFS://namenode:8020/warehouse/t/", "hdfs://namenode:8020", "/warehouse/t"),
        ("s3a://bucket/path/to/t", "s3://bucket", "path/to/t"),
        ("s3n://bucket/path/to/t", "s3://bucket", "path/to/t"),
        ("s3://bucket/path/to/t/", "s3://bucket", "path/to/t"),
        ("s3a://bucket", "s3://bucket", "/"),
        ("gs://bucket/key/part", "gs://bucket", "key/part"),
        (
            "abfss://container@account.dfs.core.windows.net/raw/t",
            "abfss://container@account.dfs.core.windows.net",
            "raw/t",
        ),
        (
            "abfs://container@account.dfs.core.windows.net/raw/t",
            "abfss://container@account.dfs.core.windows.net",
            "raw/t",
        ),
        (
            "wasb://container@account.blob.core.windows.net/raw",
            "wasbs://container@account.blob.core.windows.net",
            "raw",
        ),
        ("dbfs:/mnt/raw/t", "dbfs", "/mnt/raw/t"),
        ("hdfs:///warehouse/t", "hdfs", "/warehouse/t"),
        ("viewfs://cluster/data/t", "viewfs://cluster", "/data/t"),
        ("/data/events/date=2024-01-01/hour=3", "file", "/data/events"),
        ("s3a://bucket/events/country=fr", "s3://bucket", "events"),
        ("/data/a=b=c", "file", "/data/a=b=c"),
    ],
)
def test_from_location_follows_the_naming_spec(location: str, namespace: str, name: str) -> None:
    """Paths and URIs map to namespace and name as the OpenLineage naming spec says."""
    assert naming.from_location(location) == DatasetName(namespace, name)


def test_from_location_rejects_an_empty_location() -> None:
    """An empty location is an error the caller must avoid, with a precise message."""
    with pytest.raises(ValueError) as raised:
        naming.from_location("  ")
    assert str(raised.value) == "empty dataset location"


JDBC_CASES = [
    (
        "jdbc:postgresql://db.example:5432/shop",
        "public.orders",
        "postgres://db.example:5432",
        "shop.public.orders",
    ),
    (
        "jdbc:postgresql://DB.example/shop?user=u&password=secret",
        "public.orders",
        "postgres://db.example:5432",
        "shop.public.orders",
    ),
    ("jdbc:postgresql://alice:pw@db:6432/shop", "orders", "postgres://db:6432", "shop.orders"),
    (
        "jdbc:mysql://mysql.example:3307/shop",
        "orders",
        "mysql://mysql.example:3307",
        "shop.orders",
    ),
    (
        "jdbc:mysql://mysql.example/shop",
        "other.orders",
        "mysql://mysql.example:3306",
        "other.orders",
    ),
    (
        "jdbc:mysql:loadbalance://h1:3306,h2:3306/shop",
        "orders",
        "mysql://h1:3306,h2:3306",
        "shop.orders",
    ),
    (
        "jdbc:sqlserver://sql.example:1433;databaseName=shop",
        "dbo.orders",
        "sqlserver://sql.example:1433",
        "dbo.orders",
    ),
    (
        "jdbc:sqlserver://sql.example:1433;user=sa;password=secret",
        "dbo.orders",
        "sqlserver://sql.example:1433",
        "dbo.orders",
    ),
    (
        "jdbc:oracle:thin:@//ora.example:1521/svc",
        "hr.emp",
        "oracle:thin:@//ora.example:1521/svc",
        "hr.emp",
    ),
    (
        "jdbc:oracle:thin:scott/tiger@ora.example:1521:orcl",
        "hr.emp",
        "oracle:thin:@ora.example:1521:orcl",
        "hr.emp",
    ),
    ("jdbc:derby:memory:shop;create=true", "APP.T", "derby:memory:shop", "APP.T"),
]


@pytest.mark.parametrize(("url", "table", "namespace", "name"), JDBC_CASES)
def test_from_jdbc_names_tables_without_credentials(
    url: str, table: str, namespace: str, name: str
) -> None:
    """JDBC URLs give `scheme://host:port` namespaces; user, password and parameters vanish."""
    assert naming.from_jdbc(url, table) == DatasetName(namespace, name)


@pytest.mark.parametrize(("url", "table", "namespace", "name"), JDBC_CASES)
def test_jdbc_source_keeps_what_names_the_table_and_no_credentials(
    url: str, table: str, namespace: str, name: str
) -> None:
    """The url an application's state keeps names the table as the url itself does, without
    a user, password or parameter."""
    source = naming.jdbc_source(url)
    assert naming.from_jdbc(source, table) == DatasetName(namespace, name)
    assert not {"secret", "pw", "tiger", "alice", "scott", "user", "create"} & set(
        re.split(r"[^a-z]+", source.lower())
    )


def test_jdbc_source_of_a_redacted_url_is_empty() -> None:
    """A url Spark redacted is no source."""
    assert naming.jdbc_source("*********(redacted)") == ""
    assert naming.jdbc_source(" ") == ""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("`spark_catalog`.`default`.`people`", TableIdent("people", "default", "spark_catalog")),
        ("`default`.`people`", TableIdent("people", "default")),
        ("`people`", TableIdent("people")),
        ("db.t", TableIdent("t", "db")),
        ("`weird.db`.`t``x`", TableIdent("t`x", "weird.db")),
        ("false", TableIdent("false")),
        ("Overwrite, [a]", None),
        ("`unterminated", None),
        ("a.b.c.d", None),
        ("a..b", None),
    ],
)
def test_parse_table_ident_reads_spark_identifiers(text: str, expected: TableIdent | None) -> None:
    """Backtick-quoted identifiers of one to three parts parse; anything else is None."""
    assert tables.parse_table_ident(text) == expected


def test_default_table_location_follows_the_session_catalog_layout() -> None:
    """Managed tables live at <warehouse>/<table> (default db) or <warehouse>/<db>.db/<table>."""
    assert tables.default_table_location("file:/wh/", TableIdent("t", "default")) == "file:/wh/t"
    assert tables.default_table_location("file:/wh", TableIdent("t")) == "file:/wh/t"
    assert tables.default_table_location("s3a://b/wh", TableIdent("t", "sales")) == (
        "s3a://b/wh/sales.db/t"
    )


def test_table_symlink_namespace_prefers_metastore_then_warehouse_then_catalog() -> None:
    """A table's symlink namespace: hive://metastore, else the warehouse URI, else the catalog."""
    table_ns = naming.table_symlink_namespace
    assert table_ns("/wh", "thrift://ms1:9083,thrift://ms2:9083", "spark_catalog") == (
        "hive://ms1:9083"
    )
    assert table_ns("/data/wh", None, "spark_catalog") == "file:/data/wh"
    assert table_ns("hdfs://nn:8020/user/hive/warehouse", None, None) == (
        "hdfs://nn:8020/user/hive/warehouse"
    )
    assert table_ns("s3a://bucket/wh", None, None) == "s3://bucket/wh"
    assert table_ns(None, None, "my_catalog") == "my_catalog"
    assert table_ns(None, None, None) == "spark_catalog"


def test_iceberg_places_of_a_table_named_without_its_catalog() -> None:
    """A CREATE / CTAS target without a catalog may be in any of several Iceberg catalogs:
    one place per catalog, none when one catalog's layout is not `<warehouse>/<ns>/<table>`,
    or when one catalog or the table's own catalog leaves no doubt."""
    hadoop = naming.IcebergCatalog("lake", "/wh/lake")
    jdbc = naming.IcebergCatalog("jcat", "file:/wh/jcat")
    table = TableIdent("orders", "db")
    assert Catalog(iceberg=(hadoop, jdbc)).iceberg_places(table) == (
        (DatasetName("file", "/wh/lake/db/orders"), "file:/wh/lake"),
        (DatasetName("file", "/wh/jcat/db/orders"), "file:/wh/jcat"),
    )
    hive = naming.IcebergCatalog("hive", None)
    assert Catalog(iceberg=(hadoop, hive)).iceberg_places(table) == ()
    assert Catalog(iceberg=(hadoop,)).iceberg_places(table) == ()
    assert Catalog(iceberg=(hadoop, jdbc)).iceberg_places(TableIdent("t", "db", "lake")) == ()


def test_output_suffix_is_the_table_or_the_last_two_path_parts() -> None:
    """Job-name suffixes: `db_table` for catalog tables, else `parent_leaf` of the path."""
    located = DatasetName("file", "/data/spark-exp/data/success_parquet")
    assert naming.output_suffix(located, None) == "data_success_parquet"
    assert naming.output_suffix(located, TableIdent("people", "default")) == "default_people"
    assert naming.output_suffix(DatasetName("s3://b", "v1.2/out"), None) == "v1_2_out"
    assert naming.output_suffix(DatasetName("file", "/top"), None) == "top"


def test_job_name_leaves_out_missing_parts() -> None:
    """`{app}.{command}.{output}` with absent parts dropped, never doubled dots."""
    assert naming.job_name("app", "cmd", "out") == "app.cmd.out"
    assert naming.job_name("app", "cmd") == "app.cmd"
    assert naming.job_name("app", None, "out") == "app.out"


def test_datasource_uri_is_a_uri_or_nothing() -> None:
    """`dataSource.uri` must pass the uri format check: `file` becomes `file:///`."""
    assert naming.datasource_uri("file") == "file:///"
    assert naming.datasource_uri("hdfs://nn:8020") == "hdfs://nn:8020"
    assert naming.datasource_uri("spark_catalog") is None


def test_describe_a_catalog_table_scan_carries_schema_source_and_symlink() -> None:
    """A table read by path gets the schema, dataSource and a TABLE symlink in the warehouse."""
    ref = DatasetRef(
        "input",
        "Scan parquet spark_catalog.default.people",
        location="file:/wh/people",
        table=TableIdent("people", "default", "spark_catalog"),
        fields=(Field("name", "string"), Field("tags", "array", (Field("_element", "string"),))),
    )
    name, dataset = datasets.describe(ref, Catalog(warehouse="/wh"))
    assert name == DatasetName("file", "/wh/people")
    assert dataset == {
        "namespace": "file",
        "name": "/wh/people",
        "facets": {
            "schema": {
                "_producer": PRODUCER,
                "_schemaURL": FACET_URLS["schema"],
                "fields": [
                    {"name": "name", "type": "string"},
                    {
                        "name": "tags",
                        "type": "array",
                        "fields": [{"name": "_element", "type": "string"}],
                    },
                ],
            },
            "dataSource": {
                "_producer": PRODUCER,
                "_schemaURL": FACET_URLS["dataSource"],
                "name": "file",
                "uri": "file:///",
            },
            "symlinks": {
                "_producer": PRODUCER,
                "_schemaURL": FACET_URLS["symlinks"],
                "identifiers": [
                    {"namespace": "file:/wh", "name": "default.people", "type": "TABLE"}
                ],
            },
        },
    }


def test_describe_infers_the_warehouse_from_a_managed_table_location() -> None:
    """Without spark.sql.warehouse.dir, `<wh>/<db>.db/<t>` gives the symlink namespace back."""
    ref = DatasetRef(
        "output", "x", location="hdfs://nn:8020/wh/sales.db/t", table=TableIdent("t", "sales")
    )
    _, dataset = datasets.describe(ref, Catalog())
    link = dataset["facets"]["symlinks"]["identifiers"][0]
    assert link == {"namespace": "hdfs://nn:8020/wh", "name": "sales.t", "type": "TABLE"}


def test_describe_an_unknown_reference_lands_in_the_unknown_namespace() -> None:
    """Plan nodes that cannot be named still give a schema-valid dataset, without dataSource."""
    ref = DatasetRef(
        "input", "Scan JDBCRelation(people) [numPartitions=1]", unknown_reason="scan node"
    )
    name, dataset = datasets.describe(ref, Catalog())
    assert name == DatasetName("unknown", "Scan JDBCRelation(people) [numPartitions=1]")
    assert dataset == {"namespace": "unknown", "name": name.name}


def test_describe_a_table_without_any_location_is_named_in_the_catalog() -> None:
    """A table-only reference with no warehouse known is named `db.table` in the catalog."""
    ref = DatasetRef("output", "InsertIntoHiveTable", table=TableIdent("t", "db", "spark_catalog"))
    name, _ = datasets.describe(ref, Catalog())
    assert name == DatasetName("spark_catalog", "db.t")
    name, _ = datasets.describe(ref, Catalog(warehouse="hdfs://nn:8020/wh"))
    assert name == DatasetName("hdfs://nn:8020", "/wh/db.db/t")


def test_collect_folds_a_ctas_table_into_the_path_its_insert_writes() -> None:
    """CTAS table + nested insert path are one output: symlink and CREATE on the path."""
    table = TableIdent("adults", "default", "spark_catalog")
    ctas = DatasetRef(
        "output",
        "CreateDataSourceTableAsSelectCommand",
        table=table,
        fields=(Field("name"),),
        lifecycle="CREATE",
    )
    insert = DatasetRef(
        "output",
        "Execute InsertIntoHadoopFsRelationCommand",
        location="file:/custom/adults",
        fields=(Field("name", "string"),),
        metrics={"rows": 7},
        lifecycle="OVERWRITE",
    )
    run = datasets.collect([(ctas, {}), (insert, {7: 12})], Catalog(warehouse="/wh"))
    assert list(run.outputs) == [DatasetName("file", "/custom/adults")]
    facets = run.outputs[DatasetName("file", "/custom/adults")]["facets"]
    assert facets["lifecycleStateChange"]["lifecycleStateChange"] == "CREATE"
    assert facets["symlinks"]["identifiers"][0]["name"] == "default.adults"
    assert facets["schema"]["fields"] == [{"name": "name", "type": "string"}]
    assert run.first_output_suffix == "default_adults"
    _, outputs = run.as_lists(statistics=True)
    assert outputs[0]["outputFacets"]["outputStatistics"]["rowCount"] == 12


def test_collect_keeps_a_ctas_table_whose_insert_never_came() -> None:
    """A CTAS that failed before its insert still reports the table at its default location."""
    ctas = DatasetRef(
        "output",
        "CreateDataSourceTableAsSelectCommand",
        table=TableIdent("t", "default"),
        lifecycle="CREATE",
    )
    run = datasets.collect([(ctas, {})], Catalog(warehouse="file:/wh"))
    assert list(run.outputs) == [DatasetName("file", "/wh/t")]


def test_collect_sums_statistics_of_one_dataset_read_twice() -> None:
    """A self-join reads the same files twice: statistics add up on one input dataset."""
    scan = DatasetRef("input", "Scan parquet ", location="/d", metrics={"rows": 1, "bytes": 2})
    again = DatasetRef("input", "Scan parquet ", location="/d", metrics={"rows": 3})
    run = datasets.collect([(scan, {1: 10, 2: 100}), (again, {3: 5})], Catalog())
    inputs, _ = run.as_lists(statistics=True)
    assert len(inputs) == 1
    stats = inputs[0]["inputFacets"]["inputStatistics"]
    assert (stats["rowCount"], stats["size"]) == (15, 100)
    assert "fileCount" not in stats


@pytest.mark.parametrize(
    ("servers", "expected"),
    [
        ("127.0.0.1:9092", "kafka://127.0.0.1:9092"),
        ("SASL_SSL://b1:9093, b2:9093", "kafka://b1:9093"),
        (None, "kafka://unknown"),
        ("", "kafka://unknown"),
    ],
)
def test_kafka_topics_are_named_after_the_first_bootstrap_server(
    servers: str | None, expected: str
) -> None:
    """A topic's namespace is its first bootstrap server without scheme, or plainly unknown."""
    assert naming.from_kafka(servers, "clicks") == DatasetName(expected, "clicks")
