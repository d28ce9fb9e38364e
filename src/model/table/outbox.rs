//! What the verbs hand on, kept until the side that acts on it takes it whole: the notices to
//! tell, the gangs whose held bind calls must look again, the gangs found partly bound. Items
//! are only ever added, and taken all at once: nothing is removed, replaced or reordered in
//! between (the table counts how many notices it has looked at by position).

use std::fmt;

/// Items added since the last [`Outbox::take`], in the order they were added.
pub(in crate::model) struct Outbox<T> {
    items: Vec<T>,
}

impl<T> Default for Outbox<T> {
    fn default() -> Self {
        Outbox { items: Vec::new() }
    }
}

/// Shown as the list itself, as before it had its own type.
impl<T: fmt::Debug> fmt::Debug for Outbox<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.items.fmt(f)
    }
}

impl<T> Outbox<T> {
    /// Hands `item` on, after those added before it.
    pub fn push(&mut self, item: T) {
        self.items.push(item);
    }

    /// Hands `items` on, in their order, after those added before them.
    pub fn extend(&mut self, items: impl IntoIterator<Item = T>) {
        self.items.extend(items);
    }

    /// Everything added since the last call, in order; the outbox is empty again.
    pub fn take(&mut self) -> Vec<T> {
        std::mem::take(&mut self.items)
    }

    /// What is waiting to be taken, in order.
    pub fn waiting(&self) -> &[T] {
        &self.items
    }
}
