//! A vector of resource amounts, the unit of the capacity ledger.
//!
//! CPU is counted in milli-cores, memory and ephemeral storage in bytes, `pods` in pods, and every
//! other (extended) resource such as `nvidia.com/gpu` in whole units. Extended resources are a
//! short sorted list rather than a map: pods name zero, one or two of them.

use std::fmt;
use std::sync::Arc;

use super::quantity::{parse_milli, parse_units, QuantityError};

/// The extended resource that marks a gang member (see deploy/gang-admission-policy.yaml and
/// the scheduler configs' `managedResources`). Nothing counts it: kube-scheduler ignores it
/// (`ignoredByScheduler`), and what nodes publish of it (`cluster::node_marker`) is only for
/// NodeResourcesFit's queueing hint.
pub const GANG_MARKER: &str = "muster.dev/gang";

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Resources {
    pub cpu_milli: i64,
    pub memory: i64,
    pub ephemeral_storage: i64,
    pub pods: i64,
    /// Sorted by name, no duplicates, no zero amounts.
    pub extended: Vec<(Arc<str>, i64)>,
}

pub const CPU: &str = "cpu";
pub const MEMORY: &str = "memory";
pub const EPHEMERAL_STORAGE: &str = "ephemeral-storage";
pub const PODS: &str = "pods";

impl Resources {
    pub fn cpu(milli: i64) -> Self {
        Resources {
            cpu_milli: milli,
            ..Default::default()
        }
    }

    /// Builds from `(name, quantity)` pairs as they appear in a Kubernetes resource list.
    pub fn from_quantities<'a>(
        items: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Self, QuantityError> {
        let mut r = Resources::default();
        for (name, q) in items {
            r.set(name, q)?;
        }
        Ok(r)
    }

    /// Sets one named resource from its quantity string (replacing any earlier value).
    pub fn set(&mut self, name: &str, quantity: &str) -> Result<(), QuantityError> {
        match name {
            CPU => self.cpu_milli = parse_milli(quantity)?,
            MEMORY => self.memory = parse_units(quantity)?,
            EPHEMERAL_STORAGE => self.ephemeral_storage = parse_units(quantity)?,
            PODS => self.pods = parse_units(quantity)?,
            // muster's own marker is no capacity: kube-scheduler ignores it
            // (`ignoredByScheduler: true` in the scheduler configs, which makes NodeResourcesFit
            // skip it) and so does muster (kube-scheduler-semantics).
            GANG_MARKER => {
                parse_units(quantity)?;
            }
            other => {
                let v = parse_units(quantity)?;
                self.set_extended(other, v);
            }
        }
        Ok(())
    }

    pub fn set_extended(&mut self, name: &str, value: i64) {
        match self.extended.binary_search_by(|(n, _)| (**n).cmp(name)) {
            Ok(i) if value == 0 => {
                self.extended.remove(i);
            }
            Ok(i) => self.extended[i].1 = value,
            Err(_) if value == 0 => {}
            Err(i) => self.extended.insert(i, (Arc::from(name), value)),
        }
    }

    pub fn extended(&self, name: &str) -> i64 {
        self.extended
            .binary_search_by(|(n, _)| (**n).cmp(name))
            .map(|i| self.extended[i].1)
            .unwrap_or(0)
    }

    /// Calls `f(asked, other's)` for each resource `self` lists (cpu, memory, ephemeral
    /// storage, pods, then its extended resources), with `other`'s amount of it.
    pub fn each_against(&self, other: &Resources, mut f: impl FnMut(i64, i64)) {
        f(self.cpu_milli, other.cpu_milli);
        f(self.memory, other.memory);
        f(self.ephemeral_storage, other.ephemeral_storage);
        f(self.pods, other.pods);
        for (name, asked) in &self.extended {
            f(*asked, other.extended(name));
        }
    }

    /// Element-wise `self += other`.
    pub fn add(&mut self, other: &Resources) {
        self.combine(other, |a, b| a.saturating_add(b));
    }

    /// Element-wise `self -= other`.
    pub fn sub(&mut self, other: &Resources) {
        self.combine(other, |a, b| a.saturating_sub(b));
    }

    /// Element-wise `self = max(self, other)`.
    pub fn max_with(&mut self, other: &Resources) {
        self.combine(other, i64::max);
    }

    fn combine(&mut self, other: &Resources, f: impl Fn(i64, i64) -> i64) {
        self.cpu_milli = f(self.cpu_milli, other.cpu_milli);
        self.memory = f(self.memory, other.memory);
        self.ephemeral_storage = f(self.ephemeral_storage, other.ephemeral_storage);
        self.pods = f(self.pods, other.pods);
        if other.extended.is_empty() {
            // Still apply f(x, 0) to our own entries (matters for sub/max only when negative).
            return;
        }
        for (name, v) in &other.extended {
            let mine = self.extended(name);
            self.set_extended(name, f(mine, *v));
        }
    }

    /// The first resource for which `request` exceeds `self` (the free amount), if any.
    /// `None` means the request fits.
    pub fn shortfall(&self, request: &Resources) -> Option<InsufficientResource> {
        shortfall_against(request, self, None, &[])
    }

    pub fn fits_in(&self, free: &Resources) -> bool {
        free.shortfall(self).is_none()
    }

    pub fn is_zero(&self) -> bool {
        self.cpu_milli == 0
            && self.memory == 0
            && self.ephemeral_storage == 0
            && self.pods == 0
            && self.extended.is_empty()
    }
}

/// One resource a request cannot get on a node: what was asked and what is free (named as
/// kube-scheduler's `noderesources.InsufficientResource`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InsufficientResource {
    pub resource: Arc<str>,
    pub requested: i64,
    pub free: i64,
}

impl fmt::Display for InsufficientResource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "insufficient {}: requested {}, free {}",
            self.resource,
            describe_amount(&self.resource, self.requested),
            describe_amount(&self.resource, self.free)
        )
    }
}

/// Checks `request` against `allocatable + credit - sum(taken)` without building that vector:
/// this runs once per node per filter call, so it must not allocate.
pub fn shortfall_against(
    request: &Resources,
    allocatable: &Resources,
    credit: Option<&Resources>,
    taken: &[&Resources],
) -> Option<InsufficientResource> {
    type Field = fn(&Resources) -> i64;
    let free_of = |get: &dyn Fn(&Resources) -> i64| {
        let mut free = get(allocatable) + credit.map_or(0, get);
        for t in taken {
            free -= get(t);
        }
        free
    };
    let scalar: [(&str, i64, Field); 4] = [
        (CPU, request.cpu_milli, |r| r.cpu_milli),
        (MEMORY, request.memory, |r| r.memory),
        (EPHEMERAL_STORAGE, request.ephemeral_storage, |r| {
            r.ephemeral_storage
        }),
        (PODS, request.pods, |r| r.pods),
    ];
    for (name, want, get) in scalar {
        if want > 0 {
            let free = free_of(&get);
            if want > free {
                return Some(InsufficientResource {
                    resource: Arc::from(name),
                    requested: want,
                    free,
                });
            }
        }
    }
    for (name, want) in &request.extended {
        let free = free_of(&|r: &Resources| r.extended(name));
        if *want > free {
            return Some(InsufficientResource {
                resource: name.clone(),
                requested: *want,
                free,
            });
        }
    }
    None
}

/// Formats a shortfall for humans: cpu in cores/milli, memory in Mi, others as-is.
pub fn describe_amount(name: &str, v: i64) -> String {
    match name {
        CPU => format!("{v}m"),
        MEMORY | EPHEMERAL_STORAGE if v % (1 << 20) == 0 => format!("{}Mi", v >> 20),
        _ => v.to_string(),
    }
}

impl fmt::Display for Resources {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "cpu={} memory={} pods={}",
            describe_amount(CPU, self.cpu_milli),
            describe_amount(MEMORY, self.memory),
            self.pods
        )?;
        if self.ephemeral_storage > 0 {
            write!(f, " ephemeral-storage={}", self.ephemeral_storage)?;
        }
        for (n, v) in &self.extended {
            write!(f, " {n}={v}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
