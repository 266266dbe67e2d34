//! Slow and idle clients cannot hold memproxy: a connection that does not finish its headers in
//! `server.header_timeout` (also an idle keep-alive one) is closed, a body that does not arrive in
//! `server.body_timeout` gets a 408, and past `server.max_connections_per_ip` a client address
//! gets no more connections, so another client's chat goes through while an attacker holds a
//! thousand. The victim's latency beside and without the attackers is printed (the figures of
//! docs/reliability.md), never asserted.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use crate::common::{chat, harness_with};

/// A connection from `source` (an address of the loopback range) to the proxy.
async fn connect_from(source: [u8; 4], to: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::from((source, 0)))?;
    socket.connect(to).await
}

/// Whether the server closes `stream` (reads to its end) within `limit`.
async fn closed_within(stream: &mut TcpStream, limit: Duration) -> bool {
    let mut buffer = [0u8; 4096];
    let read = async {
        loop {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    };
    tokio::time::timeout(limit, read).await.is_ok()
}

#[tokio::test]
async fn unfinished_headers_idle_connections_and_slow_bodies_are_cut() {
    let h = harness_with(|c| {
        c.server.header_timeout = Duration::from_secs(1);
        c.server.body_timeout = Duration::from_secs(1);
    })
    .await;
    let addr = h.proxy.addr;
    // Headers begun and never finished.
    let mut slow = TcpStream::connect(addr).await.expect("connect");
    slow.write_all(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .await
        .expect("write");
    // Opened and never used.
    let mut idle = TcpStream::connect(addr).await.expect("connect");
    // One request answered, then kept alive and left idle.
    let mut kept = TcpStream::connect(addr).await.expect("connect");
    kept.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .expect("write");
    let mut answer = vec![0u8; 1024];
    let read = kept.read(&mut answer).await.expect("answer");
    assert!(String::from_utf8_lossy(&answer[..read]).starts_with("HTTP/1.1 200"));
    let limit = Duration::from_secs(15);
    assert!(
        closed_within(&mut slow, limit).await,
        "the slow header was not cut"
    );
    assert!(
        closed_within(&mut idle, limit).await,
        "the idle connection stayed open"
    );
    assert!(
        closed_within(&mut kept, limit).await,
        "the idle keep-alive connection stayed open"
    );

    // A body promised and trickled: 408 in the API's shape.
    let mut trickle = TcpStream::connect(addr).await.expect("connect");
    trickle
        .write_all(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{\"model\"")
        .await
        .expect("write");
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(limit, trickle.read_to_end(&mut answer)).await;
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("request_timeout"), "{answer}");
}

#[tokio::test]
async fn a_victims_chat_goes_through_while_an_attacker_holds_a_thousand_connections() {
    let h = harness_with(|c| c.server.max_connections_per_ip = 200).await;
    let addr = h.proxy.addr;
    let victim_chat = || async {
        let started = Instant::now();
        let response = h.post_chat(&chat("Hello?")).await;
        assert_eq!(response.status(), 200);
        started.elapsed()
    };
    victim_chat().await;
    let alone = victim_chat().await;
    // A thousand connections from another address: half idle, half in the middle of headers.
    let mut held = Vec::new();
    for n in 0..1000 {
        let Ok(mut stream) = connect_from([127, 0, 0, 2], addr).await else {
            continue;
        };
        if n % 2 == 0 {
            let _ = stream
                .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
                .await;
        }
        held.push(stream);
    }
    // Past the cap the server closes them at once.
    let mut cut = 0;
    for stream in &mut held {
        if closed_within(stream, Duration::from_millis(20)).await {
            cut += 1;
        }
    }
    let beside = victim_chat().await;
    eprintln!(
        "victim chat alone: {:.1} ms; beside 1,000 attacker connections ({cut} closed by the per-address cap of 200): {:.1} ms",
        alone.as_secs_f64() * 1e3,
        beside.as_secs_f64() * 1e3
    );
    assert_eq!(
        cut,
        held.len() - 200,
        "all but 200 of the attacker's connections were closed"
    );
    let metrics = h
        .client
        .get(h.url("/metrics"))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    assert!(
        metrics.contains(&format!("memproxy_connections_refused_total {cut}")),
        "{metrics}"
    );
}
