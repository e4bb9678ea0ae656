//! One sort for the whole crate's cold paths (reports, parameter upload order, listings).
//!
//! Each `sort_by` of a distinct element type or closure instantiates the standard library's
//! stable sort again (about 12 KB of code each). Cold paths sort a permutation of indices
//! through [`stable_order`] instead: one instantiation, shared, with ties kept in their first
//! order like a stable sort.

use std::cmp::Ordering;

/// The permutation of `0..n` that sorts by `cmp`, equal elements in their original order.
pub fn stable_order(n: usize, cmp: &dyn Fn(usize, usize) -> Ordering) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..n).collect();
    idx.sort_unstable_by(|&a, &b| cmp(a, b).then(a.cmp(&b)));
    idx
}

/// Sorts `v` stably by `cmp` through [`stable_order`].
pub fn sort_stable_by<T>(v: &mut Vec<T>, cmp: impl Fn(&T, &T) -> Ordering) {
    let order = stable_order(v.len(), &|a, b| cmp(&v[a], &v[b]));
    let mut slots: Vec<Option<T>> = v.drain(..).map(Some).collect();
    v.extend(order.into_iter().filter_map(|i| slots[i].take()));
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
    }
}
