//! Order statistics shared by the benchmarks.

/// The median (the mean of the middle two for an even count); NaN for no values.
pub fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

/// The `p`-th percentile of sorted values by nearest rank; `None` for no values.
pub fn percentile<T: Copy>(sorted: &[T], p: f64) -> Option<T> {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted.get(rank.min(sorted.len()).checked_sub(1)?).copied()
}
