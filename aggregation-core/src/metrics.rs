//! Request and job metrics in the Prometheus text exposition format 0.0.4 (feature `metrics`).
//!
//! The service counts every request it answers and every background job run; the host decides
//! where to expose them (the reference server serves `GET /metrics` when `AGG_METRICS=1`):
//!
//! ```no_run
//! # async fn demo(service: aggregation_core::AggregationService) {
//! use aggregation_core::metrics::Metrics;
//!
//! let metrics = service.metrics();
//! let body: String = metrics.render(); // answer it with `Content-Type: Metrics::CONTENT_TYPE`
//! # let _ = (body, Metrics::CONTENT_TYPE);
//! # }
//! ```
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `aggregation_http_requests_total` | counter | `method`, `route`, `status` |
//! | `aggregation_http_request_duration_seconds` | histogram | `method`, `route` |
//! | `aggregation_http_requests_in_flight` | gauge | |
//! | `aggregation_job_runs_total` | counter | `job`, `outcome` (`succeeded`, `failed`, `skipped`) |
//! | `aggregation_job_run_duration_seconds` | histogram | `job` (runs that ran) |
//!
//! Every label set is bounded, whatever clients send: `route` is the matched route template
//! (`/api/v1/accounts/{id}`), never the raw path, and `unmatched` for paths no route knows;
//! `method` is one of the methods the API knows or `other`; `status` is a code the service
//! answers; `job` a name registered with the runner. A request is counted when its answer is
//! ready; one whose client went away before is only seen in the in-flight gauge meanwhile.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use http::{Method, StatusCode};

use crate::job_outcome::RunOutcome;

/// The `route` label of a request whose path matched no route.
pub(crate) const UNMATCHED: &str = "unmatched";

/// Upper bounds (seconds) of the request-duration buckets.
const REQUEST_BUCKETS: [f64; 11] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// Upper bounds (seconds) of the job-duration buckets: jobs take seconds to minutes.
const JOB_BUCKETS: [f64; 10] = [0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0];

/// The metrics of one service; clones share them. Get it from
/// [`AggregationService::metrics`](crate::AggregationService::metrics).
#[derive(Clone, Default)]
pub struct Metrics {
    registry: Arc<Registry>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

#[derive(Default)]
struct Registry {
    /// By (method, route template).
    requests: Mutex<BTreeMap<(&'static str, &'static str), RequestSeries>>,
    in_flight: AtomicI64,
    /// By job name.
    jobs: Mutex<BTreeMap<String, JobSeries>>,
}

#[derive(Default)]
struct RequestSeries {
    by_status: BTreeMap<u16, u64>,
    duration: Histogram<{ REQUEST_BUCKETS.len() }>,
}

#[derive(Default)]
struct JobSeries {
    succeeded: u64,
    failed: u64,
    skipped: u64,
    duration: Histogram<{ JOB_BUCKETS.len() }>,
}

/// Observations per bucket (not cumulative; the renderer adds them up), their sum and count.
struct Histogram<const N: usize> {
    buckets: [u64; N],
    sum: f64,
    count: u64,
}

impl<const N: usize> Default for Histogram<N> {
    fn default() -> Self {
        Self {
            buckets: [0; N],
            sum: 0.0,
            count: 0,
        }
    }
}

impl<const N: usize> Histogram<N> {
    fn observe(&mut self, bounds: &[f64; N], seconds: f64) {
        if let Some(index) = bounds.iter().position(|bound| seconds <= *bound) {
            self.buckets[index] += 1;
        }
        self.sum += seconds;
        self.count += 1;
    }

    /// The `_bucket`, `_sum` and `_count` lines; `labels` already escaped, without braces.
    fn render(&self, out: &mut String, name: &str, labels: &str, bounds: &[f64; N]) {
        let mut cumulative = 0;
        for (bound, observed) in bounds.iter().zip(self.buckets) {
            cumulative += observed;
            let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{bound}\"}} {cumulative}");
        }
        let _ = writeln!(out, "{name}_bucket{{{labels},le=\"+Inf\"}} {}", self.count);
        let _ = writeln!(out, "{name}_sum{{{labels}}} {}", self.sum);
        let _ = writeln!(out, "{name}_count{{{labels}}} {}", self.count);
    }
}

/// A poisoned lock only means a panic elsewhere mid-update of plain counters: keep counting.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A label value with `\`, `"` and line feeds escaped as the text format wants.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The `method` label: the methods the API knows, anything else folded into `other`.
fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// Counts a request as in flight until dropped (also when the client goes away mid-request).
pub(crate) struct InFlight(Arc<Registry>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Metrics {
    /// The content type of [`Metrics::render`]'s text.
    pub const CONTENT_TYPE: &'static str = "text/plain; version=0.0.4; charset=utf-8";

    /// Every metric in the Prometheus text exposition format 0.0.4, series in a stable order.
    pub fn render(&self) -> String {
        let mut out = String::new();
        self.render_requests(&mut out);
        self.render_jobs(&mut out);
        out
    }

    fn render_requests(&self, out: &mut String) {
        let requests = lock(&self.registry.requests);
        let total = "aggregation_http_requests_total";
        header(
            out,
            total,
            "counter",
            "HTTP requests answered, by method, route template and status code.",
        );
        for ((method, route), series) in requests.iter() {
            let route = escape(route);
            for (status, count) in &series.by_status {
                let _ = writeln!(
                    out,
                    "{total}{{method=\"{method}\",route=\"{route}\",status=\"{status}\"}} {count}"
                );
            }
        }
        let duration = "aggregation_http_request_duration_seconds";
        header(
            out,
            duration,
            "histogram",
            "Time from a request's arrival to its answer, by method and route template.",
        );
        for ((method, route), series) in requests.iter() {
            let labels = format!("method=\"{method}\",route=\"{}\"", escape(route));
            series
                .duration
                .render(out, duration, &labels, &REQUEST_BUCKETS);
        }
        drop(requests);
        let in_flight = "aggregation_http_requests_in_flight";
        header(out, in_flight, "gauge", "HTTP requests being handled now.");
        let _ = writeln!(
            out,
            "{in_flight} {}",
            self.registry.in_flight.load(Ordering::Relaxed)
        );
    }

    fn render_jobs(&self, out: &mut String) {
        let jobs = lock(&self.registry.jobs);
        let runs = "aggregation_job_runs_total";
        header(
            out,
            runs,
            "counter",
            "Background job runs, by job and outcome (skipped: leased elsewhere or not due).",
        );
        for (name, series) in jobs.iter() {
            let job = escape(name);
            for (outcome, count) in [
                ("succeeded", series.succeeded),
                ("failed", series.failed),
                ("skipped", series.skipped),
            ] {
                let _ = writeln!(out, "{runs}{{job=\"{job}\",outcome=\"{outcome}\"}} {count}");
            }
        }
        let duration = "aggregation_job_run_duration_seconds";
        header(
            out,
            duration,
            "histogram",
            "Time a background job ran, by job (runs that were skipped are not timed).",
        );
        for (name, series) in jobs.iter() {
            let labels = format!("job=\"{}\"", escape(name));
            series.duration.render(out, duration, &labels, &JOB_BUCKETS);
        }
    }

    /// Counts a request in flight until the guard is dropped.
    pub(crate) fn in_flight(&self) -> InFlight {
        self.registry.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(self.registry.clone())
    }

    /// Counts an answered request; `route` is the matched template (`None`: no route matched).
    pub(crate) fn record_request(
        &self,
        method: &Method,
        route: Option<&'static str>,
        status: StatusCode,
        elapsed: Duration,
    ) {
        let key = (method_label(method), route.unwrap_or(UNMATCHED));
        let mut requests = lock(&self.registry.requests);
        let series = requests.entry(key).or_default();
        *series.by_status.entry(status.as_u16()).or_default() += 1;
        series
            .duration
            .observe(&REQUEST_BUCKETS, elapsed.as_secs_f64());
    }

    /// Counts a job run; `ran_for` is how long it ran (`None` when skipped).
    pub(crate) fn record_job(&self, name: &str, outcome: &RunOutcome, ran_for: Option<Duration>) {
        let mut jobs = lock(&self.registry.jobs);
        if !jobs.contains_key(name) {
            jobs.insert(name.to_owned(), JobSeries::default());
        }
        let Some(series) = jobs.get_mut(name) else {
            return;
        };
        match outcome {
            RunOutcome::Succeeded(_) => series.succeeded += 1,
            RunOutcome::Failed(_) => series.failed += 1,
            RunOutcome::Skipped => series.skipped += 1,
        }
        if let Some(ran_for) = ran_for {
            series.duration.observe(&JOB_BUCKETS, ran_for.as_secs_f64());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_render_as_counters_and_cumulative_histograms() {
        let metrics = Metrics::default();
        let route = Some("/api/v1/accounts/{id}");
        metrics.record_request(
            &Method::GET,
            route,
            StatusCode::OK,
            Duration::from_millis(3),
        );
        metrics.record_request(
            &Method::GET,
            route,
            StatusCode::OK,
            Duration::from_millis(30),
        );
        metrics.record_request(
            &Method::GET,
            route,
            StatusCode::NOT_FOUND,
            Duration::from_secs(20),
        );
        metrics.record_request(
            &Method::from_bytes(b"BREW").expect("method"),
            None,
            StatusCode::NOT_FOUND,
            Duration::ZERO,
        );
        let guard = metrics.in_flight();
        let text = metrics.render();
        let lines: Vec<&str> = text.lines().collect();
        for expected in [
            "# TYPE aggregation_http_requests_total counter",
            r#"aggregation_http_requests_total{method="GET",route="/api/v1/accounts/{id}",status="200"} 2"#,
            r#"aggregation_http_requests_total{method="GET",route="/api/v1/accounts/{id}",status="404"} 1"#,
            r#"aggregation_http_requests_total{method="other",route="unmatched",status="404"} 1"#,
            "# TYPE aggregation_http_request_duration_seconds histogram",
            r#"aggregation_http_request_duration_seconds_bucket{method="GET",route="/api/v1/accounts/{id}",le="0.005"} 1"#,
            r#"aggregation_http_request_duration_seconds_bucket{method="GET",route="/api/v1/accounts/{id}",le="0.05"} 2"#,
            r#"aggregation_http_request_duration_seconds_bucket{method="GET",route="/api/v1/accounts/{id}",le="10"} 2"#,
            r#"aggregation_http_request_duration_seconds_bucket{method="GET",route="/api/v1/accounts/{id}",le="+Inf"} 3"#,
            r#"aggregation_http_request_duration_seconds_count{method="GET",route="/api/v1/accounts/{id}"} 3"#,
            "aggregation_http_requests_in_flight 1",
        ] {
            assert!(
                lines.contains(&expected),
                "{expected} missing from:\n{text}"
            );
        }
        drop(guard);
        assert!(
            metrics
                .render()
                .contains("aggregation_http_requests_in_flight 0\n")
        );
    }

    #[test]
    fn jobs_render_every_outcome_and_escape_their_names() {
        let metrics = Metrics::default();
        let name = "nightly \"export\"";
        metrics.record_job(
            name,
            &RunOutcome::Succeeded("done".to_owned()),
            Some(Duration::from_secs(2)),
        );
        metrics.record_job(name, &RunOutcome::Skipped, None);
        let text = metrics.render();
        for expected in [
            r#"aggregation_job_runs_total{job="nightly \"export\"",outcome="succeeded"} 1"#,
            r#"aggregation_job_runs_total{job="nightly \"export\"",outcome="failed"} 0"#,
            r#"aggregation_job_runs_total{job="nightly \"export\"",outcome="skipped"} 1"#,
            r#"aggregation_job_run_duration_seconds_bucket{job="nightly \"export\"",le="1"} 0"#,
            r#"aggregation_job_run_duration_seconds_bucket{job="nightly \"export\"",le="5"} 1"#,
            r#"aggregation_job_run_duration_seconds_sum{job="nightly \"export\""} 2"#,
            r#"aggregation_job_run_duration_seconds_count{job="nightly \"export\""} 1"#,
        ] {
            assert!(
                text.lines().any(|line| line == expected),
                "{expected} missing from:\n{text}"
            );
        }
    }

    #[test]
    fn every_sample_line_is_well_formed() {
        let metrics = Metrics::default();
        metrics.record_request(
            &Method::POST,
            Some("/api/v1/sessions"),
            StatusCode::CREATED,
            Duration::from_millis(120),
        );
        metrics.record_job("purge_expired", &RunOutcome::Failed("x".to_owned()), None);
        for line in metrics.render().lines() {
            if line.starts_with('#') {
                assert!(
                    line.starts_with("# HELP ") || line.starts_with("# TYPE "),
                    "{line}"
                );
                continue;
            }
            let (series, value) = line.rsplit_once(' ').expect("a value");
            assert!(value.parse::<f64>().is_ok(), "{line}");
            assert!(series.starts_with("aggregation_"), "{line}");
            assert_eq!(series.matches('{').count(), series.matches('}').count());
        }
    }
}
