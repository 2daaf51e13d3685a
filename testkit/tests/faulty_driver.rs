//! The kit's FaultyDriver over an embedded store: a fault reaches every method that
//! reaches the store, and only the tables it names; counts, recorded batches, the write
//! gate, change counts, the bound and the trait's defaults are what the suites rely on.

use std::sync::Arc;
use std::time::Duration;

use recap_lmdb::EmbeddedDriver;
use recap_readmodel::tables::{MEETINGS_BY_ACCOUNT, OAUTH_CLAIMS};
use recap_readmodel::{Driver, Mutation, Op, ScanRange, StoreError, Val};
use recap_testkit::FaultyDriver;

fn store() -> (tempfile::TempDir, Arc<dyn Driver>) {
    let dir = tempfile::tempdir().unwrap();
    let driver: Arc<dyn Driver> = Arc::new(EmbeddedDriver::open(&dir.path().join("store.lmdb")).unwrap());
    (dir, driver)
}

fn meeting(id: &str, ts: i64) -> Mutation {
    Mutation {
        table: &MEETINGS_BY_ACCOUNT,
        partition: vec![Val::text("acc")],
        clustering: vec![Val::Int(ts), Val::text(id)],
        op: Op::Put { body: format!("{{\"id\":\"{id}\"}}"), expires_at: None },
        ts,
    }
}

fn claim(id: &str) -> [Val; 2] {
    [Val::text("code"), Val::text(id)]
}

/// What each method that reaches the store answers: Ok, or the error's kind.
async fn outcomes(driver: &FaultyDriver, id: &str) -> Vec<(&'static str, Result<(), String>)> {
    let kind = |result: Result<(), StoreError>| {
        result.map_err(|error| match error {
            StoreError::Unavailable(_) => "unavailable".to_string(),
            StoreError::Corrupt(_) => "corrupt".to_string(),
            StoreError::Misuse(_) => "misuse".to_string(),
        })
    };
    let partition = [Val::text("acc")];
    let all = ScanRange::all();
    vec![
        ("get", kind(driver.get(&MEETINGS_BY_ACCOUNT, &partition, &[Val::Int(1), Val::text("m")]).await.map(drop))),
        ("scan", kind(driver.scan(&MEETINGS_BY_ACCOUNT, &partition, &all, 10).await.map(drop))),
        ("scan_bodies", kind(driver.scan_bodies(&MEETINGS_BY_ACCOUNT, &partition, &all, 0, 10, &mut Vec::new()).await.map(drop))),
        ("scan_counted", kind(driver.scan_counted(&MEETINGS_BY_ACCOUNT, &partition, &all, 10).await.map(drop))),
        ("count", kind(driver.count(&MEETINGS_BY_ACCOUNT, &partition, &all).await.map(drop))),
        ("write", kind(driver.write(vec![meeting(id, 2)]).await)),
        ("insert_if_absent", kind(driver.insert_if_absent(&OAUTH_CLAIMS, &claim(id), &[], "x", None).await.map(drop))),
        ("ping", kind(driver.ping().await)),
    ]
}

fn failing(outcomes: &[(&'static str, Result<(), String>)], kind: &str) -> Vec<&'static str> {
    outcomes.iter().filter(|(_, outcome)| outcome.as_ref().err().is_some_and(|error| error == kind)).map(|(name, _)| *name).collect()
}

#[tokio::test]
async fn a_failed_table_fails_every_method_naming_it_and_no_other() {
    let (_dir, inner) = store();
    for defaults in [false, true] {
        let driver = if defaults { FaultyDriver::new(inner.clone()).with_trait_defaults() } else { FaultyDriver::new(inner.clone()) };
        assert!(failing(&outcomes(&driver, "a").await, "unavailable").is_empty(), "untroubled");
        driver.fail_table(MEETINGS_BY_ACCOUNT.name);
        let meetings_failing = ["get", "scan", "scan_bodies", "scan_counted", "count", "write"];
        assert_eq!(failing(&outcomes(&driver, "b").await, "unavailable"), meetings_failing, "trait defaults: {defaults}");
        driver.fail_table(OAUTH_CLAIMS.name);
        assert_eq!(failing(&outcomes(&driver, "c").await, "unavailable"), [&meetings_failing[..], &["insert_if_absent"]].concat());
        driver.heal();
        driver.fail_everything();
        assert_eq!(failing(&outcomes(&driver, "d").await, "unavailable").len(), 8, "the ping too");
        driver.heal();
        assert!(failing(&outcomes(&driver, "e").await, "unavailable").is_empty(), "healed");
    }
}

#[tokio::test]
async fn corrupt_scans_fail_every_kind_of_scan_and_nothing_else() {
    let (_dir, inner) = store();
    for driver in [FaultyDriver::new(inner.clone()), FaultyDriver::new(inner.clone()).with_trait_defaults()] {
        driver.corrupt_scans();
        assert_eq!(failing(&outcomes(&driver, "a").await, "corrupt"), ["scan", "scan_bodies", "scan_counted", "count"]);
        driver.heal();
    }
}

#[tokio::test]
async fn a_stalled_table_answers_only_past_the_callers_bound() {
    let (_dir, inner) = store();
    let driver = FaultyDriver::new(inner);
    driver.stall_table(MEETINGS_BY_ACCOUNT.name);
    let bounded = tokio::time::timeout(Duration::from_millis(100), driver.scan(&MEETINGS_BY_ACCOUNT, &[Val::text("acc")], &ScanRange::all(), 1)).await;
    assert!(bounded.is_err(), "still waiting at the bound");
    assert!(tokio::time::timeout(Duration::from_secs(5), driver.ping()).await.is_ok(), "a call no stalled table names answers");
}

#[tokio::test]
async fn counts_recorded_batches_and_every_handle_share_one_store() {
    let (_dir, inner) = store();
    let driver = FaultyDriver::new(inner.clone());
    let other_handle = driver.with_timeout(Duration::from_millis(200));
    driver.record_writes();
    outcomes(&other_handle, "a").await;
    assert_eq!((driver.gets(), driver.scans(), driver.writes()), (1, 4, 2), "gets, scans of any kind, writes of any kind");
    let recorded: Vec<Vec<(Vec<Val>, Op)>> =
        driver.take_recorded().into_iter().map(|batch| batch.into_iter().map(|mutation| (mutation.clustering, mutation.op)).collect()).collect();
    let written = meeting("a", 2);
    assert_eq!(recorded, vec![vec![(written.clustering, written.op)]], "plain writes are recorded, conditional ones are not");
    assert!(driver.take_recorded().is_empty(), "taken once");
    driver.reset_counts();
    assert_eq!((other_handle.gets(), other_handle.scans(), other_handle.writes()), (0, 0, 0));
}

#[tokio::test]
async fn held_writes_wait_for_their_release_and_reads_do_not() {
    let (_dir, inner) = store();
    let driver = Arc::new(FaultyDriver::new(inner));
    driver.hold_writes();
    let writer = tokio::spawn({
        let driver = driver.clone();
        async move { driver.write(vec![meeting("held", 1)]).await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!writer.is_finished(), "held");
    assert!(driver.scan(&MEETINGS_BY_ACCOUNT, &[Val::text("acc")], &ScanRange::all(), 10).await.unwrap().is_empty(), "reads go on, before the write");
    driver.release_writes();
    writer.await.unwrap().unwrap();
    assert_eq!(driver.scan(&MEETINGS_BY_ACCOUNT, &[Val::text("acc")], &ScanRange::all(), 10).await.unwrap().len(), 1);
}

#[tokio::test]
async fn change_counts_and_the_bound_are_the_inner_drivers_unless_overridden() {
    let (_dir, inner) = store();
    inner.write(vec![meeting("a", 1)]).await.unwrap();
    let reported = FaultyDriver::new(inner.clone());
    assert_eq!(reported.change_count(&MEETINGS_BY_ACCOUNT), inner.change_count(&MEETINGS_BY_ACCOUNT));
    assert!(reported.change_count(&MEETINGS_BY_ACCOUNT).is_some(), "the embedded store counts its changes");
    assert_eq!(reported.clone().hiding_change_counts().change_count(&MEETINGS_BY_ACCOUNT), None);
    assert_eq!(reported.timeout(), inner.timeout());
    assert_eq!(reported.with_timeout(Duration::from_millis(200)).timeout(), Duration::from_millis(200));
}
