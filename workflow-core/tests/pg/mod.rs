//! PostgreSQL-specific tests.
