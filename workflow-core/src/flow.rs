//! Flow control values: what a run's `concurrency`, `priority` and `debounce` keys, and a
//! step's `concurrency` and `rate` keys, evaluate to.
//!
//! The keys themselves are declared in the spec ([`workflow_spec::flow`]); the generated
//! [`Workflow::admission`](crate::Workflow::admission) and
//! [`Workflow::step_keys`](crate::Workflow::step_keys) read their values from a run's
//! input (and a step's upstream outputs). Key values are text, converted with
//! [`SearchValue`](crate::SearchValue), so a key may be of any searchable type.

/// The values of a run's admission keys, read from its input when it starts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Admission {
    /// The workflow-level concurrency key's value (the literal, for a static key);
    /// `None` without `concurrency` or when the path's value is absent (`Option` field):
    /// such a run is not limited.
    pub concurrency: Option<String>,
    /// `priority:`'s value; 0 without it.
    pub priority: i64,
    /// The debounce key's value; `None` without `debounce` or when absent.
    pub debounce: Option<String>,
}

/// The values of a step's `concurrency` and `rate` keys for one run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StepKeys {
    /// The step's concurrency key's value; `None` without `concurrency` or when absent.
    pub concurrency: Option<String>,
    /// The step's rate key's value; `None` without `rate` or when absent.
    pub rate: Option<String>,
}

/// An integer a `priority:` path may read: implemented for i8..i64, u8..u32 (and
/// `Option` of them: absent is 0).
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a priority",
    label = "read by `priority`, but `{Self}` is not an integer that fits in an `i64`",
    note = "a priority is an `i8`, `i16`, `i32`, `i64`, `u8`, `u16`, `u32` or an `Option` of one (absent is 0); implement `workflow_core::flow::PriorityValue` for a type of your own"
)]
pub trait PriorityValue {
    /// The priority: higher starts first.
    fn priority_value(&self) -> i64;
}

macro_rules! priority_values {
    ($($ty:ty),*) => {$(
        impl PriorityValue for $ty {
            fn priority_value(&self) -> i64 {
                i64::from(*self)
            }
        }
    )*};
}

priority_values!(i8, i16, i32, i64, u8, u16, u32);

impl<T: PriorityValue> PriorityValue for Option<T> {
    fn priority_value(&self) -> i64 {
        self.as_ref().map_or(0, PriorityValue::priority_value)
    }
}

impl<T: PriorityValue + ?Sized> PriorityValue for &T {
    fn priority_value(&self) -> i64 {
        (**self).priority_value()
    }
}

#[cfg(test)]
mod tests {
    use super::PriorityValue;

    #[test]
    fn integers_and_options_are_priorities() {
        assert_eq!(7u8.priority_value(), 7);
        assert_eq!((-3i32).priority_value(), -3);
        assert_eq!(u32::MAX.priority_value(), i64::from(u32::MAX));
        assert_eq!(Some(5i64).priority_value(), 5);
        assert_eq!(None::<i16>.priority_value(), 0);
        let tier = 9u16;
        let by_reference: &dyn Fn(&&u16) -> i64 = &|value| value.priority_value();
        assert_eq!(by_reference(&&tier), 9);
    }
}
