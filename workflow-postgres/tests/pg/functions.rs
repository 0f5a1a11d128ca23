//! Stored functions as one definition each: one file per function, applied when its
//! checksum differs from the one the schema recorded, never restated by a migration, and
//! refused when the schema's are newer than this library's.

use workflow_core::store::{Message, Store, StoreError};
use workflow_postgres::testing::{self as pg_testing, Schema};
use workflow_postgres::PgStore;

use super::{create, wall_clock};

/// The checksums of `sql/functions/` at revision `PgStore::FUNCTIONS_REVISION`: a change
/// of a file fails here until the revision is raised (and these are the new files').
const REVISION_FILES: (u32, &[(&str, i64)]) = (
    3,
    &[
        ("workflow_epoch", -410125944881296319),
        ("workflow_next_token", -6396684635617779057),
        ("workflow_next_id", -173634557529558917),
        ("workflow_keyed_crc", -7079766244109822052),
        ("workflow_create", -6115547653405591731),
        ("workflow_create_many", 4904573504500842365),
        ("workflow_submit", 1923068452474088257),
        ("workflow_commit", 7152667765952950182),
        ("workflow_commit_group", 7791752268390478304),
        ("workflow_renew", -2816748065241208505),
    ],
);

#[test]
fn each_function_is_one_file_and_no_migration_restates_one() {
    for (name, sql) in pg_testing::functions() {
        let definitions = sql.matches("CREATE OR REPLACE FUNCTION ").count();
        assert_eq!(definitions, 1, "{name}.sql defines {definitions} functions");
        assert!(
            sql.contains(&format!("CREATE OR REPLACE FUNCTION {name}(")),
            "{name}.sql does not define {name}"
        );
    }
    for (version, migration) in pg_testing::migrations().iter().enumerate() {
        let restated = migration
            .lines()
            .filter(|line| !line.trim_start().starts_with("--"))
            .map(str::to_uppercase)
            .any(|line| {
                [
                    "CREATE FUNCTION",
                    "REPLACE FUNCTION",
                    "DROP FUNCTION",
                    "ALTER FUNCTION",
                ]
                .iter()
                .any(|statement| line.contains(statement))
            });
        assert!(
            !restated,
            "the migration to version {} restates a function",
            version + 1
        );
    }
}

#[test]
fn the_files_are_those_of_this_revision() {
    let (revision, files) = REVISION_FILES;
    assert_eq!(
        revision,
        PgStore::FUNCTIONS_REVISION,
        "the functions' revision changed: record its files' checksums here"
    );
    let now: Vec<(&str, i64)> = pg_testing::functions()
        .iter()
        .map(|(name, sql)| (*name, pg_testing::function_checksum(sql)))
        .collect();
    assert_eq!(
        now, files,
        "a file of sql/functions/ changed: raise functions::REVISION so older workers refuse it"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_function_whose_checksum_differs_is_applied_again() {
    let Some(url) = pg_testing::server("a_function_whose_checksum_differs_is_applied_again").await
    else {
        return;
    };
    let schema = Schema::new(&url, "functions");
    let store = schema.store().await;
    let run = create(&store, None).await.id();
    drop(store);
    // A function gone while its checksum stays recorded is not looked at again: the
    // checksum, not the catalog, says what to apply.
    schema
        .execute(
            "DROP FUNCTION workflow_submit(bigint, text, text, bigint, text, bigint, bigint[])",
        )
        .await
        .expect("drop workflow_submit");
    let store = schema.store().await;
    let cancel = Message::Cancel { by: "ops".into() };
    let missing = store.submit(run, &cancel, None, wall_clock()).await;
    assert!(missing.is_err(), "{missing:?}");
    drop(store);
    // A checksum that differs: the file is applied again and its checksum recorded.
    schema
        .execute("UPDATE workflow_functions SET checksum = 0 WHERE name = 'workflow_submit'")
        .await
        .unwrap();
    let store = schema.store().await;
    store
        .submit(run, &cancel, None, wall_clock())
        .await
        .expect("workflow_submit is back");
    let sum = pg_testing::functions()
        .iter()
        .find(|(name, _)| *name == "workflow_submit")
        .map(|(_, sql)| pg_testing::function_checksum(sql))
        .unwrap();
    schema
        .execute(&format!(
            "DO $$ BEGIN
                IF (SELECT checksum FROM workflow_functions WHERE name = 'workflow_submit') <> {sum}
                   OR (SELECT count(*) FROM workflow_functions) <> {}
                   OR (SELECT functions FROM workflow_schema) <> {} THEN
                    RAISE EXCEPTION 'the checksums are not the files''';
                END IF;
             END $$;",
            pg_testing::functions().len(),
            PgStore::FUNCTIONS_REVISION
        ))
        .await
        .expect("every function's checksum is its file's");
    drop(store);
    schema.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn newer_functions_are_refused_and_left_untouched() {
    let Some(url) = pg_testing::server("newer_functions_are_refused_and_left_untouched").await
    else {
        return;
    };
    let schema = Schema::new(&url, "newer_functions");
    let store = schema.store().await;
    let run = create(&store, None).await.id();
    drop(store);
    let newer = PgStore::FUNCTIONS_REVISION + 1;
    schema
        .execute(&format!(
            "UPDATE workflow_schema SET functions = {newer};
             UPDATE workflow_functions SET checksum = 0 WHERE name = 'workflow_commit'"
        ))
        .await
        .unwrap();
    let refused = PgStore::connect(&schema.url()).await;
    match &refused {
        Err(
            error @ StoreError::NewerFunctions {
                found,
                supported,
                path,
            },
        ) => {
            assert_eq!((*found, *supported), (newer, PgStore::FUNCTIONS_REVISION));
            assert!(path.contains(schema.name()), "{path}");
            let message = error.to_string();
            assert!(
                message.contains("stored functions") && message.contains("upgrade this worker"),
                "{message}"
            );
        }
        other => panic!("a newer revision of the functions is refused: {other:?}"),
    }
    // Untouched: nothing was applied. (Put the revision back to read.)
    schema
        .execute(&format!(
            "DO $$ BEGIN
                IF (SELECT checksum FROM workflow_functions WHERE name = 'workflow_commit') <> 0
                   OR (SELECT functions FROM workflow_schema) <> {newer} THEN
                    RAISE EXCEPTION 'the refused schema changed';
                END IF;
             END $$;
             UPDATE workflow_schema SET functions = {}",
            PgStore::FUNCTIONS_REVISION
        ))
        .await
        .expect("the refused schema is as it was");
    let store = schema.store().await;
    assert!(store.load(run).await.unwrap().is_some());
    drop(store);
    schema.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_earlier_schema_migrates_to_this_one() {
    let Some(url) = pg_testing::server("every_earlier_schema_migrates_to_this_one").await else {
        return;
    };
    for version in 1..PgStore::SCHEMA_VERSION {
        let schema = Schema::new(&url, &format!("from_v{version}"));
        schema.create_at_version(version).await;
        let store = schema.store().await;
        let run = create(&store, Some("k")).await.id();
        let cancel = Message::Cancel { by: "ops".into() };
        store
            .submit(run, &cancel, None, wall_clock())
            .await
            .unwrap_or_else(|e| panic!("from version {version}: {e}"));
        assert!(store.load(run).await.unwrap().is_some());
        drop(store);
        schema
            .execute(&format!(
                "DO $$ BEGIN
                    IF (SELECT version FROM workflow_schema) <> {}
                       OR (SELECT functions FROM workflow_schema) <> {}
                       OR (SELECT count(*) FROM workflow_functions) <> {} THEN
                        RAISE EXCEPTION 'not migrated';
                    END IF;
                 END $$;",
                PgStore::SCHEMA_VERSION,
                PgStore::FUNCTIONS_REVISION,
                pg_testing::functions().len()
            ))
            .await
            .unwrap_or_else(|e| panic!("from version {version}: {e}"));
        schema.drop().await;
    }
}
