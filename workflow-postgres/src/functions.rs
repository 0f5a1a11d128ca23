//! The stored functions: each is one file of `sql/functions/`, its current definition
//! (`CREATE OR REPLACE FUNCTION`). Tables keep their versioned migrations
//! ([`super::schema::MIGRATIONS`]); a function is never restated by a migration. After the
//! migrations, in their transaction, each function whose checksum differs from the one
//! the schema recorded (`workflow_functions`) is applied again, every older form of it
//! (another signature) dropped first, and its checksum recorded.
//!
//! The set has a revision ([`REVISION`]), recorded in `workflow_schema.functions`. A
//! worker whose revision is older than the schema's refuses it
//! ([`StoreError::NewerFunctions`]) and changes nothing: it would call functions whose
//! meaning it does not know.

use sqlx::{Executor, PgConnection, Row};

use super::error::Target;
use super::schema::quote;
use workflow_core::store::StoreError;

/// Every stored function, by name, in the order they are applied.
pub(super) const FUNCTIONS: &[(&str, &str)] = &[
    (
        "workflow_epoch",
        include_str!("../sql/functions/workflow_epoch.sql"),
    ),
    (
        "workflow_next_token",
        include_str!("../sql/functions/workflow_next_token.sql"),
    ),
    (
        "workflow_next_id",
        include_str!("../sql/functions/workflow_next_id.sql"),
    ),
    (
        "workflow_keyed_crc",
        include_str!("../sql/functions/workflow_keyed_crc.sql"),
    ),
    (
        "workflow_create",
        include_str!("../sql/functions/workflow_create.sql"),
    ),
    (
        "workflow_create_many",
        include_str!("../sql/functions/workflow_create_many.sql"),
    ),
    (
        "workflow_submit",
        include_str!("../sql/functions/workflow_submit.sql"),
    ),
    (
        "workflow_commit",
        include_str!("../sql/functions/workflow_commit.sql"),
    ),
    (
        "workflow_commit_group",
        include_str!("../sql/functions/workflow_commit_group.sql"),
    ),
    (
        "workflow_renew",
        include_str!("../sql/functions/workflow_renew.sql"),
    ),
];

/// The revision of the functions this library defines: raised with every change of a
/// file in `sql/functions/` (a test holds the files' checksums of this revision).
pub(super) const REVISION: u32 = 3;

/// The checksum a function is recorded with: FNV-1a (64 bits) of its file, as a bigint.
pub(super) fn checksum(sql: &str) -> i64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in sql.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash as i64
}

/// Inside the migration's transaction, after the tables' migrations: refuses a newer
/// revision, then applies every function whose recorded checksum differs.
pub(super) async fn apply(
    conn: &mut PgConnection,
    schema: &str,
    target: &Target,
) -> Result<(), StoreError> {
    let fail = |e: sqlx::Error| target.error(e);
    let quoted = quote(schema);
    let revision: i32 = sqlx::query(&format!("SELECT functions FROM {quoted}.workflow_schema"))
        .fetch_one(&mut *conn)
        .await
        .and_then(|row| row.try_get(0))
        .map_err(fail)?;
    let revision = u32::try_from(revision).unwrap_or(0);
    if revision > REVISION {
        return Err(StoreError::NewerFunctions {
            path: target.shown_with_schema(schema),
            found: revision,
            supported: REVISION,
        });
    }
    let recorded: Vec<(String, i64)> = sqlx::query(&format!(
        "SELECT name, checksum FROM {quoted}.workflow_functions"
    ))
    .fetch_all(&mut *conn)
    .await
    .map_err(fail)?
    .iter()
    .map(|row| Ok((row.try_get(0)?, row.try_get(1)?)))
    .collect::<Result<_, sqlx::Error>>()
    .map_err(fail)?;
    for (name, sql) in FUNCTIONS {
        let sum = checksum(sql);
        if recorded.iter().any(|(n, s)| n == name && *s == sum) {
            continue;
        }
        tracing::info!(target = %target, schema, function = name, "applying a stored function");
        // Older forms of the function (another signature) go first: `CREATE OR REPLACE`
        // replaces a function of the same signature only.
        let drop_older = format!(
            "DO $drop$ DECLARE f regprocedure; BEGIN
                 FOR f IN SELECT p.oid::regprocedure FROM pg_proc p
                          WHERE p.pronamespace = '{quoted}'::regnamespace
                            AND p.proname = '{name}'
                 LOOP EXECUTE 'DROP FUNCTION ' || f::text; END LOOP;
             END $drop$;"
        );
        conn.execute(format!("SET LOCAL search_path TO {quoted};\n{drop_older}\n{sql}").as_str())
            .await
            .map_err(fail)?;
        sqlx::query(&format!(
            "INSERT INTO {quoted}.workflow_functions (name, checksum) VALUES ($1, $2)
             ON CONFLICT (name) DO UPDATE SET checksum = EXCLUDED.checksum"
        ))
        .bind(*name)
        .bind(sum)
        .execute(&mut *conn)
        .await
        .map_err(fail)?;
    }
    if revision != REVISION {
        sqlx::query(&format!(
            "UPDATE {quoted}.workflow_schema SET functions = $1"
        ))
        .bind(REVISION as i32)
        .execute(&mut *conn)
        .await
        .map_err(fail)?;
    }
    Ok(())
}
