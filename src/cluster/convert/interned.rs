//! One shared copy of each distinct toleration list among the pods muster caches.
//!
//! Every pod carries tolerations — at least the two `DefaultTolerationSeconds` adds to each pod
//! (`node.kubernetes.io/not-ready` and `unreachable`) — and the pods of a job carry the same list.
//! Kept per pod they were six allocations, about 330 bytes; shared, one pointer: 13 MB of the
//! cache at 40,000 pods. The model only reads them, so sharing changes nothing it decides.
//!
//! Entries are weak: a list no cached pod holds any more is dropped at the next sweep, so pods
//! with tolerations of their own (a unique value each) cost no more than before and leave
//! nothing behind.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::{Arc, LazyLock, Weak};

use parking_lot::Mutex;
use rustc_hash::FxBuildHasher;

use crate::model::objects::Toleration;

/// Interned lists by content hash (collisions kept side by side).
struct Interner {
    lists: HashMap<u64, Vec<Weak<[Toleration]>>>,
    /// Entries at which the next sweep of dead entries runs: twice the live ones after the
    /// last, so sweeping costs O(1) per call, amortised.
    sweep_at: usize,
    entries: usize,
}

const FIRST_SWEEP: usize = 1024;

static TOLERATIONS: LazyLock<Mutex<Interner>> = LazyLock::new(|| {
    Mutex::new(Interner {
        lists: HashMap::new(),
        sweep_at: FIRST_SWEEP,
        entries: 0,
    })
});

/// The shared copy of `list` (made now if no cached pod holds one).
pub fn tolerations(list: Vec<Toleration>) -> Arc<[Toleration]> {
    let hash = FxBuildHasher.hash_one(&list);
    let mut interner = TOLERATIONS.lock();
    if let Some(found) = interner.lists.get(&hash).and_then(|same_hash| {
        same_hash
            .iter()
            .filter_map(Weak::upgrade)
            .find(|held| **held == *list)
    }) {
        return found;
    }
    let shared: Arc<[Toleration]> = Arc::from(list);
    interner
        .lists
        .entry(hash)
        .or_default()
        .push(Arc::downgrade(&shared));
    interner.entries += 1;
    if interner.entries >= interner.sweep_at {
        interner.sweep();
    }
    shared
}

impl Interner {
    fn sweep(&mut self) {
        self.lists.retain(|_, same_hash| {
            same_hash.retain(|w| w.strong_count() > 0);
            !same_hash.is_empty()
        });
        self.entries = self.lists.values().map(Vec::len).sum();
        self.sweep_at = (self.entries * 2).max(FIRST_SWEEP);
    }
}

/// Entries the interner holds now (live or not yet swept), for tests.
#[cfg(test)]
fn entries() -> usize {
    TOLERATIONS.lock().entries
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::objects::TolerationOperator;

    fn list(value: &str) -> Vec<Toleration> {
        vec![Toleration {
            key: "interned-test".into(),
            operator: TolerationOperator::Equal,
            value: value.into(),
            effect: "NoSchedule".into(),
        }]
    }

    #[test]
    fn equal_lists_share_one_copy_and_different_ones_do_not() {
        let a = tolerations(list("shared"));
        let b = tolerations(list("shared"));
        let c = tolerations(list("other"));
        assert!(Arc::ptr_eq(&a, &b));
        assert!(!Arc::ptr_eq(&a, &c));
        assert_eq!(*c, *list("other"));
    }

    #[test]
    fn lists_no_pod_holds_are_swept_away() {
        // Unique lists, each dropped at once: the interner never holds more than a sweep's worth.
        for i in 0..FIRST_SWEEP * 8 {
            drop(tolerations(list(&format!("unique-{i}"))));
        }
        assert!(
            entries() <= FIRST_SWEEP * 2,
            "{} entries after {} dropped lists",
            entries(),
            FIRST_SWEEP * 8
        );
        // A list still held survives the sweeps and is shared again.
        let kept = tolerations(list("kept"));
        for i in 0..FIRST_SWEEP * 4 {
            drop(tolerations(list(&format!("more-{i}"))));
        }
        assert!(Arc::ptr_eq(&kept, &tolerations(list("kept"))));
    }
}
