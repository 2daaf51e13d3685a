//! Summaries shared by the benchmarks.

/// The median of `values` (sorted in place): the middle value, or the mean of the two
/// middle values of an even count. NaN for no values.
pub fn median(values: &mut [f64]) -> f64 {
    values.sort_by(|a, b| a.total_cmp(b));
    match values.len() {
        0 => f64::NAN,
        count if count % 2 == 1 => values[count / 2],
        count => (values[count / 2 - 1] + values[count / 2]) / 2.0,
    }
}
