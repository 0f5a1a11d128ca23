//! The boxed future every layer returns from its trait methods.

use std::future::Future;
use std::pin::Pin;

/// A boxed future, as the generated dispatch and the [`Store`](crate::store::Store) trait
/// return them.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;
