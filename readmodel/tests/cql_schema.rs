//! The CQL DDL of the distributed edition (`schemas/cql/recap.cql`) is the catalog of
//! `tables.rs`, one table per endpoint or tool (`RECAP_WRITE_SCHEMAS=1` rewrites it).

use std::collections::BTreeSet;

use recap_readmodel::tables::{cql_schema, ALL};

#[test]
fn the_cql_file_is_generated_from_the_table_catalog() {
    let path = std::path::PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("../schemas/cql/recap.cql");
    let generated = cql_schema();
    if std::env::var_os("RECAP_WRITE_SCHEMAS").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    assert_eq!(std::fs::read_to_string(&path).unwrap_or_default(), generated, "{} is stale: run `make schemas`", path.display());
}

#[test]
fn table_ids_and_names_are_unique_and_every_statement_is_plain_cql() {
    let ids: BTreeSet<u8> = ALL.iter().map(|table| table.id).collect();
    let names: BTreeSet<&str> = ALL.iter().map(|table| table.name).collect();
    assert_eq!(ids.len(), ALL.len());
    assert_eq!(names.len(), ALL.len());
    for table in ALL {
        let cql = table.cql();
        // Only what ScyllaDB and Cassandra 5 both accept: no SAI, no materialized views,
        // no counters, no collections.
        for unsupported in ["INDEX", "MATERIALIZED", "counter", "list<", "map<", "set<"] {
            assert!(!cql.contains(unsupported), "{}: {unsupported}", table.name);
        }
        assert!(cql.contains("PRIMARY KEY (("), "{}", table.name);
    }
}
