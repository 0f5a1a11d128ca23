//! Shared helpers of the test suite.

pub mod chaos;
