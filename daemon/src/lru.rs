//! Least-recently-used eviction for the daemon's bounded maps (the provider's cache, each
//! session's observations): entries carry a use counter, and eviction picks a batch of the
//! least recently used at once, so a full map costs O(1) amortized per insert instead of a
//! full scan per insert.

use std::collections::HashMap;
use std::hash::Hash;

/// How many entries to evict from a map of `len` entries that is over its cap: at least one,
/// and a sixteenth of the map, so the next fifteen sixteenths of inserts evict nothing.
pub fn batch(len: usize) -> usize {
    (len / 16).max(1)
}

/// The `count` least recently used keys of `map`, by the use counter `used` returns.
pub fn least_recent<K: Clone + Eq + Hash, V>(
    map: &HashMap<K, V>,
    count: usize,
    used: impl Fn(&V) -> u64,
) -> Vec<K> {
    least_recent_of(map.iter(), count, used)
}

/// [`least_recent`] among some of a map's entries only (those `entries` yields, e.g. a filter
/// of its iterator).
pub fn least_recent_of<'a, K: Clone + 'a, V: 'a>(
    entries: impl Iterator<Item = (&'a K, &'a V)>,
    count: usize,
    used: impl Fn(&V) -> u64,
) -> Vec<K> {
    let mut ticks: Vec<(u64, &K)> = entries.map(|(k, v)| (used(v), k)).collect();
    let count = count.min(ticks.len());
    if count == 0 {
        return Vec::new();
    }
    if count < ticks.len() {
        ticks.select_nth_unstable_by_key(count - 1, |(tick, _)| *tick);
    }
    ticks.truncate(count);
    ticks.into_iter().map(|(_, k)| k.clone()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_the_least_recently_used() {
        let map: HashMap<&str, u64> = [("a", 5), ("b", 1), ("c", 9), ("d", 3)].into_iter().collect();
        let mut oldest = least_recent(&map, 2, |t| *t);
        oldest.sort_unstable();
        assert_eq!(oldest, ["b", "d"]);
        assert_eq!(least_recent(&map, 10, |t| *t).len(), 4);
        assert!(least_recent(&map, 0, |t| *t).is_empty());
        let past_two = map.iter().filter(|(_, t)| **t > 2);
        let mut oldest = least_recent_of(past_two, 2, |t| *t);
        oldest.sort_unstable();
        assert_eq!(oldest, ["a", "d"]);
        assert!(least_recent_of(map.iter().filter(|_| false), 3, |t| *t).is_empty());
        assert_eq!((batch(1), batch(32), batch(4096)), (1, 2, 256));
    }
}
