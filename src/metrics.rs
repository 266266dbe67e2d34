//! Prometheus metrics, one registry per server instance (so tests can run several side by side).
//!
//! The figure that matters most for a proxy is its **overhead**: time spent in memproxy itself,
//! i.e. total time minus time waiting on the upstream. It is recorded per request next to the
//! upstream latency, so a slow answer can be blamed on the right side.

use std::time::Duration;

use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, Opts, Registry, TextEncoder,
};

pub struct Metrics {
    registry: Registry,
    requests: IntCounterVec,
    upstream_seconds: HistogramVec,
    overhead_seconds: HistogramVec,
    exchanges: IntCounterVec,
    tokens: IntCounterVec,
    jobs: IntCounterVec,
    job_seconds: HistogramVec,
    rejections: IntCounterVec,
    open_indexes: IntGauge,
    rate_limited: prometheus::IntCounter,
    refused_connections: prometheus::IntCounter,
}

impl Metrics {
    pub fn new() -> Result<Metrics, prometheus::Error> {
        let registry = Registry::new();
        let requests = IntCounterVec::new(
            Opts::new(
                "memproxy_requests_total",
                "HTTP requests by route and status",
            ),
            &["route", "status"],
        )?;
        let upstream_seconds = HistogramVec::new(
            HistogramOpts::new(
                "memproxy_upstream_seconds",
                "Time spent waiting on the upstream LLM per request",
            )
            .buckets(vec![
                0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
                300.0,
            ]),
            &["route"],
        )?;
        let overhead_seconds = HistogramVec::new(
            HistogramOpts::new(
                "memproxy_overhead_seconds",
                "Time spent in memproxy itself per request (total minus upstream wait)",
            )
            .buckets(vec![
                0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                0.25, 1.0,
            ]),
            &["route", "mode"],
        )?;
        let exchanges = IntCounterVec::new(
            Opts::new(
                "memproxy_exchanges_total",
                "Chat exchanges handed to post-processing, by mode and outcome",
            ),
            &["mode", "outcome"],
        )?;
        let tokens = IntCounterVec::new(
            Opts::new(
                "memproxy_upstream_tokens_total",
                "Tokens reported by the upstream",
            ),
            &["kind"],
        )?;
        let jobs = IntCounterVec::new(
            Opts::new(
                "memproxy_memory_jobs_total",
                "Post-processing jobs by kind and outcome (done, retry, failed)",
            ),
            &["kind", "outcome"],
        )?;
        let job_seconds = HistogramVec::new(
            HistogramOpts::new(
                "memproxy_memory_job_seconds",
                "Time a post-processing job ran, by kind (memory LLM calls included)",
            )
            .buckets(vec![
                0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 7.5, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0, 120.0,
                300.0,
            ]),
            &["kind"],
        )?;
        registry.register(Box::new(job_seconds.clone()))?;
        let rejections = IntCounterVec::new(
            Opts::new(
                "memproxy_memory_rejections_total",
                "Facts and updates of the memory LLM refused by the gates, by reason",
            ),
            &["reason"],
        )?;
        registry.register(Box::new(rejections.clone()))?;
        let open_indexes = IntGauge::new(
            "memproxy_vector_indexes_open",
            "Vector indexes held in memory (bounded by memory.open_vector_indexes)",
        )?;
        registry.register(Box::new(open_indexes.clone()))?;
        let rate_limited = prometheus::IntCounter::new(
            "memproxy_rate_limited_total",
            "Requests refused with 429 because their key's budget (limits.requests_per_minute) was spent",
        )?;
        registry.register(Box::new(rate_limited.clone()))?;
        let refused_connections = prometheus::IntCounter::new(
            "memproxy_connections_refused_total",
            "Connections closed at once because server.max_connections or max_connections_per_ip was reached",
        )?;
        registry.register(Box::new(refused_connections.clone()))?;
        registry.register(Box::new(jobs.clone()))?;
        registry.register(Box::new(requests.clone()))?;
        registry.register(Box::new(upstream_seconds.clone()))?;
        registry.register(Box::new(overhead_seconds.clone()))?;
        registry.register(Box::new(exchanges.clone()))?;
        registry.register(Box::new(tokens.clone()))?;
        Ok(Metrics {
            registry,
            requests,
            upstream_seconds,
            overhead_seconds,
            exchanges,
            tokens,
            jobs,
            job_seconds,
            rejections,
            open_indexes,
            rate_limited,
            refused_connections,
        })
    }

    /// Gauges read at scrape time rather than kept up to date on every change.
    pub fn set_open_indexes(&self, open: usize) {
        self.open_indexes
            .set(i64::try_from(open).unwrap_or(i64::MAX));
    }

    pub fn count_rate_limited(&self) {
        self.rate_limited.inc();
    }

    pub fn count_refused_connection(&self) {
        self.refused_connections.inc();
    }

    pub fn count_request(&self, route: &str, status: u16) {
        self.requests
            .with_label_values(&[route, &status.to_string()])
            .inc();
    }

    pub fn observe_timing(&self, route: &str, mode: &str, upstream: Duration, overhead: Duration) {
        self.upstream_seconds
            .with_label_values(&[route])
            .observe(upstream.as_secs_f64());
        self.overhead_seconds
            .with_label_values(&[route, mode])
            .observe(overhead.as_secs_f64());
    }

    pub fn count_exchange(
        &self,
        mode: &str,
        outcome: &str,
        usage: Option<crate::conversation::reply::Usage>,
    ) {
        self.exchanges.with_label_values(&[mode, outcome]).inc();
        if let Some(usage) = usage {
            self.tokens
                .with_label_values(&["prompt"])
                .inc_by(usage.prompt_tokens);
            self.tokens
                .with_label_values(&["completion"])
                .inc_by(usage.completion_tokens);
        }
    }

    pub fn count_rejection(&self, reason: &str) {
        self.rejections.with_label_values(&[reason]).inc();
    }

    pub fn count_job(&self, kind: &str, outcome: &str) {
        self.jobs.with_label_values(&[kind, outcome]).inc();
    }

    /// How long one job ran (done or failed).
    pub fn observe_job(&self, kind: &str, elapsed: Duration) {
        self.job_seconds
            .with_label_values(&[kind])
            .observe(elapsed.as_secs_f64());
    }

    /// Chat requests observed and their summed overhead in seconds (for the benchmark report).
    pub fn overhead_totals(&self) -> (u64, f64) {
        let histogram = self
            .overhead_seconds
            .with_label_values(&["/v1/chat/completions", "passthrough"]);
        (histogram.get_sample_count(), histogram.get_sample_sum())
    }

    /// The Prometheus text exposition of every metric.
    pub fn render(&self) -> String {
        let mut out = Vec::new();
        // Encoding into a Vec cannot fail for the text format; an error would only drop metrics.
        if let Err(error) = TextEncoder::new().encode(&self.registry.gather(), &mut out) {
            tracing::warn!(%error, "could not encode metrics");
        }
        String::from_utf8_lossy(&out).into_owned()
    }
}
