//! ringbench httpd — the hyper peer of the HTTP section (bench/http_bench.py): a
//! static-file server as a hyper 1.x user writes one, on tokio's
//! current-thread runtime (one worker, as weft's `httpd -v 1`, nginx's one
//! worker process and Go's GOMAXPROCS=1 have one), or with --workers K > 1
//! on the multi-thread runtime with K workers (the scaling section).
//!
//!     ringbench httpd --root DIR [--port P] [--workers K]
//!                                           (P = 0: any free port; default 8080)
//!
//! Listens on 127.0.0.1 and prints `listening on 127.0.0.1:<port>` once it
//! accepts. GET and HEAD only (405 otherwise). The request path is mapped
//! under DIR ("/" and a trailing "/" mean index.html; a ".." or "." segment or
//! a backslash is refused with 404); the file is opened and read on every
//! request (std::fs::read: a small file in the page cache, no blocking pool),
//! as nginx, Go's http.FileServer and weft's httpd open theirs per request.
//! The response carries Content-Type (from the extension) and
//! Content-Length. HTTP/1.1 keep-alive is on; a request with
//! `Connection: close` gets a response with `connection: close` and the
//! connection is closed after it (hyper does both). TCP_NODELAY is set on
//! every accepted socket (nginx's tcp_nodelay, Go's default).

use std::convert::Infallible;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{HeaderValue, ALLOW, CONTENT_LENGTH, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;

const USAGE: &str = "usage: ringbench httpd --root DIR [--port P] [--workers K]";

fn bad_usage(what: &str) -> ! {
    eprintln!("ringbench httpd: {what}\n{USAGE}");
    std::process::exit(2);
}

fn content_type(path: &Path) -> &'static str {
    match path
        .extension()
        .and_then(|e| e.to_str())
        .map(|e| e.to_ascii_lowercase())
        .as_deref()
    {
        Some("html") | Some("htm") => "text/html; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("js") => "text/javascript; charset=utf-8",
        Some("json") => "application/json",
        Some("txt") => "text/plain; charset=utf-8",
        Some("png") => "image/png",
        Some("jpg") | Some("jpeg") => "image/jpeg",
        Some("svg") => "image/svg+xml",
        _ => "application/octet-stream",
    }
}

/// The file under root that a request path names, or None (404).
fn resolve(root: &Path, uri_path: &str) -> Option<PathBuf> {
    let mut p = root.to_path_buf();
    for seg in uri_path.split('/').filter(|s| !s.is_empty()) {
        if seg == "." || seg == ".." || seg.contains('\\') || seg.contains('%') {
            return None;
        }
        p.push(seg);
    }
    if uri_path.ends_with('/') {
        p.push("index.html");
    }
    Some(p)
}

fn plain(status: StatusCode) -> Response<Full<Bytes>> {
    let body = format!(
        "{} {}\n",
        status.as_u16(),
        status.canonical_reason().unwrap_or("")
    );
    let mut r = Response::new(Full::new(Bytes::from(body.clone())));
    *r.status_mut() = status;
    r.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r.headers_mut()
        .insert(CONTENT_LENGTH, HeaderValue::from(body.len()));
    r
}

async fn serve(
    root: Arc<PathBuf>,
    req: Request<hyper::body::Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let head = req.method() == Method::HEAD;
    if req.method() != Method::GET && !head {
        let mut r = plain(StatusCode::METHOD_NOT_ALLOWED);
        r.headers_mut()
            .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        return Ok(r);
    }
    let Some(path) = resolve(&root, req.uri().path()) else {
        return Ok(plain(StatusCode::NOT_FOUND));
    };
    let data = match std::fs::read(&path) {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(plain(StatusCode::NOT_FOUND))
        }
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            return Ok(plain(StatusCode::FORBIDDEN))
        }
        Err(_) => return Ok(plain(StatusCode::NOT_FOUND)), // a directory, ...
    };
    let len = data.len();
    let mut r = Response::new(Full::new(if head {
        Bytes::new()
    } else {
        Bytes::from(data)
    }));
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type(&path)));
    r.headers_mut()
        .insert(CONTENT_LENGTH, HeaderValue::from(len));
    Ok(r)
}

/// The `httpd` subcommand: args are what follows it.
pub fn main(args: Vec<String>) {
    let mut root: Option<PathBuf> = None;
    let mut port: u16 = 8080;
    let mut workers: usize = 1;
    let mut args = args.into_iter();
    while let Some(a) = args.next() {
        match a.as_str() {
            "--root" => {
                root = Some(
                    args.next()
                        .unwrap_or_else(|| bad_usage("--root needs a value"))
                        .into(),
                )
            }
            "--port" => {
                let v = args
                    .next()
                    .unwrap_or_else(|| bad_usage("--port needs a value"));
                port = v
                    .parse()
                    .unwrap_or_else(|_| bad_usage(&format!("bad --port {v:?}")));
            }
            "--workers" => {
                let v = args
                    .next()
                    .unwrap_or_else(|| bad_usage("--workers needs a value"));
                workers = match v.parse() {
                    Ok(k) if k >= 1 => k,
                    _ => bad_usage(&format!("bad --workers {v:?} (a count >= 1)")),
                };
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                return;
            }
            other => bad_usage(&format!("unexpected argument {other:?}")),
        }
    }
    let root = root.unwrap_or_else(|| bad_usage("--root is required"));
    if !root.is_dir() {
        eprintln!("ringbench httpd: root {}: not a directory", root.display());
        std::process::exit(1);
    }
    let root = Arc::new(root);

    let std_listener = std::net::TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
        .unwrap_or_else(|e| {
            eprintln!("ringbench httpd: 127.0.0.1:{port}: {e}");
            std::process::exit(1);
        });
    std_listener.set_nonblocking(true).expect("set_nonblocking");
    let rt = if workers == 1 {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        b.worker_threads(workers);
        b
    }
    .enable_io()
    .build()
    .expect("tokio runtime");
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::from_std(std_listener).expect("tokio listener");
        let addr = listener.local_addr().expect("local_addr");
        println!("listening on 127.0.0.1:{}", addr.port());
        use std::io::Write;
        std::io::stdout().flush().ok();
        let mut builder = http1::Builder::new();
        builder.keep_alive(true);
        let builder = Arc::new(builder);
        loop {
            let (stream, _) = match listener.accept().await {
                Ok(s) => s,
                Err(e) => {
                    // EMFILE and the like: connections that end give descriptors back.
                    eprintln!("ringbench httpd: accept: {e}");
                    std::thread::sleep(std::time::Duration::from_millis(10));
                    continue;
                }
            };
            let _ = stream.set_nodelay(true);
            let root = root.clone();
            let builder = builder.clone();
            tokio::spawn(async move {
                let svc = service_fn(move |req| serve(root.clone(), req));
                // An error here is the client's (reset, bad request): drop the connection.
                let _ = builder.serve_connection(TokioIo::new(stream), svc).await;
            });
        }
    });
}
