//! The figures every benchmark reports: quantiles of durations, the process's resident memory,
//! and memproxy's numeric answer headers.

/// p-quantile of sorted durations, in milliseconds.
pub fn quantile_ms(sorted: &[std::time::Duration], q: f64) -> f64 {
    let index = ((sorted.len().max(1) as f64 - 1.0) * q).round() as usize;
    sorted.get(index).map_or(0.0, |d| d.as_secs_f64() * 1e3)
}

/// Resident memory of this process in MiB (Linux), for the reports.
pub fn rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|line| line.starts_with("VmRSS:"))
                .and_then(|line| line.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or(0.0, |kib| kib / 1024.0)
}

/// A numeric memproxy answer header (`x-memproxy-*`), 0 when absent.
pub fn header_number(response: &reqwest::Response, name: &str) -> f64 {
    response
        .headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(0.0)
}
