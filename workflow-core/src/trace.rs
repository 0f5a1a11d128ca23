//! A run's trace: the W3C / OpenTelemetry trace id journaled when the run starts, and the
//! span its spans hang under.
//!
//! A run is started with a trace id of 32 lowercase hex digits: the caller's, from a W3C
//! `traceparent` ([`TraceParent`], e.g. a webhook's or an API call's header), its parent
//! run's for a child run, or a new one. `RunStarted` journals it with the span the run's
//! spans are children of (the caller's span, or the parent run's step span), so every
//! process that drives the run, after a restart or a takeover by another worker, continues
//! the same trace. A run that starts its own trace hangs under a root span id derived from
//! its trace id ([`root_span_id`]); no process emits that span, as no process lives as
//! long as the run.
//!
//! With the `otel` feature, the engine sets this context as the OpenTelemetry parent of
//! every `run` span (through `tracing-opentelemetry`), and a child run is started as a
//! child of its parent's step span.
//!
//! Journals of older versions hold 16 hex digits: they read as the 32-digit id with 16
//! leading zeros ([`otel_trace_id`]).

/// A W3C trace context to continue: a trace id and the span (of another process, or of a
/// parent run's step) that a run's spans are children of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceParent {
    /// 32 lowercase hex digits, not all zeros.
    pub trace_id: String,
    /// 16 lowercase hex digits, not all zeros.
    pub span_id: String,
}

impl TraceParent {
    /// Reads a W3C `traceparent` header value (`00-<trace id>-<parent id>-<flags>`);
    /// `None` when it is not a valid one (a wrong length or version, upper-case or
    /// non-hex digits, an all-zero id), which a caller ignores: the run then starts a
    /// trace of its own. A later version's value is read by its first four fields, as the
    /// recommendation says.
    pub fn parse(header: &str) -> Option<TraceParent> {
        let header = header.trim();
        let mut fields = header.split('-');
        let version = fields.next()?;
        let trace_id = fields.next()?;
        let span_id = fields.next()?;
        let flags = fields.next()?;
        let rest = fields.next();
        if !hex_digits(version, 2) || version == "ff" || !hex_digits(flags, 2) {
            return None;
        }
        if version == "00" && rest.is_some() {
            return None;
        }
        if !hex_id(trace_id, 32) || !hex_id(span_id, 16) {
            return None;
        }
        Some(TraceParent {
            trace_id: trace_id.to_owned(),
            span_id: span_id.to_owned(),
        })
    }

    /// The `traceparent` header value that continues this context (sampled).
    pub fn header(&self) -> String {
        format!("00-{}-{}-01", self.trace_id, self.span_id)
    }
}

/// `value` is `len` lowercase hex digits.
fn hex_digits(value: &str, len: usize) -> bool {
    value.len() == len
        && value
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// `value` is `len` lowercase hex digits, not all zeros.
fn hex_id(value: &str, len: usize) -> bool {
    hex_digits(value, len) && value.bytes().any(|b| b != b'0')
}

/// SplitMix64's finaliser: spreads a seed over all 64 bits.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A new trace id for a run with jitter seed `seed`: 32 lowercase hex digits, the seed in
/// the low half (the whole id of older versions), never all zeros.
pub(crate) fn generate(seed: u64) -> String {
    let high = mix(seed) | 1;
    format!("{high:016x}{seed:016x}")
}

/// The OpenTelemetry trace id of a journaled one, as 16 bytes: 32 hex digits as they are,
/// the 16 digits older versions journaled with 16 leading zeros; `None` for anything else
/// (a run with such an id starts a new trace in each process).
pub fn trace_id_bytes(journaled: &str) -> Option<[u8; 16]> {
    let padded;
    let digits = match journaled.len() {
        32 => journaled,
        16 => {
            padded = format!("{:0>32}", journaled);
            &padded
        }
        _ => return None,
    };
    let value = u128::from_str_radix(digits, 16).ok()?;
    if !digits.bytes().all(|b| b.is_ascii_hexdigit()) || value == 0 {
        return None;
    }
    Some(value.to_be_bytes())
}

/// The 32-digit OpenTelemetry form of a journaled trace id (see [`trace_id_bytes`]).
pub fn otel_trace_id(journaled: &str) -> Option<String> {
    trace_id_bytes(journaled).map(|bytes| format!("{:032x}", u128::from_be_bytes(bytes)))
}

/// The span id a run that starts its own trace hangs under: the two halves of its trace
/// id folded together (an old 16-digit id is its own root span id), never zero.
pub fn root_span_id(trace: [u8; 16]) -> [u8; 8] {
    let value = u128::from_be_bytes(trace);
    let folded = (value >> 64) as u64 ^ value as u64;
    (if folded == 0 { 1 } else { folded }).to_be_bytes()
}

/// The trace id and parent span id, as bytes, that a run's spans continue: the journaled
/// parent span, or the derived root. `None` when the journaled trace id is not one.
pub fn span_parent(trace_id: &str, parent_span: Option<&str>) -> Option<([u8; 16], [u8; 8])> {
    let trace = trace_id_bytes(trace_id)?;
    let span = parent_span
        .filter(|span| hex_id(span, 16))
        .and_then(|span| u64::from_str_radix(span, 16).ok())
        .map(u64::to_be_bytes)
        .unwrap_or_else(|| root_span_id(trace));
    Some((trace, span))
}

/// The context a child run continues: its parent's trace, under the span current now (the
/// parent's step span, when spans are exported to OpenTelemetry) or else the span the
/// parent's own spans hang under.
pub(crate) fn child_of(trace_id: &str, parent_span: Option<&str>) -> Option<TraceParent> {
    let (trace, root) = span_parent(trace_id, parent_span)?;
    let span = otel::current_span_id().unwrap_or(root);
    Some(TraceParent {
        trace_id: format!("{:032x}", u128::from_be_bytes(trace)),
        span_id: format!("{:016x}", u64::from_be_bytes(span)),
    })
}

/// Makes `span` (a run's span) a child of the run's trace context in OpenTelemetry.
pub(crate) fn continue_in(span: &tracing::Span, trace_id: &str, parent_span: Option<&str>) {
    if let Some((trace, parent)) = span_parent(trace_id, parent_span) {
        otel::set_parent(span, trace, parent);
    }
}

#[cfg(feature = "otel")]
mod otel {
    use opentelemetry::trace::{
        SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState,
    };
    use tracing_opentelemetry::OpenTelemetrySpanExt;

    pub(super) fn set_parent(span: &tracing::Span, trace: [u8; 16], parent: [u8; 8]) {
        let context = SpanContext::new(
            TraceId::from_bytes(trace),
            SpanId::from_bytes(parent),
            TraceFlags::SAMPLED,
            true,
            TraceState::default(),
        );
        let _ = span.set_parent(opentelemetry::Context::new().with_remote_span_context(context));
    }

    pub(super) fn current_span_id() -> Option<[u8; 8]> {
        let context = tracing::Span::current().context();
        let span = context.span();
        let span_context = span.span_context();
        span_context
            .is_valid()
            .then(|| span_context.span_id().to_bytes())
    }
}

#[cfg(not(feature = "otel"))]
mod otel {
    pub(super) fn set_parent(_: &tracing::Span, _: [u8; 16], _: [u8; 8]) {}

    pub(super) fn current_span_id() -> Option<[u8; 8]> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_valid_traceparent_is_read_and_written_back() {
        let header = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let parent = TraceParent::parse(header).expect("valid");
        assert_eq!(parent.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(parent.span_id, "00f067aa0ba902b7");
        assert_eq!(parent.header(), header);
        // A later version: its first four fields.
        let later = "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-09-what-comes";
        assert_eq!(TraceParent::parse(later), Some(parent));
    }

    #[test]
    fn an_invalid_traceparent_is_none() {
        for header in [
            "",
            "00",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e47zz-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",
        ] {
            assert_eq!(TraceParent::parse(header), None, "{header}");
        }
    }

    #[test]
    fn generated_ids_are_32_hex_digits_with_the_seed_in_the_low_half() {
        for seed in [0, 1, 0xdead_beef, u64::MAX] {
            let id = generate(seed);
            assert_eq!(id.len(), 32);
            assert!(hex_id(&id, 32), "{id}");
            assert_eq!(&id[16..], format!("{seed:016x}"));
            assert_eq!(otel_trace_id(&id).as_deref(), Some(id.as_str()));
        }
        assert_ne!(generate(1), generate(2));
    }

    #[test]
    fn old_16_digit_ids_are_padded_and_others_are_not_trace_ids() {
        assert_eq!(
            otel_trace_id("00000000deadbeef").as_deref(),
            Some("000000000000000000000000deadbeef")
        );
        let old = trace_id_bytes("a3ce929d0e0e4736").unwrap();
        assert_eq!(root_span_id(old), 0xa3ce_929d_0e0e_4736u64.to_be_bytes());
        for other in [
            "",
            "t",
            "trace-1",
            "0000000000000000",
            "not hex at all 0123456789abcdef",
        ] {
            assert_eq!(otel_trace_id(other), None, "{other}");
        }
    }

    #[test]
    fn a_run_hangs_under_its_journaled_parent_or_its_derived_root() {
        let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
        let (bytes, span) = span_parent(trace, Some("00f067aa0ba902b7")).unwrap();
        assert_eq!(bytes, trace_id_bytes(trace).unwrap());
        assert_eq!(span, 0x00f0_67aa_0ba9_02b7u64.to_be_bytes());
        let (_, root) = span_parent(trace, None).unwrap();
        assert_eq!(root, root_span_id(bytes));
        assert_ne!(root, [0; 8]);
        // A journaled parent that is not a span id falls back to the root.
        assert_eq!(span_parent(trace, Some("nope")).unwrap().1, root);
        // Without OpenTelemetry spans, a child hangs under its parent's root.
        let child = child_of(trace, None).unwrap();
        assert_eq!(child.trace_id, trace);
        assert_eq!(child.span_id, format!("{:016x}", u64::from_be_bytes(root)));
    }
}
