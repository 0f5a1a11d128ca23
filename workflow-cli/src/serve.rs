//! `workflow serve`: `workflow-server`'s API, console and inbox over a store, with an intake-only
//! engine that registers no workflow. It reads runs, tasks and dead letters from the store
//! and leaves decisions and cancellations in the runs' inboxes for the engines that drive
//! them; `POST /api/runs` queues runs for the workers (on the newest version of the
//! workflow a worker recorded, its inputs checked by name only). Webhook intake needs the
//! workflows' code, so it lives in the user's binary.

use std::path::Path;
use std::sync::Arc;

use workflow_core::store::Store;
use workflow_core::Engine;
use workflow_server::{Roles, Server, TokenFile, TrustedHeader};

use crate::cli::ServeArgs;
use crate::error::{CliError, Result};

fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path)
        .map_err(|error| CliError::new(format!("cannot read {}: {error}", path.display())))
}

/// Serves until the process is stopped.
pub async fn run(store: Box<dyn Store>, args: &ServeArgs) -> Result<String> {
    let engine = Engine::builder()
        .shared_store(Arc::from(store))
        .intake_only()
        .build();
    let mut server = Server::new(engine)
        .show_payloads(args.show_payloads)
        .base_path(&args.base_path);
    let mut roles = match &args.roles {
        Some(path) => Roles::parse(&read(path)?)
            .map_err(|error| CliError::new(format!("{}: {error}", path.display())))?,
        None => Roles::new(),
    };
    let who = match &args.tokens {
        Some(path) => {
            let file = TokenFile::parse(&read(path)?)
                .map_err(|error| CliError::new(format!("{}: {error}", path.display())))?;
            server = server.authenticator(file.tokens);
            roles = roles.merge(file.roles);
            format!("bearer tokens from {}", path.display())
        }
        None => {
            let bad = |name: &str, error: &dyn std::fmt::Display| {
                CliError::new(format!("`{name}` is not a header name: {error}"))
            };
            let mut header = TrustedHeader::named(&args.trusted_header)
                .map_err(|error| bad(&args.trusted_header, &error))?;
            if let Some(groups) = &args.groups_header {
                header = header
                    .groups_header(groups)
                    .map_err(|error| bad(groups, &error))?;
            }
            if args.trusted_proxy.is_empty() {
                if !args.listen.ip().is_loopback() {
                    return Err(CliError::new(format!(
                        "refusing to listen on {} with the trusted header {}: anyone who                          reaches that address could name themselves in it. Listen on                          loopback behind the proxy that sets it, name the proxy with                          --trusted-proxy IP, or sign people in with --tokens FILE",
                        args.listen, args.trusted_header
                    )));
                }
            } else {
                header = header.trusted_proxies(args.trusted_proxy.iter().copied());
            }
            server = server.authenticator(header);
            format!("the trusted header {}", args.trusted_header)
        }
    };
    for origin in &args.public_origin {
        server = server.allowed_origin(origin);
    }
    server = server.permissions(roles);
    if let Some(template) = &args.trace_url {
        if !template.contains("{trace_id}") {
            return Err(CliError::new(format!(
                "--trace-url `{template}` has no `{{trace_id}}` to put the trace id in"
            )));
        }
        server = server.trace_url(template);
    }
    if let Some(dir) = &args.evidence_dir {
        server = server.evidence_dir(dir);
    }
    if args.metrics {
        let handle = workflow_server::metrics::install_recorder()
            .map_err(|error| CliError::new(error.to_string()))?;
        server = server.metrics(handle);
    }
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|error| CliError::new(format!("cannot listen on {}: {error}", args.listen)))?;
    let address = listener
        .local_addr()
        .map_err(|error| CliError::new(error.to_string()))?;
    let base = args.base_path.trim_end_matches('/');
    let metrics = if args.metrics {
        format!(", metrics on http://{address}{base}/metrics")
    } else {
        String::new()
    };
    // One line: whoever reads it may close the pipe after it.
    eprintln!(
        "serving the API on http://{address}{base}/api/runs, the console on \
         http://{address}{base}/console and the inbox on http://{address}{base}/inbox \
         (people signed in by {who}){metrics}"
    );
    // SIGTERM or Ctrl-C: readiness says `draining`, then the requests in flight finish.
    server
        .serve_until(
            listener,
            workflow_server::shutdown_signal(),
            std::time::Duration::from_secs(30),
        )
        .await
        .map_err(|error| CliError::new(format!("the server stopped: {error}")))?;
    Ok(String::new())
}
