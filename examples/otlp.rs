//! Operating it: traces exported over OTLP, metrics served on `/metrics`.
//!
//! ```text
//! cargo run -p examples --example otlp --features otlp                # serves 127.0.0.1:8080
//! OTEL_EXPORTER_OTLP_ENDPOINT=http://collector:4318 cargo run -p examples --example otlp --features otlp
//! ```
//!
//! The engine is built with the `workflow` facade's `otel` feature, so each run's spans continue
//! the trace journaled when it started (across restarts and workers). `tracing` spans go
//! to `tracing-opentelemetry`, and from there, in batches, to an OpenTelemetry collector
//! (Jaeger, Tempo, the OpenTelemetry Collector...) over OTLP/HTTP with protobuf bodies, by
//! default at `http://localhost:4318/v1/traces` (`OTEL_EXPORTER_OTLP_ENDPOINT` changes it).
//! Metrics are rendered in Prometheus' text format on the server's `/metrics`, for
//! Prometheus to scrape and `ops/grafana/workflow.json` to show.
//!
//! It starts one run through the API with a W3C `traceparent` header, as a caller that
//! traces its own requests would, prints its trace id (look it up in the tracing UI) and
//! the `curl` lines for the metrics and the run, and serves until Ctrl-C.

use std::error::Error;
use std::net::SocketAddr;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::SdkTracerProvider;
use opentelemetry_sdk::Resource;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use workflow::prelude::*;
use workflow::server::{metrics, Roles, Server, TrustedHeader};
use workflow::trace::TraceParent;

#[derive(Default)]
pub struct Shop;

async fn reserve(order: String) -> Result<String, StepError> {
    tracing::info!("reserving the stock");
    Ok(format!("reservation for {order}"))
}

async fn charge(order: String) -> Result<u64, StepError> {
    tracing::info!("charging the card");
    Ok(order.len() as u64 * 100)
}

workflow! {
    /// An order: the stock reserved, the card charged.
    pub workflow Checkout(order: String) env Shop {
        step reserve -> String { action: reserve(order) }
        step charge -> u64 { action: charge(order), depends_on: [reserve] }
    }
}

const OPERATOR: &str = "ops@example";

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let listen: SocketAddr = match std::env::args().nth(1) {
        Some(addr) => addr.parse()?,
        None => "127.0.0.1:8080".parse()?,
    };

    // Traces: OTLP over HTTP (protobuf), batched on the SDK's own thread.
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .build()?;
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(Resource::builder().with_service_name("checkout").build())
        .build();
    tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("workflows")))
        .init();

    // Metrics: the Prometheus recorder, rendered by the server's `/metrics`.
    let handle = metrics::install_recorder()?;

    let db = std::env::temp_dir().join("otlp_example.db");
    let engine = Engine::builder().store(SqliteStore::open(&db)?).build();
    engine.register::<Checkout>(Shop)?;
    engine.resume_all().await?;

    // A caller's trace context, as its `traceparent` header would carry it.
    let caller = TraceParent::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
        .ok_or("a valid traceparent")?;
    let options = StartOptions {
        traceparent: Some(caller),
        ..StartOptions::default()
    };
    let run = engine
        .start_with::<Checkout>(
            CheckoutInput {
                order: "o-42".into(),
            },
            options,
        )
        .await?;
    let outputs = run.outputs().await?;
    println!("{} charged {} cents", run.id(), outputs.charge);

    let roles = Roles::parse(&format!("{OPERATOR} operator:*"))?;
    let router = Server::new(engine.clone())
        .authenticator(TrustedHeader::new())
        .permissions(roles)
        .metrics(handle)
        .router();
    let listener = tokio::net::TcpListener::bind(listen).await?;
    let addr = listener.local_addr()?;
    let id = run.id();
    println!("Trace 4bf92f3577b34da6a3ce929d0e0e4736: the run's spans, in the tracing UI.");
    println!("Metrics: curl -H 'X-Forwarded-User: {OPERATOR}' http://{addr}/metrics");
    println!("The run: curl -H 'X-Forwarded-User: {OPERATOR}' http://{addr}/api/runs/{id}");
    println!("A run in a trace of yours:");
    println!(
        "  curl -H 'X-Forwarded-User: {OPERATOR}' -H 'Content-Type: application/json' \\\n    \
         -H 'traceparent: 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' \\\n    \
         -d '{{\"workflow\": \"Checkout\", \"input\": {{\"order\": \"o-43\"}}}}' http://{addr}/api/runs"
    );
    axum::serve(listener, router)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    // Sends the spans still batched.
    provider.shutdown()?;
    Ok(())
}
