//! Shared helpers of the test suite.

pub mod chaos;
pub mod cluster;
pub mod failover;
pub mod fence;
pub mod queue;
pub mod service;
pub mod stress;
pub mod workers;
