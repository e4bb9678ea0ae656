//! One sort for the whole crate's cold paths (reports, parameter upload order, listings).
//!
//! Each `sort_by` of a distinct element type or closure instantiates the standard library's
//! stable sort again (about 12 KB of code each). Cold paths sort a permutation of indices
//! through [`stable_order`] instead: one instantiation, shared, with ties kept in their first
//! order like a stable sort.

use std::cmp::Ordering;

/// The permutation of `0..n` that sorts by `cmp`, equal elements in their original order.
///
/// A bottom-up merge sort of the indices (stable by construction): a few hundred bytes of
/// code where the standard library's sorts are kilobytes, for lists of at most thousands.
pub fn stable_order(n: usize, cmp: &dyn Fn(usize, usize) -> Ordering) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..n).collect();
    let mut buf: Vec<usize> = vec![0; n];
    let mut width = 1;
    while width < n {
        let mut lo = 0;
        while lo < n {
            let mid = (lo + width).min(n);
            let hi = (lo + 2 * width).min(n);
            let (mut i, mut j) = (lo, mid);
            for slot in &mut buf[lo..hi] {
                // The left run wins ties: equal elements keep their order.
                let left = j >= hi || (i < mid && cmp(idx[i], idx[j]) != Ordering::Greater);
                if left {
                    *slot = idx[i];
                    i += 1;
                } else {
                    *slot = idx[j];
                    j += 1;
                }
            }
            lo = hi;
        }
        std::mem::swap(&mut idx, &mut buf);
        width *= 2;
    }
    idx
}

/// Sorts `v` stably by `cmp` through [`stable_order`].
pub fn sort_stable_by<T>(v: &mut Vec<T>, cmp: impl Fn(&T, &T) -> Ordering) {
    let order = stable_order(v.len(), &|a, b| match (v.get(a), v.get(b)) {
        (Some(x), Some(y)) => cmp(x, y),
        _ => Ordering::Equal,
    });
    let mut slots: Vec<Option<T>> = v.drain(..).map(Some).collect();
    v.extend(
        order
            .into_iter()
            .filter_map(|i| slots.get_mut(i).and_then(Option::take)),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_ties_in_order() {
        let mut v = vec![(2, 'a'), (1, 'b'), (2, 'c'), (1, 'd'), (3, 'e')];
        sort_stable_by(&mut v, |x, y| y.0.cmp(&x.0));
        assert_eq!(v, [(3, 'e'), (2, 'a'), (2, 'c'), (1, 'b'), (1, 'd')]);
        assert_eq!(
            stable_order(0, &|_, _| Ordering::Equal),
            Vec::<usize>::new()
        );
        // Against the standard library's stable sort, on lengths around the run widths.
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for n in 0..70usize {
            let keys: Vec<u64> = (0..n)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    seed % 5
                })
                .collect();
            let mut want: Vec<usize> = (0..n).collect();
            want.sort_by_key(|&i| keys[i]);
            assert_eq!(
                stable_order(n, &|a, b| keys[a].cmp(&keys[b])),
                want,
                "n = {n}"
            );
        }
    }
}
