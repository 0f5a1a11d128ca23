//! Runnable examples.
