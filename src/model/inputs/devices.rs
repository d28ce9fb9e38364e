//! Dynamic Resource Allocation (resource.k8s.io/v1) as the model reads it: the devices each
//! ResourceSlice publishes, the DeviceClasses, the ResourceClaims (what they ask for and which
//! devices they were given) and the ResourceClaimTemplates pods' claims are made from.
//!
//! The cluster adapter (`crate::cluster::devices`) builds these from the API objects; the rule
//! that reads them is `rules::dynamic_resources`. What muster does not simulate is kept as a
//! named reason (`unsupported`), never dropped: a device muster cannot judge is not counted as
//! free, and a claim muster cannot judge fits on no node (see the rule).
//!
//! Which slices count, as kube-scheduler's structured allocator takes them: per pool (driver,
//! pool name), only the slices of the newest generation, and only when all
//! `resourceSliceCount` slices of that generation are there (a pool being updated offers
//! nothing).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use cel::Program;
use parking_lot::Mutex;
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use super::objects::NodeInfo;
use crate::model::inputs::terms::NodeSelector;

/// A device as kube-scheduler names it: driver, pool and device name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DeviceId {
    pub driver: Arc<str>,
    pub pool: Arc<str>,
    pub name: Arc<str>,
}

impl std::fmt::Display for DeviceId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}/{}", self.driver, self.pool, self.name)
    }
}

/// One attribute value, as the CEL environment of DRA selectors sees it.
#[derive(Clone, Debug, PartialEq)]
pub enum AttrValue {
    Bool(bool),
    Int(i64),
    String(String),
    /// A semantic version: a `semver` value in Kubernetes' CEL, which muster does not
    /// evaluate (a selector reading it cannot be evaluated; see the rule).
    Version(String),
    /// A list-typed attribute (`bools`, `ints`, `strings`, `versions`).
    List(Vec<AttrValue>),
}

/// Which nodes a device can be used from.
#[derive(Clone, Debug, PartialEq)]
pub enum NodeScope {
    /// A node-local device (`nodeName`).
    Node(Arc<str>),
    /// `nodeSelector`.
    Selector(NodeSelector),
    /// `allNodes: true`.
    AllNodes,
}

impl NodeScope {
    pub fn admits(&self, node: &NodeInfo) -> bool {
        match self {
            NodeScope::Node(n) => **n == *node.name,
            NodeScope::Selector(s) => s.matches(node),
            NodeScope::AllNodes => true,
        }
    }
}

/// One device of a slice.
#[derive(Clone, Debug, PartialEq)]
pub struct Device {
    pub name: Arc<str>,
    /// Qualified attribute names (`domain/name`, or `name` in the driver's domain).
    pub attributes: BTreeMap<String, AttrValue>,
    /// Qualified capacity names and their quantities as written.
    pub capacity: BTreeMap<String, String>,
    /// Its own node scope, in a slice with `perDeviceNodeSelection`.
    pub scope: Option<NodeScope>,
    /// Why muster cannot tell whether allocating this device is possible (shared counters of
    /// partitionable devices, multiple allocations of consumable capacity, taints): such a
    /// device is never counted as free.
    pub unsupported: Option<&'static str>,
}

/// A ResourceSlice.
#[derive(Clone, Debug, PartialEq)]
pub struct Slice {
    pub driver: Arc<str>,
    pub pool: Arc<str>,
    pub generation: i64,
    pub slice_count: i64,
    /// The slice's node scope; `None` with `perDeviceNodeSelection` (each device has one).
    pub scope: Option<NodeScope>,
    pub devices: Vec<Device>,
}

/// A CEL selector of a DeviceClass or a request, compiled once; evaluating it on a device is
/// `rules::dynamic_resources`.
pub struct Selector {
    pub expression: String,
    program: Result<Program, String>,
}

impl std::fmt::Debug for Selector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.expression)
    }
}

impl PartialEq for Selector {
    fn eq(&self, other: &Self) -> bool {
        self.expression == other.expression
    }
}

impl Selector {
    pub fn compile(expression: &str) -> Self {
        Selector {
            expression: expression.to_string(),
            program: Program::compile(expression).map_err(|e| e.to_string()),
        }
    }

    /// The compiled program, or why the expression did not compile.
    pub fn program(&self) -> Result<&Program, &str> {
        self.program.as_ref().map_err(String::as_str)
    }
}

/// Whether a device matches a request's selectors, or why they could not be evaluated.
pub type Verdict = Result<bool, Arc<str>>;

/// One request of a claim.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    pub name: String,
    pub class: Arc<str>,
    pub mode: AllocationMode,
    pub selectors: Vec<Arc<Selector>>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AllocationMode {
    /// `ExactCount` with `count` (1 when not given).
    Exact(u32),
    /// `All`: every matching device of the node, at least one.
    All,
}

/// What a claim (or a template's claim) asks for.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct ClaimSpec {
    pub requests: Vec<Request>,
    /// What muster does not simulate in it (`firstAvailable`, `adminAccess`, capacity
    /// requests, constraints, tolerations…), named for the message: such a claim fits nowhere.
    pub unsupported: Option<String>,
}

/// Where a claim's devices were allocated (`status.allocation`).
#[derive(Clone, Debug, PartialEq)]
pub struct Allocation {
    pub devices: Vec<DeviceId>,
    /// The nodes the allocation can be used from; `None`: every node.
    pub node_selector: Option<NodeSelector>,
}

/// A ResourceClaim.
#[derive(Clone, Debug, PartialEq)]
pub struct Claim {
    pub spec: ClaimSpec,
    pub allocation: Option<Allocation>,
}

/// A DeviceClass.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct DeviceClass {
    pub selectors: Vec<Arc<Selector>>,
}

/// One entry of a pod's `spec.resourceClaims`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodClaim {
    /// The name within the pod.
    pub name: String,
    pub source: ClaimSource,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClaimSource {
    /// `resourceClaimName`: a claim that exists on its own (maybe shared by several pods).
    Claim(Arc<str>),
    /// `resourceClaimTemplateName`; `generated`: the claim made for this pod, from
    /// `status.resourceClaimStatuses`, once it exists.
    Template {
        template: Arc<str>,
        generated: Option<Arc<str>>,
    },
}

type PoolKey = (Arc<str>, Arc<str>);
/// Namespace and name.
pub type ObjectKey = (Arc<str>, Arc<str>);

/// A slice as the inventory keeps it: with its devices' ids, made once, and whether it is of
/// its pool's generation that counts.
#[derive(Clone)]
struct Stored {
    slice: Slice,
    ids: Vec<DeviceId>,
    current: bool,
}

/// Every DRA object muster reads, with the indexes the rule asks.
#[derive(Default)]
pub struct DeviceInventory {
    slices: HashMap<Arc<str>, Stored>,
    /// Node name → names of its node-local slices.
    by_node: HashMap<Arc<str>, BTreeSet<Arc<str>>>,
    /// Slices with a node selector, `allNodes` or per-device node selection.
    wide: BTreeSet<Arc<str>>,
    /// Per pool, its slices; and the generation that counts (`None`: the pool is incomplete).
    pools: HashMap<PoolKey, (BTreeSet<Arc<str>>, Option<i64>)>,
    classes: HashMap<Arc<str>, DeviceClass>,
    claims: HashMap<ObjectKey, Claim>,
    templates: HashMap<ObjectKey, ClaimSpec>,
    /// Devices allocated to some claim, counted per claim.
    allocated: HashMap<DeviceId, u32>,
    /// Compiled selectors by expression: each expression is compiled once, and kept while a
    /// class, claim or template holds it (so a selector's address names it while it has
    /// verdicts). Bounded: see [`MAX_SELECTORS`].
    compiled: HashMap<String, Arc<Selector>>,
    /// Per selector and device (by address), its verdict: a selector is evaluated once per
    /// device, across simulations. Emptied whenever a slice changes (devices are replaced), and
    /// when it reaches [`MAX_VERDICTS`].
    verdicts: Mutex<HashMap<(usize, usize), Verdict>>,
    /// The kinds whose first list has not completed (see [`DeviceInventory::expect_lists`]);
    /// empty by default (tests and benches fill the inventory by hand).
    unlisted: BTreeSet<&'static str>,
}

/// What the watches delivered, for a table rebuilt at a leader take-over (the watches keep
/// running and re-list only after an error): every object, and the kinds still unlisted. The
/// verdict cache starts empty (it is keyed by the devices' addresses).
impl Clone for DeviceInventory {
    fn clone(&self) -> Self {
        DeviceInventory {
            slices: self.slices.clone(),
            by_node: self.by_node.clone(),
            wide: self.wide.clone(),
            pools: self.pools.clone(),
            classes: self.classes.clone(),
            claims: self.claims.clone(),
            templates: self.templates.clone(),
            allocated: self.allocated.clone(),
            compiled: self.compiled.clone(),
            verdicts: Mutex::default(),
            unlisted: self.unlisted.clone(),
        }
    }
}

/// Compiled expressions kept before the ones no class, claim or template holds any longer are
/// dropped (with their verdicts): claims come and go with their pods, and each may bring an
/// expression of its own.
const MAX_SELECTORS: usize = 4_096;

/// Verdicts kept (about 40 bytes each): beyond, the cache starts again empty. 5,000 nodes × 8
/// devices × a class's and a request's selector take 80,000.
const MAX_VERDICTS: usize = 500_000;

impl DeviceInventory {
    /// The compiled selector for `expression`, compiled on first use.
    pub fn selector(&mut self, expression: &str) -> Arc<Selector> {
        if let Some(s) = self.compiled.get(expression) {
            return s.clone();
        }
        if self.compiled.len() >= MAX_SELECTORS {
            self.drop_unused_selectors();
        }
        let s = Arc::new(Selector::compile(expression));
        self.compiled.insert(expression.to_string(), s.clone());
        s
    }

    /// Drops the compiled selectors nothing else holds, and their verdicts (a selector
    /// compiled later may get a dropped one's address).
    fn drop_unused_selectors(&mut self) {
        let mut gone: HashSet<usize> = HashSet::default();
        self.compiled.retain(|_, s| {
            let unused = Arc::strong_count(s) == 1;
            if unused {
                gone.insert(Arc::as_ptr(s) as usize);
            }
            !unused
        });
        if !gone.is_empty() {
            self.verdicts
                .get_mut()
                .retain(|(selector, _), _| !gone.contains(selector));
        }
    }

    /// Whether `device` matches every one of `selectors`, in order: the first that does not
    /// match (or cannot be evaluated) decides. Each selector's verdict on the device comes
    /// from `evaluate` the first time, and is kept.
    pub fn selectors_verdict<'s>(
        &self,
        selectors: impl IntoIterator<Item = &'s Arc<Selector>>,
        device: &Device,
        mut evaluate: impl FnMut(&Selector) -> Verdict,
    ) -> Verdict {
        let mut cache = self.verdicts.lock();
        for selector in selectors {
            let key = (
                Arc::as_ptr(selector) as usize,
                device as *const Device as usize,
            );
            let v = match cache.get(&key) {
                Some(v) => v.clone(),
                None => {
                    let v = evaluate(selector);
                    if cache.len() >= MAX_VERDICTS {
                        cache.clear();
                    }
                    cache.insert(key, v.clone());
                    v
                }
            };
            if v != Ok(true) {
                return v;
            }
        }
        Ok(true)
    }

    pub fn apply_slice(&mut self, name: Arc<str>, slice: Slice) {
        self.verdicts.get_mut().clear();
        self.remove_slice(&name);
        match &slice.scope {
            Some(NodeScope::Node(node)) => {
                self.by_node
                    .entry(node.clone())
                    .or_default()
                    .insert(name.clone());
            }
            _ => {
                self.wide.insert(name.clone());
            }
        }
        let pool = (slice.driver.clone(), slice.pool.clone());
        self.pools
            .entry(pool.clone())
            .or_default()
            .0
            .insert(name.clone());
        let ids = slice
            .devices
            .iter()
            .map(|d| DeviceId {
                driver: slice.driver.clone(),
                pool: slice.pool.clone(),
                name: d.name.clone(),
            })
            .collect();
        self.slices.insert(
            name,
            Stored {
                slice,
                ids,
                current: false,
            },
        );
        self.recount_pool(&pool);
    }

    pub fn remove_slice(&mut self, name: &str) {
        let Some(Stored { slice: old, .. }) = self.slices.remove(name) else {
            return;
        };
        self.verdicts.get_mut().clear();
        if let Some(NodeScope::Node(node)) = &old.scope {
            if let Some(set) = self.by_node.get_mut(node) {
                set.remove(name);
                if set.is_empty() {
                    self.by_node.remove(node);
                }
            }
        } else {
            self.wide.remove(name);
        }
        let pool = (old.driver, old.pool);
        if let Some((set, _)) = self.pools.get_mut(&pool) {
            set.remove(name);
            if set.is_empty() {
                self.pools.remove(&pool);
                return;
            }
        }
        self.recount_pool(&pool);
    }

    /// The generation that counts in `pool`: the newest, when all its slices are there.
    fn recount_pool(&mut self, pool: &PoolKey) {
        let Some((names, _)) = self.pools.get(pool) else {
            return;
        };
        let newest = names
            .iter()
            .filter_map(|n| self.slices.get(n))
            .map(|s| s.slice.generation)
            .max();
        let current = newest.filter(|&g| {
            let of_newest: Vec<&Slice> = names
                .iter()
                .filter_map(|n| self.slices.get(n))
                .map(|s| &s.slice)
                .filter(|s| s.generation == g)
                .collect();
            of_newest
                .iter()
                .all(|s| s.slice_count <= of_newest.len() as i64)
        });
        let names: Vec<Arc<str>> = names.iter().cloned().collect();
        for n in names {
            if let Some(s) = self.slices.get_mut(&n) {
                s.current = current == Some(s.slice.generation);
            }
        }
        if let Some(entry) = self.pools.get_mut(pool) {
            entry.1 = current;
        }
    }

    pub fn retain_slices(&mut self, keep: impl Fn(&str) -> bool) {
        let gone: Vec<Arc<str>> = self.slices.keys().filter(|k| !keep(k)).cloned().collect();
        for name in gone {
            self.remove_slice(&name);
        }
    }

    pub fn slice_count(&self) -> usize {
        self.slices.len()
    }

    pub fn apply_class(&mut self, name: Arc<str>, class: DeviceClass) {
        self.classes.insert(name, class);
    }

    pub fn remove_class(&mut self, name: &str) {
        self.classes.remove(name);
    }

    pub fn retain_classes(&mut self, keep: impl Fn(&str) -> bool) {
        self.classes.retain(|k, _| keep(k));
    }

    pub fn class_count(&self) -> usize {
        self.classes.len()
    }

    pub fn class(&self, name: &str) -> Option<&DeviceClass> {
        self.classes.get(name)
    }

    pub fn apply_claim(&mut self, key: ObjectKey, claim: Claim) {
        self.remove_claim(&key);
        for d in claim.allocation.iter().flat_map(|a| &a.devices) {
            *self.allocated.entry(d.clone()).or_default() += 1;
        }
        self.claims.insert(key, claim);
    }

    pub fn remove_claim(&mut self, key: &ObjectKey) {
        let Some(old) = self.claims.remove(key) else {
            return;
        };
        for d in old.allocation.iter().flat_map(|a| &a.devices) {
            if let Some(n) = self.allocated.get_mut(d) {
                *n -= 1;
                if *n == 0 {
                    self.allocated.remove(d);
                }
            }
        }
    }

    pub fn retain_claims(&mut self, keep: impl Fn(&ObjectKey) -> bool) {
        let gone: Vec<ObjectKey> = self.claims.keys().filter(|k| !keep(k)).cloned().collect();
        for key in gone {
            self.remove_claim(&key);
        }
    }

    pub fn claim_count(&self) -> usize {
        self.claims.len()
    }

    pub fn claim(&self, namespace: &str, name: &str) -> Option<&Claim> {
        self.claims.get(&(Arc::from(namespace), Arc::from(name)))
    }

    pub fn apply_template(&mut self, key: ObjectKey, spec: ClaimSpec) {
        self.templates.insert(key, spec);
    }

    pub fn remove_template(&mut self, key: &ObjectKey) {
        self.templates.remove(key);
    }

    pub fn retain_templates(&mut self, keep: impl Fn(&ObjectKey) -> bool) {
        self.templates.retain(|k, _| keep(k));
    }

    pub fn template_count(&self) -> usize {
        self.templates.len()
    }

    pub fn template(&self, namespace: &str, name: &str) -> Option<&ClaimSpec> {
        self.templates.get(&(Arc::from(namespace), Arc::from(name)))
    }

    /// The watches of `kinds` are starting: until each has completed its first list, no claim
    /// is judged (see [`DeviceInventory::unlisted`]).
    pub fn expect_lists(&mut self, kinds: &[&'static str]) {
        self.unlisted.extend(kinds.iter().copied());
    }

    /// The first list of `kind` completed (again, after a re-list: nothing changes).
    pub fn listed(&mut self, kind: &str) {
        self.unlisted.remove(kind);
    }

    /// The kinds not listed yet, when some are. The lists fill the inventory object by object,
    /// so before all four complete a member's own claim can be read while the claims holding
    /// devices it would take are not, or its template while its own claim is not: judging
    /// then could seat a gang on devices taken (no-overcommit). Its gang holds nothing
    /// instead, and the message says what muster waits for.
    pub fn unlisted(&self) -> Option<String> {
        if self.unlisted.is_empty() {
            return None;
        }
        let kinds: Vec<&str> = self.unlisted.iter().copied().collect();
        Some(format!(
            "muster has not listed the {} of resource.k8s.io/v1 yet: a gang with claims \
             holds nothing until it has",
            kinds.join(", ")
        ))
    }

    /// Whether some claim holds the device.
    pub fn is_allocated(&self, id: &DeviceId) -> bool {
        self.allocated.contains_key(id)
    }

    /// Whether any slice is known (a cluster without DRA skips the rule's work).
    pub fn is_empty(&self) -> bool {
        self.slices.is_empty() && self.claims.is_empty()
    }

    /// Every device usable from `node`, in a stable order (node-local slices first, by slice
    /// name), with its id, from the pools' current generation only.
    pub fn devices_on<'a, 'n>(
        &'a self,
        node: &'n NodeInfo,
    ) -> impl Iterator<Item = (&'a DeviceId, &'a Device)> + 'n
    where
        'a: 'n,
    {
        let local = self.by_node.get(&*node.name).into_iter().flatten();
        local
            .chain(self.wide.iter())
            .filter_map(move |name| self.slices.get(name).filter(|s| s.current))
            .flat_map(move |stored| {
                let s = &stored.slice;
                let slice_admits = s.scope.as_ref().is_none_or(|sc| sc.admits(node));
                s.devices
                    .iter()
                    .zip(&stored.ids)
                    .filter_map(move |(d, id)| {
                        let admits = match &d.scope {
                            Some(scope) => scope.admits(node),
                            None => s.scope.is_some() && slice_admits,
                        };
                        admits.then_some((id, d))
                    })
            })
    }
}

#[cfg(test)]
mod tests;
